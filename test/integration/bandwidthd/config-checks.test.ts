/**
 * Config problems found only by looking at the machine, as `bandwidth check` and `serve` report
 * them: both refuse the file, name the JSON pointer and say what is wrong, before the daemon
 * takes its lock or touches anything.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { runHostkit } from '../hostkit-process.ts';

const dir = mkdtempSync(join(tmpdir(), 'hk-bwd-checks-'));

test('check and serve refuse docker.tls_verify with a cert directory lacking cert.pem, key.pem, ca.pem, naming the path and the missing files', () => {
  const certs = join(dir, 'certs');
  mkdirSync(certs);
  writeFileSync(join(certs, 'cert.pem'), 'x');
  const config = join(dir, 'config.yaml');
  writeFileSync(
    config,
    stringify({
      general: { socket_path: join(dir, 'bw.sock'), lock_file: join(dir, 'bw.lock'), pid_file: join(dir, 'bw.pid') },
      logging: { file: join(dir, 'bw.log') },
      database: { path: join(dir, 'bw.db') },
      docker: { endpoint: 'tcp://127.0.0.1:18450', tls_verify: true, tls_cert_path: certs },
    }),
  );
  const problem = new RegExp(`/docker/tls_cert_path.*${JSON.stringify(certs).replace(/[/.]/g, '\\$&')} lacks key\\.pem, ca\\.pem`);
  const check = runHostkit(['bandwidthd', 'check', '--config', config]);
  assert.equal(check.code, 1, check.stdout + check.stderr);
  assert.match(check.stdout + check.stderr, problem);
  const serve = runHostkit(['bandwidthd', 'serve', '--config', config]);
  assert.equal(serve.code, 1, serve.stdout + serve.stderr);
  assert.match(serve.stdout + serve.stderr, problem);
  assert.equal(existsSync(join(dir, 'bw.lock')), false, 'refused before taking the lock');
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { ConfigError, loadConfigText, type ConfigProblem } from '../../src/core/config-loader.ts';
import { bandwidthdConfigSpec } from './config.ts';

function problemsOf(config: Record<string, unknown>): ConfigProblem[] {
  try {
    loadConfigText(stringify(config), 'config.yaml', bandwidthdConfigSpec);
    return [];
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
}

test('durations beyond what a timer holds are refused with their path', () => {
  assert.deepEqual(problemsOf({ bandwidth: { poll_interval: '24d' }, notifications: { batch_window: '0s' } }), []);
  const problems = problemsOf({ bandwidth: { poll_interval: '30d' }, status: { update_interval: '25d' }, notifications: { batch_window: '25d' } });
  assert.deepEqual(problems.map((p) => p.path).sort(), ['/bandwidth/poll_interval', '/notifications/batch_window', '/status/update_interval']);
  for (const p of problems) assert.match(p.message, /must be at most 24d/);
});

test('rates below the 8 bit/s tc can shape are refused with their path instead of failing on every interface at run time', () => {
  assert.deepEqual(problemsOf({ bandwidth: { default_rx_mbps: 0.000008 }, quota: { exceeded_speed_tx_mbps: 0.000008 } }), []);
  const problems = problemsOf({ bandwidth: { default_rx_mbps: 0.000001, default_tx_mbps: 0.000007 }, quota: { exceeded_speed_rx_mbps: 0.000001, exceeded_speed_tx_mbps: 1 } });
  assert.deepEqual(problems.map((p) => p.path), ['/bandwidth/default_rx_mbps', '/bandwidth/default_tx_mbps', '/quota/exceeded_speed_rx_mbps']);
  for (const p of problems) assert.match(p.message, /^must be at least 0\.000008 \(8 bit\/s, the slowest rate tc shapes\)$/);
});

test('webhook URLs: a malformed percent escape in the credentials is refused with its path; problems never show the secrets', () => {
  const problems = problemsOf({
    webhook: {
      endpoints: [
        { name: 'a', url: 'http://alice:p%zzss@hooks.example.com/x', type: 'generic', enabled: true },
        { name: 'b', url: 'ftp://bob:hunter2@hooks.example.com/hook/SECRETTOKEN?key=abc', type: 'generic', enabled: true },
      ],
    },
    notifications: {
      chat_a: { enabled: true, webhook_url: 'chat.example.com/api/webhooks/1/T0KEN' },
      generic: [{ name: 'g', enabled: true, url: 'https://opsbot:p%4@hooks.example.com/h?token=S3CRET' }],
    },
  });
  assert.deepEqual(problems.map((p) => p.path), ['/webhook/endpoints/0/url', '/webhook/endpoints/1/url', '/notifications/chat_a/webhook_url', '/notifications/generic/0/url']);
  assert.match(problems[0]?.message ?? '', /malformed percent escape.*"http:\/\/\*\*\*@hooks\.example\.com\/\*\*\*"/);
  assert.match(problems[1]?.message ?? '', /must use http or https \(got "ftp:\/\/\*\*\*@hooks\.example\.com\/\*\*\*"\)/);
  assert.match(problems[3]?.message ?? '', /malformed percent escape/);
  const text = JSON.stringify(problems);
  for (const secret of ['p%zzss', 'hunter2', 'SECRETTOKEN', 'key=', 'T0KEN', 'S3CRET', 'alice', 'bob', 'opsbot']) assert.ok(!text.includes(secret), `${secret} in ${text}`);
  // A well-formed escape is fine.
  assert.deepEqual(problemsOf({ notifications: { generic: [{ name: 'g', enabled: true, url: 'https://ops:p%40ss@hooks.example.com/h' }] } }), []);
});

test('files and directories must be absolute paths; empty ones (a feature off) are left alone', () => {
  const problems = problemsOf({ general: { lock_file: 'bandwidth.lock' }, database: { path: 'db/bandwidth.db' }, logging: { file: '' } });
  assert.deepEqual(
    problems.map((p) => p.path),
    ['/general/lock_file', '/database/path'],
  );
  assert.match(problems[0]?.message ?? '', /^must be an absolute path \(got "bandwidth\.lock"; relative to what\?/);
});

test('webhook destination names are unique across endpoints, generic destinations and chat_a/chat_b; each repeat is one problem naming both places', () => {
  const problems = problemsOf({
    webhook: {
      endpoints: [
        { name: 'dup', url: 'http://127.0.0.1:9/wh/dupA', type: 'generic', enabled: true },
        { name: 'dup', url: 'http://127.0.0.1:9/wh/dupB', type: 'chat_b', enabled: true },
        { name: 'chat_a', url: 'http://127.0.0.1:9/wh/ca', type: 'chat_a', enabled: false },
      ],
    },
    notifications: {
      chat_a: { enabled: true, webhook_url: 'http://127.0.0.1:9/chat_a' },
      generic: [{ name: 'dup', enabled: true, url: 'http://127.0.0.1:9/g' }],
    },
  });
  assert.deepEqual(
    problems.map((p) => [p.path, p.message]),
    [
      ['/webhook/endpoints/1/name', '"dup" is also the name of the destination at /webhook/endpoints/0/name: webhook destination names must be unique (stored deliveries and logs go by name)'],
      ['/webhook/endpoints/2/name', '"chat_a" is also the name of the destination at /notifications/chat_a: webhook destination names must be unique (stored deliveries and logs go by name)'],
      ['/notifications/generic/0/name', '"dup" is also the name of the destination at /webhook/endpoints/0/name: webhook destination names must be unique (stored deliveries and logs go by name)'],
    ],
  );
  // chat_b without a URL is no destination, so an endpoint may be called chat_b.
  assert.deepEqual(problemsOf({ webhook: { endpoints: [{ name: 'chat_b', url: 'http://127.0.0.1:9/b', type: 'chat_b', enabled: true }] } }), []);
});

test('docker.tls_verify with a cert directory that is missing or lacks cert.pem, key.pem, ca.pem is a problem naming the path and the files', () => {
  const tls = mkdtempSync(join(tmpdir(), 'hk-bwd-tls-'));
  const docker = (tls_cert_path: string): Record<string, unknown> => ({ docker: { endpoint: 'tcp://127.0.0.1:2376', tls_verify: true, tls_cert_path } });
  const gone = join(tls, 'gone');
  assert.deepEqual(problemsOf(docker(gone)), [{ path: '/docker/tls_cert_path', message: `${JSON.stringify(gone)} does not exist or is not a directory: docker.tls_verify needs cert.pem, key.pem, ca.pem in it` }]);
  writeFileSync(join(tls, 'key.pem'), 'x');
  assert.deepEqual(problemsOf(docker(tls)), [{ path: '/docker/tls_cert_path', message: `${JSON.stringify(tls)} lacks cert.pem, ca.pem: docker.tls_verify needs cert.pem, key.pem, ca.pem in it` }]);
  writeFileSync(join(tls, 'cert.pem'), 'x');
  writeFileSync(join(tls, 'ca.pem'), 'x');
  assert.deepEqual(problemsOf(docker(tls)), []);
  // Without tls_verify the directory is not used.
  assert.deepEqual(problemsOf({ docker: { tls_verify: false, tls_cert_path: gone } }), []);
});

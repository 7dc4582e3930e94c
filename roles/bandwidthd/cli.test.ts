import { mock, test } from 'node:test';
import { createServer } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { ConfigError } from '../../src/core/config-loader.ts';
import { webhookTestCommand } from './cli.ts';

test('webhook test refuses credentials with a malformed percent escape, naming the field, before sending anything', async () => {
  const file = join(mkdtempSync(join(tmpdir(), 'hk-bwd-cli-')), 'config.yaml');
  writeFileSync(file, stringify({ database: { path: ':memory:' }, notifications: { generic: [{ name: 'g', enabled: true, url: 'http://ops:p%zz@127.0.0.1:9/hook' }] } }));
  await assert.rejects(webhookTestCommand(file, undefined), (err: unknown) => {
    assert.ok(err instanceof ConfigError);
    assert.deepEqual(err.problems.map((p) => p.path), ['/notifications/generic/0/url']);
    assert.match(err.message, /malformed percent escape/);
    assert.doesNotMatch(err.message, /p%zz|ops:/);
    return true;
  });
});

test('webhook test fails with exit code 1 naming the unset variables of a destination, and sends it nothing', async (t) => {
  let requests = 0;
  const server = createServer((req, res) => (requests++, res.end('ok')));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => server.close());
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  delete process.env['AUD_TOKEN'];
  delete process.env['AUD_PASS'];
  const file = join(mkdtempSync(join(tmpdir(), 'hk-bwd-cli-')), 'config.yaml');
  writeFileSync(
    file,
    stringify({
      database: { path: ':memory:' },
      notifications: {
        generic: [
          { name: 'aud', enabled: true, url: url.replace('http://', 'http://ops:${AUD_PASS}@'), headers: { Authorization: 'Bearer ${AUD_TOKEN}' } },
          { name: 'fine', enabled: true, url },
        ],
      },
    }),
  );
  const out: string[] = [];
  // The test runner's own reports (buffers) pass through.
  const write = process.stdout.write.bind(process.stdout);
  mock.method(process.stdout, 'write', (s: string | Uint8Array) => (typeof s === 'string' ? (out.push(s), true) : write(s)));
  try {
    await webhookTestCommand(file, undefined);
  } finally {
    mock.restoreAll();
  }
  const code = process.exitCode;
  process.exitCode = undefined;
  assert.equal(code, 1);
  assert.deepEqual(out, [
    'aud (generic): FAILED: environment variables AUD_PASS, AUD_TOKEN are not set: ${AUD_PASS}, ${AUD_TOKEN} would be sent literally in the URL or headers\n',
    'fine (generic): ok (HTTP 200)\n',
  ]);
  assert.equal(requests, 1, 'only the destination without unset variables got a request');
});

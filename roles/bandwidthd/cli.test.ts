import { test } from 'node:test';
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

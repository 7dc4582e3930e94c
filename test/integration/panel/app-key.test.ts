/**
 * The app key guards the secrets at rest: it is made once with mode 0600, and a panel whose
 * database holds secrets refuses to start (and the CLI to run) without it, instead of making a
 * new key that could not read them.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runHostkit, startHostkit } from '../hostkit-process.ts';
import { startPanel } from './harness.ts';

test('a missing app key is refused once secrets are stored, never silently replaced', async () => {
  const panel = await startPanel();
  try {
    const keyFile = join(panel.dir, 'data', 'app.key');
    assert.equal(statSync(keyFile).mode & 0o777, 0o600);
    assert.match(readFileSync(keyFile, 'utf8'), /^[0-9a-f]{64}\n$/);
    panel.createUser('root', { admin: true });
    assert.equal(panel.cli('node', 'create', '--name', 'n1', '--fqdn', '127.0.0.1').code, 0);
    await panel.daemon.stop();
    rmSync(keyFile);
    const r = runHostkit(['panel', 'serve', '--config', panel.config]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /app\.key is missing but the database holds secrets .*restore the key file/);
    assert.equal(panel.cli('user', 'create', '--username', 'x', '--email', 'x@example.test').code, 1);
    assert.throws(() => statSync(keyFile), 'no new key was written');
  } finally {
    await panel.stop();
  }
});

test('a well-formed key from another install is refused at start, not at the first 2FA login', async () => {
  const panel = await startPanel();
  try {
    const keyFile = join(panel.dir, 'data', 'app.key');
    assert.equal(panel.cli('node', 'create', '--name', 'n1', '--fqdn', '127.0.0.1').code, 0);
    await panel.daemon.stop();
    const other = 'ab'.repeat(32);
    writeFileSync(keyFile, `${other}\n`, { mode: 0o600 });
    const r = runHostkit(['panel', 'serve', '--config', panel.config]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /app\.key is not the key this database's secrets were encrypted with .*restore the matching key file/);
    assert.equal(readFileSync(keyFile, 'utf8'), `${other}\n`, 'the key file is left as it is');
  } finally {
    await panel.stop();
  }
});

test('a start that applies database migrations logs which; a start with a current schema does not', async () => {
  const panel = await startPanel();
  try {
    assert.match(panel.daemon.output(), /"versions":\[1,[\d,]+\].*"msg":"applied database migrations"/);
    await panel.daemon.stop();
    const again = startHostkit(['panel', 'serve', '--config', panel.config]);
    try {
      await again.waitFor(/panel listening/);
      assert.doesNotMatch(again.output(), /applied database migrations/, 'nothing to apply: no line');
    } finally {
      await again.stop();
    }
  } finally {
    await panel.stop();
  }
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openChallengeSecret, SECRET_FILE } from './challenge-secret.ts';

test('the secret is made once with mode 0600, kept across opens, replaced when deleted or damaged', () => {
  const parent = mkdtempSync(join(tmpdir(), 'hk-secret-'));
  const dir = join(parent, 'data');
  try {
    const a = openChallengeSecret(dir);
    assert.equal(a.opened, 'created');
    const file = join(dir, SECRET_FILE);
    assert.equal(a.file, file);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.equal(statSync(dir).mode & 0o777, 0o700);
    assert.equal(a.get().length, 32);
    assert.equal(readFileSync(file, 'utf8').trim(), a.get().toString('hex'));
    const first = Buffer.from(a.get());
    assert.deepEqual(openChallengeSecret(dir).get(), first, 'a restart reads the same secret');

    chmodSync(file, 0o644);
    assert.equal(a.load(), 'read');
    assert.equal(statSync(file).mode & 0o777, 0o600, 'a loosened mode is tightened');

    rmSync(file);
    assert.equal(a.load(), 'created');
    assert.notDeepEqual(a.get(), first);
    writeFileSync(file, 'garbage');
    assert.equal(a.load(), 'replaced');
    assert.equal(statSync(file).mode & 0o777, 0o600);
    writeFileSync(file, a.get().toString('hex').toUpperCase());
    assert.equal(openChallengeSecret(dir).opened, 'replaced', 'a start tells a damaged file apart, for its warning');
  } finally {
    rmSync(parent, { recursive: true, force: true });
  }
});

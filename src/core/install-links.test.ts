import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { installLinks } from './install-links.ts';

test('an empty directory name is a usage error and makes no link in the working directory', (t) => {
  const cwd = process.cwd();
  const dir = mkdtempSync(join(tmpdir(), 'hk-links-'));
  t.after(() => {
    process.chdir(cwd);
    rmSync(dir, { recursive: true, force: true });
  });
  process.chdir(dir);
  assert.throws(() => installLinks('', ['osproxy'], '/bin/true'), (err: Error & { code?: string }) => err.code === 'ERR_USAGE' && /needs a directory/.test(err.message));
  assert.deepEqual(readdirSync(dir), []);
});

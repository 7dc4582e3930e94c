import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeDirs } from './make-dirs.ts';

test('makeDirs creates missing parents with the mode, accepts an existing directory, and fails where mkdir -p fails', () => {
  const root = mkdtempSync(join(tmpdir(), 'hk-dirs-'));
  const deep = join(root, 'a', 'b', 'c');
  makeDirs(deep, 0o700);
  assert.ok(statSync(deep).isDirectory());
  assert.equal(statSync(join(root, 'a')).mode & 0o777, 0o700);
  makeDirs(deep);
  writeFileSync(join(root, 'file'), '');
  assert.throws(() => makeDirs(join(root, 'file', 'x')), { code: 'ENOTDIR' });
  // node's own recursive mkdir never returns here.
  assert.throws(() => makeDirs('/proc/hostkit-nope/x'), { code: 'ENOENT' });
});

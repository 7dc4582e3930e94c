import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { acquireLock, pidAlive, writePidFile } from './instance-lock.ts';

const dir = mkdtempSync(join(tmpdir(), 'hk-bwd-lock-'));

test('the lock holds our pid, refuses a second live holder and is released', () => {
  const path = join(dir, 'a', 'bw.lock');
  const lock = acquireLock(path, 'bandwidth daemon');
  assert.equal(readFileSync(path, 'utf8').trim(), String(process.pid));
  // pid 1 is alive: another holder.
  writeFileSync(path, '1\n');
  assert.throws(() => acquireLock(path, 'bandwidth daemon'), /already running \(pid 1 holds/);
  writeFileSync(path, `${process.pid}\n`);
  lock.release();
  assert.equal(existsSync(path), false);
});

test('a lock left by a dead process, or an unreadable one, is taken over', () => {
  const path = join(dir, 'bw2.lock');
  writeFileSync(path, '999999999\n');
  assert.equal(pidAlive(999999999), false);
  const lock = acquireLock(path, 'bandwidth daemon');
  assert.equal(readFileSync(path, 'utf8').trim(), String(process.pid));
  lock.release();
  writeFileSync(path, 'garbage');
  acquireLock(path, 'bandwidth daemon').release();
});

test('a lock another process took over is not deleted by the old holder', () => {
  const path = join(dir, 'bw3.lock');
  const lock = acquireLock(path, 'bandwidth daemon');
  writeFileSync(path, '1\n');
  lock.release();
  assert.equal(readFileSync(path, 'utf8').trim(), '1');
});

test('pid file written and removed', () => {
  const path = join(dir, 'p', 'bw.pid');
  const remove = writePidFile(path);
  assert.equal(readFileSync(path, 'utf8').trim(), String(process.pid));
  remove();
  assert.equal(existsSync(path), false);
});

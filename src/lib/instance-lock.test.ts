import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { acquireLock, lockPathFor, pidAlive, writePidFile } from './instance-lock.ts';

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

test('a lock whose pid now belongs to a process started after the lock was written (a reboot reused it) is taken over', async () => {
  const path = join(dir, 'bw4.lock');
  const other = spawn('sleep', ['30']);
  try {
    await new Promise((resolve) => other.once('spawn', resolve));
    writeFileSync(path, `${other.pid}\n`);
    // Written an hour before this process started: a crashed holder's lock.
    const hourAgo = new Date(Date.now() - 3_600_000);
    utimesSync(path, hourAgo, hourAgo);
    const lock = acquireLock(path, 'bandwidth daemon');
    assert.equal(readFileSync(path, 'utf8').trim(), String(process.pid));
    lock.release();
    // The same live process written into a fresh lock is a holder.
    writeFileSync(path, `${other.pid}\n`);
    assert.throws(() => acquireLock(path, 'bandwidth daemon'), new RegExp(`already running \\(pid ${other.pid} holds`));
  } finally {
    other.kill();
  }
});

test('a lock held by a process that exited but is not reaped yet (a zombie) is taken over, and the lock says whose it was', async () => {
  const path = join(dir, 'bw5.lock');
  // The child exits after its parent has become `sleep`, which never reaps it (exiting at once, the
  // shell could reap it before its exec).
  const parent = spawn('sh', ['-c', 'sleep 0.3 & echo $!; exec sleep 30']);
  try {
    const zombie = Number(await new Promise<string>((resolve) => parent.stdout.once('data', (d: Buffer) => resolve(d.toString()))));
    const state = (): string => readFileSync(`/proc/${zombie}/stat`, 'utf8').split(') ')[1]?.[0] ?? '';
    for (let i = 0; i < 250 && state() !== 'Z'; i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(state(), 'Z');
    assert.equal(pidAlive(zombie), true, 'kill(pid, 0) still finds it');
    writeFileSync(path, `${zombie}\n`);
    const lock = acquireLock(path, 'panel');
    assert.equal(lock.takenOver, zombie);
    assert.equal(readFileSync(path, 'utf8').trim(), String(process.pid));
    lock.release();
    const again = acquireLock(path, 'panel');
    assert.equal(again.takenOver, undefined, 'a free lock takes nothing over');
    again.release();
  } finally {
    parent.kill();
  }
});

test('the lock path of a data file follows symlinks to the real file', () => {
  const real = join(dir, 'real');
  mkdirSync(real);
  writeFileSync(join(real, 'agent.db'), '');
  symlinkSync(join(real, 'agent.db'), join(dir, 'alias.db'));
  symlinkSync(real, join(dir, 'linked'));
  assert.equal(lockPathFor(join(dir, 'alias.db')), join(real, 'agent.db.lock'));
  assert.equal(lockPathFor(join(dir, 'linked', 'new.db')), join(real, 'new.db.lock'));
  assert.equal(lockPathFor(join(dir, 'missing', 'x.db')), join(dir, 'missing', 'x.db.lock'));
});

test('a lock another process took over is not deleted by the old holder', () => {
  const path = join(dir, 'bw3.lock');
  const lock = acquireLock(path, 'bandwidth daemon');
  writeFileSync(path, '1\n');
  lock.release();
  assert.equal(readFileSync(path, 'utf8').trim(), '1');
});

test('a pid file path that is a symlink is refused, and the file it points at is left alone', () => {
  const target = join(dir, 'precious.txt');
  writeFileSync(target, 'keep me\n');
  const link = join(dir, 'planted.pid');
  symlinkSync(target, link);
  assert.throws(() => writePidFile(link), /ELOOP/);
  assert.equal(readFileSync(target, 'utf8'), 'keep me\n');
});

test('pid file written and removed', () => {
  const path = join(dir, 'p', 'bw.pid');
  const remove = writePidFile(path);
  assert.equal(readFileSync(path, 'utf8').trim(), String(process.pid));
  remove();
  assert.equal(existsSync(path), false);
});

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { createRotatingFile, rotationStamp, type RotatingFileOptions } from './rotating-file.ts';

let root: string;
let seq = 0;
before(() => {
  process.umask(0o022);
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'hostkit-rotating-'));
});
after(() => fs.rmSync(root, { recursive: true, force: true }));

// Each test gets its own directory (created by the stream itself).
function logPath(): string {
  seq++;
  return path.join(root, `t${seq}`, 'logs', 'app.log');
}

// 30-byte lines, so a 100-byte limit holds exactly three.
function line(i: number): string {
  return `line-${String(i).padStart(3, '0')} ${'x'.repeat(20)}\n`;
}

function open(file: string, extra: Partial<RotatingFileOptions> = {}) {
  const errors: Error[] = [];
  const stream = createRotatingFile({ path: file, maxBytes: 100, compress: false, maxBackups: 0, maxAgeDays: 0, reopenCheckMs: 0, onError: (e) => errors.push(e), ...extra });
  return { stream, errors };
}

function backups(file: string): string[] {
  const base = path.basename(file);
  return fs.readdirSync(path.dirname(file)).filter((n) => n.startsWith(`${base}.`)).sort();
}

function readBackup(file: string, name: string): string {
  const buf = fs.readFileSync(path.join(path.dirname(file), name));
  return (name.endsWith('.gz') ? gunzipSync(buf) : buf).toString('utf8');
}

describe('rotating file', () => {
  it('creates the directory (0750) and the file (0640) and appends', async () => {
    const file = logPath();
    const { stream } = open(file, { maxBytes: 0 });
    stream.write(line(1));
    stream.write(line(2));
    await stream.close();
    assert.equal(fs.statSync(path.dirname(file)).mode & 0o777, 0o750);
    assert.equal(fs.statSync(file).mode & 0o777, 0o640);
    assert.equal(fs.readFileSync(file, 'utf8'), line(1) + line(2));
    const again = open(file, { maxBytes: 0 });
    again.stream.write(line(3));
    await again.stream.close();
    assert.equal(fs.readFileSync(file, 'utf8'), line(1) + line(2) + line(3));
  });

  it('rotates by size into sortable timestamped files, losing no line', async () => {
    const file = logPath();
    const { stream, errors } = open(file);
    for (let i = 0; i < 10; i++) stream.write(line(i));
    await stream.close();
    const names = backups(file);
    // 10 lines of 30 bytes, 3 per file: 3 rotated files + the live one holding the last line.
    assert.equal(names.length, 3);
    for (const n of names) assert.match(n, /^app\.log\.\d{8}-\d{6}-\d{3}$/);
    const all = names.map((n) => readBackup(file, n)).join('') + fs.readFileSync(file, 'utf8');
    assert.equal(all, Array.from({ length: 10 }, (_, i) => line(i)).join(''));
    for (const n of names) assert.ok(fs.statSync(path.join(path.dirname(file), n)).size <= 100);
    assert.deepEqual(errors, []);
  });

  it('gzips rotated files in the background and removes the uncompressed copy', async () => {
    const file = logPath();
    const { stream, errors } = open(file, { compress: true });
    for (let i = 0; i < 7; i++) stream.write(line(i));
    stream.flushSync();
    await stream.idle();
    const names = backups(file);
    assert.equal(names.length, 2);
    for (const n of names) assert.match(n, /\.gz$/);
    assert.equal(readBackup(file, names[0] as string), line(0) + line(1) + line(2));
    assert.equal(readBackup(file, names[1] as string), line(3) + line(4) + line(5));
    assert.equal(fs.readFileSync(file, 'utf8'), line(6));
    await stream.close();
    assert.deepEqual(errors, []);
  });

  it('keeps only the newest max_backups rotated files', async () => {
    const file = logPath();
    const { stream } = open(file, { compress: true, maxBackups: 2 });
    for (let i = 0; i < 15; i++) stream.write(line(i));
    await stream.close();
    const names = backups(file);
    assert.equal(names.length, 2);
    // 15 lines: rotated [0-2] [3-5] [6-8] [9-11], live [12-14]; the two newest survive.
    assert.equal(readBackup(file, names[0] as string), line(6) + line(7) + line(8));
    assert.equal(readBackup(file, names[1] as string), line(9) + line(10) + line(11));
  });

  it('deletes rotated files older than max_age_days (by mtime)', async () => {
    const file = logPath();
    fs.mkdirSync(path.dirname(file), { recursive: true });
    const day = 86_400_000;
    const oldName = `${file}.${rotationStamp(Date.now() - 40 * day)}.gz`;
    const recentName = `${file}.${rotationStamp(Date.now() - 2 * day)}.gz`;
    const unrelated = path.join(path.dirname(file), 'other.log.20200101-000000-000');
    for (const f of [oldName, recentName, unrelated]) fs.writeFileSync(f, 'x');
    const past = new Date(Date.now() - 40 * day);
    fs.utimesSync(oldName, past, past);
    fs.utimesSync(unrelated, past, past);
    fs.utimesSync(recentName, new Date(Date.now() - 2 * day), new Date(Date.now() - 2 * day));

    const { stream } = open(file, { maxAgeDays: 30 });
    for (let i = 0; i < 4; i++) stream.write(line(i));
    await stream.close();
    assert.equal(fs.existsSync(oldName), false);
    assert.equal(fs.existsSync(recentName), true);
    assert.equal(fs.existsSync(unrelated), true, 'files of another log are never touched');
    assert.equal(backups(file).length, 2); // the recent one and the one rotated now
  });

  it('finishes compressions a crash interrupted and drops half-written archives', async () => {
    const file = logPath();
    fs.mkdirSync(path.dirname(file), { recursive: true });
    const leftover = `${file}.${rotationStamp(Date.now() - 1000)}`;
    fs.writeFileSync(leftover, 'old lines\n');
    fs.writeFileSync(`${leftover}.gz.tmp`, 'partial');
    const { stream } = open(file, { compress: true });
    await stream.close();
    assert.deepEqual(backups(file), [path.basename(`${leftover}.gz`)]);
    assert.equal(readBackup(file, path.basename(`${leftover}.gz`)), 'old lines\n');
  });

  it('survives an unwritable path, reports once, and writes again once it can', async () => {
    const blocker = path.join(root, `blocker${++seq}`);
    fs.writeFileSync(blocker, 'a regular file where the directory should be');
    const file = path.join(blocker, 'app.log');
    const { stream, errors } = open(file);
    for (let i = 0; i < 3; i++) {
      stream.write(line(i));
      stream.flushSync();
    }
    assert.equal(errors.length, 1, errors.map((e) => e.message).join('; '));
    fs.rmSync(blocker);
    stream.write(line(9));
    stream.flushSync();
    assert.equal(fs.readFileSync(file, 'utf8'), line(9));
    assert.equal(errors.length, 2);
    assert.match(errors[1]?.message ?? '', /writable again; 3 lines were lost/);
    await stream.close();
  });

  it('recreates the file when its directory is removed under it', async () => {
    const file = logPath();
    const { stream, errors } = open(file, { maxBytes: 0 });
    stream.write(line(1));
    stream.flushSync();
    fs.rmSync(path.dirname(file), { recursive: true });
    stream.write(line(2));
    stream.flushSync();
    assert.equal(fs.readFileSync(file, 'utf8'), line(2));
    await stream.close();
    assert.deepEqual(errors, []);
  });

  it('drops writes after close', async () => {
    const file = logPath();
    const { stream } = open(file, { maxBytes: 0 });
    stream.write(line(1));
    await stream.close();
    stream.write(line(2));
    stream.flushSync();
    assert.equal(fs.readFileSync(file, 'utf8'), line(1));
  });

  it('names rotations in UTC with millisecond precision', () => {
    assert.equal(rotationStamp(Date.UTC(2026, 10, 23, 7, 1, 2, 123)), '20261123-070102-123');
  });
});

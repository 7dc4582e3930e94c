/**
 * An append-only log file that rotates by size, used as an in-process pino destination (pino's
 * transports run in worker threads that load files by path, which breaks inside the single
 * executable).
 *
 * Writes are synchronous, batched per event-loop turn: pino's own file destination is synchronous
 * too, and it keeps the order of lines and the exit path simple (an `exit` hook writes what is
 * still buffered). Everything slow — gzip of a rotated file, pruning of old ones — runs in the
 * background on one promise chain, so it never delays a log line and never races itself.
 *
 * Rotated files are named `<file>.<YYYYMMDD-HHMMSS-mmm>` (UTC, fixed width, so name order is age
 * order) and `<file>.<stamp>.gz` once compressed.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { makeDirs } from './make-dirs.ts';

export interface RotatingFileOptions {
  /** The live log file. */
  path: string;
  /** Rotate when the file would grow past this many MiB; 0 = never rotate. Default 100. */
  maxSizeMb?: number;
  /** Overrides maxSizeMb with a byte count (tests rotate at a few hundred bytes). */
  maxBytes?: number;
  /** Rotated files older than this (by mtime) are deleted; 0 = no age limit. Default 30. */
  maxAgeDays?: number;
  /** Rotated files kept, newest first; 0 = no count limit. Default 10. */
  maxBackups?: number;
  /** Gzip rotated files in the background. Default true. */
  compress?: boolean;
  /**
   * How often (ms) to check that the path still names the open file, so a removed directory or an
   * external logrotate move leads to a fresh file instead of writes into an unlinked inode.
   * Default 1000; tests use 0 (check on every batch).
   */
  reopenCheckMs?: number;
  /** Where problems go; default one line on stderr. Called once per outage, not per line. */
  onError?: (err: Error) => void;
  /** Clock for rotation names and age pruning (tests). */
  now?: () => number;
}

export interface RotatingFile {
  readonly path: string;
  /** Queues one chunk (a log line); always returns true (pino ignores back-pressure here). */
  write(chunk: string): boolean;
  /** Writes everything queued, synchronously; used by pino's flush and the exit hook. */
  flushSync(): void;
  /** Writes everything queued, then calls cb (pino's `flush(cb)` protocol). */
  flush(cb?: (err?: Error) => void): void;
  /** Resolves once background compression and pruning queued so far have finished. */
  idle(): Promise<void>;
  /** Flushes, closes the file and waits for background work; later writes are dropped. */
  close(): Promise<void>;
  /** pino calls `end()` on its destinations when the logger is ended. */
  end(): void;
}

const MIB = 1024 * 1024;
const DAY_MS = 86_400_000;
// Lines kept while the file cannot be written; beyond this they are dropped (and counted) so an
// unwritable disk cannot also exhaust memory.
const MAX_PENDING_BYTES = 16 * MIB;
// A batch is written at the end of the current turn, or at once when it gets this large.
const BATCH_BYTES = 64 * 1024;

/** The rotated-file suffix for time `ms`: UTC `YYYYMMDD-HHMMSS-mmm`. */
export function rotationStamp(ms: number): string {
  const d = new Date(ms);
  const p = (n: number, w = 2): string => String(n).padStart(w, '0');
  return (
    `${d.getUTCFullYear()}${p(d.getUTCMonth() + 1)}${p(d.getUTCDate())}-` +
    `${p(d.getUTCHours())}${p(d.getUTCMinutes())}${p(d.getUTCSeconds())}-${p(d.getUTCMilliseconds(), 3)}`
  );
}

/**
 * Opens (creating the directory with mode 0750 and the file with 0640 when missing) and returns
 * the stream; runs once per logger. Old backups are pruned, and rotated files a crash left
 * uncompressed are compressed, in the background.
 */
export function createRotatingFile(opts: RotatingFileOptions): RotatingFile {
  const file = path.resolve(opts.path);
  const dir = path.dirname(file);
  const base = path.basename(file);
  const maxBytes = opts.maxBytes ?? (opts.maxSizeMb ?? 100) * MIB;
  const maxAgeMs = (opts.maxAgeDays ?? 30) * DAY_MS;
  const maxBackups = opts.maxBackups ?? 10;
  const compress = opts.compress ?? true;
  const reopenCheckMs = opts.reopenCheckMs ?? 1000;
  const now = opts.now ?? Date.now;
  const report =
    opts.onError ?? ((err: Error) => process.stderr.write(`hostkit: log file ${file}: ${err.message}\n`));
  const backupRe = new RegExp(`^${escapeRegExp(base)}\\.(\\d{8}-\\d{6}-\\d{3})(\\.gz)?$`);

  let fd: number | undefined;
  let ino = 0;
  let size = 0;
  let lastCheck = 0;
  let lastStamp = 0;
  let pending: string[] = [];
  let pendingBytes = 0;
  let scheduled = false;
  let failing = false;
  let lost = 0;
  let closed = false;
  let background: Promise<void> = Promise.resolve();

  function open(): void {
    makeDirs(dir, 0o750);
    const newFd = fs.openSync(file, 'a', 0o640);
    const st = fs.fstatSync(newFd);
    fd = newFd;
    ino = st.ino;
    size = st.size;
    lastCheck = now();
  }

  function closeFd(): void {
    if (fd === undefined) return;
    try {
      fs.closeSync(fd);
    } catch {
      // already gone; nothing to recover
    }
    fd = undefined;
  }

  // The path may no longer name our inode (directory removed, file moved away by hand).
  function stillOurs(): boolean {
    try {
      return fs.statSync(file).ino === ino;
    } catch {
      return false;
    }
  }

  function writeAll(buf: Buffer): void {
    let off = 0;
    while (off < buf.length) off += fs.writeSync(fd as number, buf, off, buf.length - off);
    size += buf.length;
  }

  function rotate(): void {
    closeFd();
    let stamp = Math.max(now(), lastStamp + 1);
    // Several rotations in one millisecond, or a name left by an earlier run: move the stamp on
    // rather than add a counter, so names stay fixed width and sort by age.
    while (fs.existsSync(`${file}.${rotationStamp(stamp)}`) || fs.existsSync(`${file}.${rotationStamp(stamp)}.gz`)) stamp++;
    lastStamp = stamp;
    const rotated = `${file}.${rotationStamp(stamp)}`;
    fs.renameSync(file, rotated);
    open();
    afterRotation(compress ? rotated : undefined);
  }

  // One chain for all background work, so a compression and a prune never race each other.
  function queue(task: () => Promise<void>): void {
    background = background.then(task).catch((err: unknown) => report(asError(err, 'background work')));
  }

  function afterRotation(toCompress: string | undefined): void {
    queue(async () => {
      if (toCompress !== undefined) await gzipFile(toCompress);
      await prune();
    });
  }

  async function gzipFile(src: string): Promise<void> {
    const tmp = `${src}.gz.tmp`;
    try {
      const st = await fs.promises.stat(src);
      await pipeline(fs.createReadStream(src), createGzip(), fs.createWriteStream(tmp, { mode: 0o640 }));
      // Keep the rotation time as the archive's mtime: age pruning reads it.
      await fs.promises.utimes(tmp, st.atime, st.mtime);
      await fs.promises.rename(tmp, `${src}.gz`);
      await fs.promises.unlink(src);
    } catch (err) {
      await fs.promises.rm(tmp, { force: true }).catch(() => undefined);
      // Pruned or removed by hand meanwhile: nothing left to compress.
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') report(asError(err, `compressing ${src}`));
    }
  }

  async function listBackups(): Promise<{ name: string; stamp: string; gz: boolean; mtimeMs: number }[]> {
    const out: { name: string; stamp: string; gz: boolean; mtimeMs: number }[] = [];
    for (const name of await fs.promises.readdir(dir)) {
      const m = backupRe.exec(name);
      if (!m) continue;
      try {
        const st = await fs.promises.stat(path.join(dir, name));
        out.push({ name, stamp: m[1] as string, gz: m[2] !== undefined, mtimeMs: st.mtimeMs });
      } catch {
        // removed meanwhile
      }
    }
    return out;
  }

  async function prune(): Promise<void> {
    if (maxBackups <= 0 && maxAgeMs <= 0) return;
    try {
      // A stamp with both a plain and a .gz file (crash during compression) is one backup.
      const byStamp = new Map<string, { names: string[]; mtimeMs: number }>();
      for (const b of await listBackups()) {
        const entry = byStamp.get(b.stamp) ?? { names: [], mtimeMs: 0 };
        entry.names.push(b.name);
        entry.mtimeMs = Math.max(entry.mtimeMs, b.mtimeMs);
        byStamp.set(b.stamp, entry);
      }
      const newestFirst = [...byStamp.entries()].sort((a, b) => (a[0] < b[0] ? 1 : a[0] > b[0] ? -1 : 0));
      const cutoff = now() - maxAgeMs;
      for (const [i, [, entry]] of newestFirst.entries()) {
        const tooMany = maxBackups > 0 && i >= maxBackups;
        const tooOld = maxAgeMs > 0 && entry.mtimeMs < cutoff;
        if (!tooMany && !tooOld) continue;
        for (const name of entry.names) await fs.promises.rm(path.join(dir, name), { force: true });
      }
    } catch (err) {
      report(asError(err, 'pruning rotated logs'));
    }
  }

  // Start-up housekeeping: drop half-written archives, finish compressions a crash interrupted.
  async function recover(): Promise<void> {
    try {
      for (const name of await fs.promises.readdir(dir)) {
        if (name.startsWith(`${base}.`) && name.endsWith('.gz.tmp')) await fs.promises.rm(path.join(dir, name), { force: true });
      }
      if (!compress) return;
      const backups = await listBackups();
      const archived = new Set(backups.filter((b) => b.gz).map((b) => b.stamp));
      for (const b of backups) {
        const src = path.join(dir, b.name);
        if (b.gz) continue;
        // Both exist: the archive was renamed into place but the original was not yet removed.
        if (archived.has(b.stamp)) await fs.promises.rm(src, { force: true });
        else await gzipFile(src);
      }
    } catch (err) {
      report(asError(err, 'recovering rotated logs'));
    }
  }

  function fail(err: unknown, dropped: number): void {
    closeFd();
    lost += dropped;
    if (failing) return;
    failing = true;
    report(asError(err, 'write failed; lines are dropped until it is writable again'));
  }

  function flushSync(): void {
    scheduled = false;
    while (pending.length > 0) {
      const lines = pending;
      pending = [];
      pendingBytes = 0;
      try {
        if (fd !== undefined && (reopenCheckMs === 0 || now() - lastCheck >= reopenCheckMs)) {
          lastCheck = now();
          if (!stillOurs()) closeFd();
        }
        if (fd === undefined) open();
        let batch: Buffer[] = [];
        let batchBytes = 0;
        for (const line of lines) {
          const buf = Buffer.from(line);
          if (maxBytes > 0 && size + batchBytes + buf.length > maxBytes && size + batchBytes > 0) {
            if (batchBytes > 0) writeAll(Buffer.concat(batch, batchBytes));
            batch = [];
            batchBytes = 0;
            rotate();
          }
          batch.push(buf);
          batchBytes += buf.length;
        }
        if (batchBytes > 0) writeAll(Buffer.concat(batch, batchBytes));
        if (failing) {
          failing = false;
          report(new Error(`writable again${lost > 0 ? `; ${lost} lines were lost` : ''}`));
          lost = 0;
        }
      } catch (err) {
        // Part of the batch may have reached the file; counting all of it as lost is close enough.
        fail(err, lines.length);
      }
    }
  }

  async function close(): Promise<void> {
    if (!closed) {
      flushSync();
      closed = true;
      closeFd();
      process.removeListener('exit', onExit);
    }
    return background;
  }

  const onExit = (): void => flushSync();
  process.on('exit', onExit);

  try {
    open();
  } catch (err) {
    fail(err, 0);
  }
  queue(async () => {
    await recover();
    await prune();
  });

  return {
    path: file,
    write(chunk) {
      if (closed) return true;
      if (pendingBytes + chunk.length > MAX_PENDING_BYTES) {
        lost++;
        return true;
      }
      pending.push(chunk);
      pendingBytes += chunk.length;
      if (pendingBytes >= BATCH_BYTES) flushSync();
      else if (!scheduled) {
        scheduled = true;
        setImmediate(flushSync);
      }
      return true;
    },
    flushSync,
    flush(cb) {
      flushSync();
      cb?.();
    },
    idle() {
      return background;
    },
    close,
    end() {
      void close();
    },
  };
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function asError(err: unknown, context: string): Error {
  const msg = err instanceof Error ? err.message : String(err);
  return new Error(`${context}: ${msg}`, { cause: err });
}

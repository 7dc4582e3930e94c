/**
 * Single instance through a lock file (bandwidthd's `general.lock_file`, the node agent's
 * `<database.path>.lock`, the panel's `<data_dir>/panel.sqlite.lock`): a file created with O_EXCL
 * that holds the owner's pid. Node has no flock(2), and a plain O_EXCL file outlives a crash
 * (kill -9, a power cut), so a lock is taken over when its pid is no longer alive, is our own pid
 * from an earlier life in the same pid namespace, or belongs to a process that started after the
 * lock was written: after a reboot the pid is often some other program's, and a daemon that
 * trusted it would refuse to start until someone deleted the file.
 */
import { closeSync, constants, openSync, readFileSync, realpathSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { Logger } from 'pino';
import { makeDirs } from './make-dirs.ts';

/** Whether a process with this pid exists (EPERM means it exists but belongs to someone else). */
export function pidAlive(pid: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

// Linux reports process start times in USER_HZ ticks, 100 a second on every architecture.
const USER_HZ = 100;
/** A process that started this long after the lock's last write still counts as its writer (clock granularity). */
const START_SLACK_MS = 2000;

/**
 * What /proc says of a process: whether it has exited (a zombie its parent has not reaped yet,
 * which `kill(pid, 0)` still finds) and when it started (ms since the epoch); undefined when /proc
 * does not tell.
 */
function processState(pid: number): { exited: boolean; started: number | undefined } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name (which may hold spaces): the state is the 3rd
    // field, starttime the 22nd.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[19]);
    const btime = Number(/^btime (\d+)$/m.exec(readFileSync('/proc/stat', 'utf8'))?.[1]);
    return { exited: fields[0] === 'Z' || fields[0] === 'X', started: Number.isFinite(ticks) && Number.isFinite(btime) ? btime * 1000 + (ticks * 1000) / USER_HZ : undefined };
  } catch {
    return undefined;
  }
}

/** Whether `holder` can be the process that wrote the lock at `path`: running, and started before the lock's last write. */
function holds(holder: number, path: string): boolean {
  if (!pidAlive(holder)) return false;
  const state = processState(holder);
  if (state?.exited === true) return false;
  const started = state?.started;
  if (started === undefined) return true;
  try {
    return started <= statSync(path).mtimeMs + START_SLACK_MS;
  } catch {
    return false;
  }
}

/**
 * The lock file of a data file: `<file>.lock` beside the file's real path, so a symlink or a
 * second spelling of the same database cannot get a second instance past the lock.
 */
export function lockPathFor(file: string): string {
  try {
    return `${realpathSync(file)}.lock`;
  } catch {
    // Not there yet: the directory may exist (and be a link) even if the file does not.
    try {
      return `${join(realpathSync(dirname(file)), basename(file))}.lock`;
    } catch {
      return `${file}.lock`;
    }
  }
}

function readPid(path: string): number | undefined {
  try {
    const n = Number.parseInt(readFileSync(path, 'utf8').trim(), 10);
    return Number.isSafeInteger(n) ? n : undefined;
  } catch {
    return undefined;
  }
}

export interface InstanceLock {
  /** Removes the lock file if it still holds our pid; idempotent. */
  release(): void;
  /** The lock file. */
  readonly path: string;
  /** The pid of an earlier holder that did not stop cleanly, whose lock this one took over (see logTakeover). */
  readonly takenOver: number | undefined;
}

/** Says in the daemon's log, once at start, that `lock` was taken over from a run that crashed; nothing for a free lock. */
export function logTakeover(lock: InstanceLock, logger: Pick<Logger, 'warn'>): void {
  if (lock.takenOver !== undefined) logger.warn({ lock: lock.path, previous_pid: lock.takenOver }, 'took over the lock of an earlier run that did not stop cleanly');
}

/**
 * Runs once at daemon start, before anything else touches shared state. Returns the held lock;
 * throws naming the holder (`another <what> is already running`) when a live process owns it.
 */
export function acquireLock(path: string, what: string, pid: number = process.pid): InstanceLock {
  makeDirs(dirname(path));
  let takenOver: number | undefined;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = openSync(path, 'wx', 0o644);
      try {
        writeSync(fd, `${pid}\n`);
      } finally {
        closeSync(fd);
      }
      let released = false;
      return {
        path,
        takenOver,
        release() {
          if (released) return;
          released = true;
          if (readPid(path) === pid) {
            try {
              unlinkSync(path);
            } catch {
              // already gone
            }
          }
        },
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = readPid(path);
      // An empty file is a holder between open and write: give it a moment by retrying.
      if (holder !== undefined && holder !== pid && holds(holder, path)) {
        throw new Error(`another ${what} is already running (pid ${holder} holds ${path})`);
      }
      if (holder !== undefined) takenOver = holder;
      try {
        unlinkSync(path);
      } catch {
        // someone else took it over first; the next O_EXCL attempt decides
      }
    }
  }
  throw new Error(`cannot take the lock ${path}: it keeps changing hands`);
}

/** Writes the pid file (runs at start); returns a function that removes it at shutdown. */
export function writePidFile(path: string, pid: number = process.pid): () => void {
  makeDirs(dirname(path));
  // O_NOFOLLOW: a link planted where the pid file goes (a pid_file in a shared directory) would
  // have root's write land on the file it points at.
  const fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW, 0o644);
  try {
    writeSync(fd, `${pid}\n`);
  } finally {
    closeSync(fd);
  }
  return () => {
    if (readPid(path) === pid) {
      try {
        unlinkSync(path);
      } catch {
        // already gone
      }
    }
  };
}

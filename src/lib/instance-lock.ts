/**
 * Single instance through a lock file (bandwidthd's `general.lock_file`, the node agent's
 * `<database.path>.lock`): a file created with O_EXCL that holds the owner's pid. Node has no flock(2), and a plain O_EXCL file outlives a crash, so a lock whose pid is no
 * longer alive (or is our own pid from an earlier life in the same pid namespace) is taken over.
 */
import { closeSync, openSync, readFileSync, unlinkSync, writeFileSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
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
}

/**
 * Runs once at daemon start, before anything else touches shared state. Returns the held lock;
 * throws naming the holder (`another <what> is already running`) when a live process owns it.
 */
export function acquireLock(path: string, what: string, pid: number = process.pid): InstanceLock {
  makeDirs(dirname(path));
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
      if (holder !== undefined && holder !== pid && pidAlive(holder)) {
        throw new Error(`another ${what} is already running (pid ${holder} holds ${path})`);
      }
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
  writeFileSync(path, `${pid}\n`, { mode: 0o644 });
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

/**
 * The files of data_dir that the main thread keeps from the shared table (quota.json,
 * bans.json): each is written whole (temporary file, fsync, rename, mode 0600), at most once a
 * second while its state changes and once more at shutdown. A reader (the next start) never sees
 * half a file, and after a crash (kill -9, power loss) at most the last second of changes is missing.
 */
import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';

const FLUSH_MS = 1_000;

export interface StateFile {
  /** Writes the file now if its state changed (or the last write failed); runs every second and at shutdown. */
  flush(): void;
  /** Stops the timer and writes a last time. */
  close(): void;
}

/**
 * Starts keeping `file`; runs once at start, after the state was read. `changed` says (and
 * forgets) whether the state changed since it last asked; `snapshot` is the content, as JSON.
 * A failed write is reported to `onWriteError` and tried again at the next second.
 */
export function keepStateFile(opts: { file: string; changed: () => boolean; snapshot: () => unknown; onWriteError: (err: unknown) => void }): StateFile {
  const { file } = opts;
  let retry = false;

  function flush(): void {
    if (!opts.changed() && !retry) return;
    retry = false;
    const tmp = `${file}.tmp`;
    try {
      const fd = openSync(tmp, 'w', 0o600);
      try {
        writeSync(fd, JSON.stringify(opts.snapshot()));
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      renameSync(tmp, file);
    } catch (err) {
      retry = true;
      rmSync(tmp, { force: true });
      opts.onWriteError(err);
    }
  }

  const timer = setInterval(flush, FLUSH_MS);
  timer.unref();
  return {
    flush,
    close() {
      clearInterval(timer);
      flush();
    },
  };
}

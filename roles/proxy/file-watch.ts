/**
 * Hot reload triggers: fs.watch on the root (config.yaml) and on the sites directory, plus a
 * periodic check, because fs.watch misses changes on some file systems (network mounts, some
 * container volumes) and cannot watch a directory that does not exist yet. Bursts of events (an
 * editor's write + rename) are folded into one reload.
 */
import { watch, type FSWatcher } from 'node:fs';
import type { Logger } from 'pino';

export interface FileWatch {
  close(): void;
}

/**
 * Starts watching; runs once at start. `onChange` runs after `debounceMs` of quiet following an
 * event, and every `pollMs` (it is expected to be cheap when nothing changed: stat calls only).
 */
export function watchConfigFiles(opts: { dirs: readonly string[]; onChange: (reason: string) => void; logger: Logger; debounceMs?: number; pollMs?: number }): FileWatch {
  const debounceMs = opts.debounceMs ?? 100;
  const watchers = new Map<string, FSWatcher>();
  let timer: NodeJS.Timeout | undefined;

  const trigger = (): void => {
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => {
      timer = undefined;
      opts.onChange('file change');
    }, debounceMs);
  };

  // Re-tried on every poll: the sites directory may be created after the start.
  const ensureWatchers = (): void => {
    for (const dir of opts.dirs) {
      if (watchers.has(dir)) continue;
      try {
        const w = watch(dir, { persistent: false }, (_event, name) => {
          if (name === null || /\.ya?ml$/.test(name.toString())) trigger();
        });
        w.on('error', () => {
          w.close();
          watchers.delete(dir);
        });
        watchers.set(dir, w);
      } catch (err) {
        opts.logger.debug({ dir, err: (err as Error).message }, 'cannot watch directory; the periodic check covers it');
      }
    }
  };
  ensureWatchers();

  const poll = setInterval(() => {
    ensureWatchers();
    opts.onChange('periodic check');
  }, opts.pollMs ?? 2_000);
  poll.unref();

  return {
    close() {
      clearInterval(poll);
      if (timer) clearTimeout(timer);
      for (const w of watchers.values()) w.close();
      watchers.clear();
    },
  };
}

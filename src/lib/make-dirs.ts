/**
 * `mkdir -p`, without node's `mkdirSync(dir, { recursive: true })`, which never returns for a
 * path under a filesystem that refuses new entries with ENOENT (`/proc/nope/x`, seen on node 20
 * and 24): a daemon given such a path in its config spun at 100% CPU instead of saying why.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/** Creates `dir` and its missing parents (with `mode`); throws the first refusal (ENOENT, EACCES, ENOTDIR...). */
export function makeDirs(dir: string, mode?: number): void {
  const missing: string[] = [];
  for (let d = resolve(dir); !existsSync(d); d = dirname(d)) {
    missing.push(d);
    if (dirname(d) === d) break;
  }
  for (const d of missing.reverse()) mkdirSync(d, mode === undefined ? {} : { mode });
}

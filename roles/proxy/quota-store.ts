/**
 * Monthly up+down byte counters per site (spec/3 §2.6 `bandwidth.monthly_quota_bytes`), kept in
 * `<data_dir>/quota.json` by the main thread; every worker counts into the same shared-table entry
 * (shared-table.ts). Counters hold absolute totals of the current window and are written
 * (temporary file, fsync, rename) at most once a second while they change, and on shutdown:
 * after a crash at most the last second of bytes is missing, and nothing is ever counted twice,
 * since a restart reads the totals instead of replaying anything. A window starts at 00:00 UTC on
 * `quota_reset_day` (null = 1); the first count or check in a new window starts from zero, unless
 * a changed reset day makes the current window start before the counted one, which it then holds.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SharedTable } from './shared-table.ts';
import { wallNow } from './read-clock.ts';
import { keepStateFile } from './state-file.ts';
import { makeDirs } from '../../src/lib/make-dirs.ts';

export interface QuotaSettings {
  monthly_quota_bytes: number | null;
  quota_reset_day: number | null;
}

export interface QuotaUsage {
  /** The window's first day (`YYYY-MM-DD`, UTC). */
  window_start: string;
  bytes: number;
  limit: number | null;
  exceeded: boolean;
}

export interface QuotaExceeded {
  site: string;
  window_start: string;
  bytes: number;
  limit: number;
}

export interface QuotaCounters {
  /** Counts bytes a site moved (request and response bodies, tunnel bytes); runs when they are known. */
  add(siteId: string, settings: QuotaSettings, bytes: number, now?: Date): void;
  /**
   * The quota phase's question, once per request: is the site at or over its quota? The first
   * time a window is found over, `onExceeded` runs (once per window, across restarts).
   */
  isOver(siteId: string, settings: QuotaSettings, now?: Date): boolean;
  usage(siteId: string, settings: QuotaSettings, now?: Date): QuotaUsage;
}

/** The main thread's counters: they also load from and write to quota.json. */
export interface QuotaStore extends QuotaCounters {
  /** Sites whose counters go into the file (every site of every generation, and the file's own). */
  track(siteIds: Iterable<string>): void;
  /** Writes the counters now if they changed; runs every second and at shutdown. */
  flush(): void;
  /** Stops the timer and writes a last time. */
  close(): void;
}

interface Counter {
  window: string;
  bytes: number;
  /** The quota_exceeded event of this window was sent. */
  notified: boolean;
}

interface FileShape {
  version: 1;
  sites: Record<string, Counter>;
}

const FILE = 'quota.json';
// A site's entry in the shared table: values window (YYYYMMDD), bytes, notified (0/1).
const PREFIX = 'q\0';
const WINDOW = 1;
const BYTES = 2;
const NOTIFIED = 3;

const windowNumber = (window: string): number => Number(window.replaceAll('-', ''));
const windowText = (n: number): string => `${String(Math.floor(n / 10000))}-${String(Math.floor(n / 100) % 100).padStart(2, '0')}-${String(n % 100).padStart(2, '0')}`;

/** First day of the window holding `now`: the latest `day` of a month at or before today, UTC. */
export function windowStart(now: Date, resetDay: number | null): string {
  const day = resetDay ?? 1;
  let y = now.getUTCFullYear();
  let m = now.getUTCMonth();
  if (now.getUTCDate() < day) {
    m -= 1;
    if (m < 0) {
      m = 11;
      y -= 1;
    }
  }
  return `${y}-${String(m + 1).padStart(2, '0')}-${String(day).padStart(2, '0')}`;
}

/** A counter's window as written: YYYY-MM-DD. */
const WINDOW_TEXT = /^[0-9]{4}-[0-9]{2}-[0-9]{2}$/;

/**
 * Reads quota.json. A file that does not parse throws (every quota would silently reset); one
 * site's counter that is no window and byte count (negative, fractional, not a number) is
 * reported through `onCorrupt` and counts from zero, so that site's quota is never skipped silently.
 */
function readCounters(file: string, onCorrupt: (site: string, value: unknown) => void): Map<string, Counter> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return new Map();
    throw err;
  }
  let parsed: Partial<FileShape>;
  try {
    parsed = JSON.parse(text) as Partial<FileShape>;
  } catch (err) {
    throw new Error(`${file}: cannot read the quota counters (${(err as Error).message}); fix or delete the file`, { cause: err });
  }
  const out = new Map<string, Counter>();
  for (const [id, c] of Object.entries(parsed.sites ?? {})) {
    if (typeof c?.window === 'string' && WINDOW_TEXT.test(c.window) && Number.isSafeInteger(c.bytes) && c.bytes >= 0) {
      out.set(id, { window: c.window, bytes: c.bytes, notified: c.notified === true });
    } else {
      onCorrupt(id, c);
    }
  }
  return out;
}

/**
 * The counters in `table`, shared by every worker: every thread counts into the same entry, and
 * quota_exceeded goes out once per window whichever worker sees it first. `known` collects the
 * sites counted here (the main thread writes those).
 */
export function createQuotaCounters(table: SharedTable, onExceeded: (e: QuotaExceeded) => void, known = new Set<string>()): QuotaCounters {
  // Reset day -> its current window, valid until the next UTC midnight: one Date per day, not per request.
  const windows = new Map<number, { window: number; until: number }>();

  function windowFor(resetDay: number | null, now: Date | undefined): number {
    if (now) return windowNumber(windowStart(now, resetDay));
    const t = wallNow();
    const day = resetDay ?? 1;
    const cached = windows.get(day);
    if (cached && t < cached.until) return cached.window;
    const d = new Date(t);
    const window = windowNumber(windowStart(d, day));
    windows.set(day, { window, until: Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1) });
    return window;
  }

  /** The site's entry in its current window (under the lock); -1 when the table is full. */
  function counter(siteId: string, settings: QuotaSettings, now: Date | undefined): number {
    const window = windowFor(settings.quota_reset_day, now);
    known.add(siteId);
    const at = table.find(PREFIX, 0, true, siteId);
    if (at === -1) return -1;
    const v = table.values;
    const counted = v[at + WINDOW] as number;
    if (counted !== window) {
      if (!table.created) table.markDirty('quota');
      v[at + WINDOW] = window;
      // A window that starts before the counted one holds it (quota_reset_day moved back): its
      // bytes count on. A later one is a new window from zero.
      if (table.created || counted < window) {
        v[at + BYTES] = 0;
        v[at + NOTIFIED] = 0;
      }
    }
    return at;
  }

  return {
    add(siteId, settings, bytes, now) {
      if (bytes <= 0) return;
      table.lock();
      const at = counter(siteId, settings, now);
      if (at !== -1) table.values[at + BYTES] = (table.values[at + BYTES] as number) + bytes;
      table.unlock();
      table.markDirty('quota');
    },
    isOver(siteId, settings, now) {
      const limit = settings.monthly_quota_bytes;
      if (limit === null) return false;
      table.lock();
      const at = counter(siteId, settings, now);
      const v = table.values;
      const bytes = at === -1 ? 0 : (v[at + BYTES] as number);
      const notify = at !== -1 && bytes >= limit && v[at + NOTIFIED] === 0;
      if (notify) v[at + NOTIFIED] = 1;
      const window = at === -1 ? 0 : (v[at + WINDOW] as number);
      table.unlock();
      if (notify) {
        table.markDirty('quota');
        onExceeded({ site: siteId, window_start: windowText(window), bytes, limit });
      }
      return bytes >= limit;
    },
    usage(siteId, settings, now) {
      table.lock();
      const at = counter(siteId, settings, now);
      const v = table.values;
      const window = at === -1 ? windowFor(settings.quota_reset_day, now) : (v[at + WINDOW] as number);
      const bytes = at === -1 ? 0 : (v[at + BYTES] as number);
      table.unlock();
      const limit = settings.monthly_quota_bytes;
      return { window_start: windowText(window), bytes, limit, exceeded: limit !== null && bytes >= limit };
    },
  };
}

/**
 * Opens (creating `dataDir` with mode 0700) and reads the counters into `table`; runs once at
 * start on the main thread and throws when the file exists but cannot be parsed, so a damaged
 * file never silently resets every quota. The main thread writes the file; workers only count.
 */
export function openQuotaStore(opts: {
  dataDir: string;
  table?: SharedTable;
  onExceeded: (e: QuotaExceeded) => void;
  onWriteError: (err: unknown) => void;
  /** A site's counter in the file is damaged and starts from zero; runs at most once per site, at open. */
  onCorrupt: (e: { file: string; site: string; value: unknown }) => void;
}): QuotaStore {
  makeDirs(opts.dataDir, 0o700);
  const file = join(opts.dataDir, FILE);
  const table = opts.table ?? SharedTable.create();
  const known = new Set<string>();
  const saved = readCounters(file, (site, value) => opts.onCorrupt({ file, site, value }));
  table.lock();
  for (const [id, c] of saved) {
    const at = table.find(PREFIX, 0, true, id);
    if (at === -1) continue;
    table.values[at + WINDOW] = windowNumber(c.window);
    table.values[at + BYTES] = c.bytes;
    table.values[at + NOTIFIED] = c.notified ? 1 : 0;
    known.add(id);
  }
  table.unlock();
  const counters = createQuotaCounters(table, opts.onExceeded, known);

  function snapshot(): FileShape {
    const sites: Record<string, Counter> = {};
    table.lock();
    for (const id of known) {
      const at = table.find(PREFIX, 0, false, id);
      if (at === -1) continue;
      const v = table.values;
      sites[id] = { window: windowText(v[at + WINDOW] as number), bytes: v[at + BYTES] as number, notified: v[at + NOTIFIED] === 1 };
    }
    table.unlock();
    return { version: 1, sites };
  }

  const stateFile = keepStateFile({ file, changed: () => table.takeDirty('quota'), snapshot, onWriteError: opts.onWriteError });
  return {
    ...counters,
    track(siteIds) {
      for (const id of siteIds) known.add(id);
    },
    flush: stateFile.flush,
    close: stateFile.close,
  };
}

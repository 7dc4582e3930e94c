/**
 * Monthly up+down byte counters per site (spec/3 §2.6 `bandwidth.monthly_quota_bytes`), kept in
 * `<data_dir>/quota.json`. Counters hold absolute totals of the current window and are written
 * (temporary file, fsync, rename) at most once a second while they change, and on shutdown:
 * after a crash at most the last second of bytes is missing, and nothing is ever counted twice,
 * since a restart reads the totals instead of replaying anything. A window starts at 00:00 UTC on
 * `quota_reset_day` (null = 1); the first count or check in a new window starts from zero.
 */
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';

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

export interface QuotaStore {
  /** Counts bytes a site moved (request and response bodies, tunnel bytes); runs when they are known. */
  add(siteId: string, settings: QuotaSettings, bytes: number, now?: Date): void;
  /**
   * The quota phase's question, once per request: is the site at or over its quota? The first
   * time a window is found over, `onExceeded` runs (once per window, across restarts).
   */
  isOver(siteId: string, settings: QuotaSettings, now?: Date): boolean;
  usage(siteId: string, settings: QuotaSettings, now?: Date): QuotaUsage;
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
const FLUSH_MS = 1_000;

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

function readCounters(file: string): Map<string, Counter> {
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
    if (typeof c?.window === 'string' && Number.isFinite(c.bytes)) out.set(id, { window: c.window, bytes: c.bytes, notified: c.notified === true });
  }
  return out;
}

/**
 * Opens (creating `dataDir` with mode 0700) and reads the counters; runs once at start and throws
 * when the file exists but cannot be parsed, so a damaged file never silently resets every quota.
 */
export function openQuotaStore(opts: { dataDir: string; onExceeded: (e: QuotaExceeded) => void; onWriteError: (err: unknown) => void }): QuotaStore {
  mkdirSync(opts.dataDir, { recursive: true, mode: 0o700 });
  const file = join(opts.dataDir, FILE);
  const counters = readCounters(file);
  let dirty = false;
  // Reset day -> its current window, valid until the next UTC midnight: one Date per day, not per request.
  const windows = new Map<number, { window: string; until: number }>();

  function windowFor(resetDay: number | null, now: Date | undefined): string {
    if (now) return windowStart(now, resetDay);
    const t = Date.now();
    const day = resetDay ?? 1;
    const cached = windows.get(day);
    if (cached && t < cached.until) return cached.window;
    const d = new Date(t);
    const window = windowStart(d, day);
    windows.set(day, { window, until: Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1) });
    return window;
  }

  function counter(siteId: string, settings: QuotaSettings, now: Date | undefined): Counter {
    const window = windowFor(settings.quota_reset_day, now);
    let c = counters.get(siteId);
    if (!c) counters.set(siteId, (c = { window, bytes: 0, notified: false }));
    else if (c.window !== window) {
      c.window = window;
      c.bytes = 0;
      c.notified = false;
      dirty = true;
    }
    return c;
  }

  function flush(): void {
    if (!dirty) return;
    dirty = false;
    const body: FileShape = { version: 1, sites: Object.fromEntries(counters) };
    const tmp = `${file}.tmp`;
    try {
      const fd = openSync(tmp, 'w', 0o600);
      try {
        writeSync(fd, JSON.stringify(body));
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      renameSync(tmp, file);
    } catch (err) {
      dirty = true;
      rmSync(tmp, { force: true });
      opts.onWriteError(err);
    }
  }

  const timer = setInterval(flush, FLUSH_MS);
  timer.unref();

  return {
    add(siteId, settings, bytes, now) {
      if (bytes <= 0) return;
      counter(siteId, settings, now).bytes += bytes;
      dirty = true;
    },
    isOver(siteId, settings, now) {
      const limit = settings.monthly_quota_bytes;
      if (limit === null) return false;
      const c = counter(siteId, settings, now);
      if (c.bytes < limit) return false;
      if (!c.notified) {
        c.notified = true;
        dirty = true;
        opts.onExceeded({ site: siteId, window_start: c.window, bytes: c.bytes, limit });
      }
      return true;
    },
    usage(siteId, settings, now) {
      const c = counter(siteId, settings, now);
      const limit = settings.monthly_quota_bytes;
      return { window_start: c.window, bytes: c.bytes, limit, exceeded: limit !== null && c.bytes >= limit };
    },
    flush,
    close() {
      clearInterval(timer);
      flush();
    },
  };
}

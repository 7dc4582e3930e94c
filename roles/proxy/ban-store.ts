/**
 * Bans across restarts: the main thread keeps the active bans and the rate limiter's strikes (what
 * doubles a repeat offender's next ban) in `<data_dir>/bans.json`, written as quota.json is
 * (state-file.ts): within a second of a change made by a worker, at once for a change made through
 * the admin API (so a ban or a lift that was answered is on disk), and at shutdown. A start reads
 * the file back and leaves out what ended meanwhile. A damaged or unreadable file never stops the
 * proxy: what cannot be read is dropped and reported, and the file is replaced at the next change.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { canonicalIp } from '../../src/lib/ip-match.ts';
import { makeDirs } from '../../src/lib/make-dirs.ts';
import { BAN_REASONS, createBanList, MAX_ADMIN_BAN_SECS, type Ban, type BanList, type BanState, type Strike } from './ban-list.ts';
import { SharedTable } from './shared-table.ts';
import { SITE_ID } from './site-ids.ts';
import { keepStateFile } from './state-file.ts';

export const BANS_FILE = 'bans.json';
/** Saved bans and strikes put back at most: a quarter of the shared table's default slots. */
export const MAX_RESTORED = 65_536;

/** The main thread's list: it also loads from and writes to bans.json. */
export interface BanStore extends BanList {
  /** Writes the file now if bans or strikes changed; runs every second and at shutdown. */
  flush(): void;
  /** Stops the timer and writes a last time. */
  close(): void;
}

/** bans.json: times in ISO form, so an operator can read the file. */
interface FileShape {
  version: 1;
  bans: { ip: string; site: string | null; reason: Ban['reason']; since: string; until: string }[];
  /** `until`: when the strikes stop counting towards doubling (24 h after the last ban's end). */
  strikes: { ip: string; site: string; count: number; until: string }[];
}

const iso = (ms: number): string => new Date(ms).toISOString();

function toFile(state: BanState): FileShape {
  return {
    version: 1,
    bans: state.bans.map((b) => ({ ip: b.ip, site: b.site, reason: b.reason, since: iso(b.since), until: iso(b.until) })),
    strikes: state.strikes.map((s) => ({ ip: s.ip, site: s.site, count: s.count, until: iso(s.until) })),
  };
}

/** An ISO time as epoch ms, or undefined. */
function timeOf(v: unknown): number | undefined {
  const ms = typeof v === 'string' ? Date.parse(v) : Number.NaN;
  return Number.isFinite(ms) ? ms : undefined;
}

/** The address as the proxy keys it (a hand-edited file may spell it otherwise), or undefined. */
const ipOf = (v: unknown): string | undefined => (typeof v === 'string' ? canonicalIp(v) : undefined);
const siteOf = (v: unknown): string | undefined => (typeof v === 'string' && SITE_ID.test(v) ? v : undefined);

function banOf(raw: unknown): Ban | undefined {
  const r = (raw ?? {}) as Record<string, unknown>;
  const ip = ipOf(r['ip']);
  const site = r['site'] === null ? null : siteOf(r['site']);
  const reason = BAN_REASONS.find((x) => x === r['reason']);
  const since = timeOf(r['since']);
  const until = timeOf(r['until']);
  if (ip === undefined || site === undefined || reason === undefined || since === undefined || until === undefined) return undefined;
  return { ip, site, reason, since, until };
}

function strikeOf(raw: unknown): Strike | undefined {
  const r = (raw ?? {}) as Record<string, unknown>;
  const ip = ipOf(r['ip']);
  const site = siteOf(r['site']);
  const count = r['count'];
  const until = timeOf(r['until']);
  if (ip === undefined || site === undefined || typeof count !== 'number' || !Number.isSafeInteger(count) || count < 1 || until === undefined) return undefined;
  return { ip, site, count, until };
}

/**
 * Reads bans.json (runs once, at start): no file is no bans. A file that cannot be read or is not
 * the file's shape gives no bans; entries that are not a ban or a strike, and those beyond
 * `maxEntries` (a hand-made file), are left out. Any of these goes to `onDamaged`, naming what was
 * dropped. What has ended is left out silently.
 */
function readState(file: string, maxEntries: number, onDamaged: (problem: string) => void): BanState {
  const none: BanState = { bans: [], strikes: [] };
  let parsed: Partial<FileShape>;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<FileShape>;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') onDamaged(`${(err as Error).message}: every saved ban is dropped`);
    return none;
  }
  if (parsed?.version !== 1 || !Array.isArray(parsed.bans) || !Array.isArray(parsed.strikes)) {
    onDamaged('not a version 1 file with lists of bans and strikes: every saved ban is dropped');
    return none;
  }
  const bans = parsed.bans.map(banOf);
  const strikes = parsed.strikes.map(strikeOf);
  const problems: string[] = [];
  const dropped = [...bans, ...strikes].filter((x) => x === undefined).length;
  if (dropped > 0) problems.push(`${dropped} of ${bans.length + strikes.length} entries are not a ban or a strike: they are dropped`);
  const now = Date.now();
  const live = {
    // Admin bans first, then those ending last: what a cap keeps.
    // Times a hand edit put out of reach are brought back: a ban from the future starts now, and
    // none outlasts the longest the API makes (Retry-After would otherwise count in millennia).
    bans: bans
      .filter((b): b is Ban => b !== undefined && b.until > now)
      .map((b) => ({ ...b, since: Math.min(b.since, now), until: Math.min(b.until, now + MAX_ADMIN_BAN_SECS * 1000) }))
      .sort((a, b) => Number(b.reason === 'admin') - Number(a.reason === 'admin') || b.until - a.until),
    strikes: strikes.filter((x): x is Strike => x !== undefined && x.until > now),
  };
  const over = live.bans.length + live.strikes.length - maxEntries;
  if (over > 0) {
    // The table the workers share also holds every rate window and connection slot: filled with
    // bans, it would refuse those counters and so switch the limits off.
    problems.push(`${over} entries beyond the ${maxEntries} put back are dropped (admin bans and the longest kept first)`);
    live.bans = live.bans.slice(0, maxEntries);
    live.strikes = live.strikes.slice(0, maxEntries - live.bans.length);
  }
  if (problems.length > 0) onDamaged(problems.join('; '));
  return live;
}

/**
 * Opens the list (creating `dataDir` with mode 0700) with the bans and strikes of bans.json put
 * back in `table`; runs once at start on the main thread, before the workers serve.
 */
export function openBanStore(opts: {
  dataDir: string;
  table?: SharedTable;
  /** The file is damaged or unreadable (`problem` says what was dropped); runs at most once, at open. */
  onDamaged: (e: { file: string; problem: string }) => void;
  onWriteError: (err: unknown) => void;
  /** Tests: MAX_RESTORED. */
  maxEntries?: number;
}): BanStore {
  makeDirs(opts.dataDir, 0o700);
  const file = join(opts.dataDir, BANS_FILE);
  const table = opts.table ?? SharedTable.create();
  const list = createBanList(table);
  list.restore(readState(file, opts.maxEntries ?? MAX_RESTORED, (problem) => opts.onDamaged({ file, problem })));
  // Putting the saved bans back changes nothing on disk: the file (a damaged one too, kept for a
  // look) is rewritten at the next ban change, not a second after the start.
  table.takeDirty('bans');
  const stateFile = keepStateFile({ file, changed: () => table.takeDirty('bans'), snapshot: () => toFile(list.state()), onWriteError: opts.onWriteError });
  return {
    ...list,
    add(...args) {
      const ban = list.add(...args);
      stateFile.flush();
      return ban;
    },
    remove(...args) {
      const removed = list.remove(...args);
      stateFile.flush();
      return removed;
    },
    flush: stateFile.flush,
    close: stateFile.close,
  };
}

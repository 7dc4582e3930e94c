/**
 * Temporary client bans (spec/3 §3 "proxy client"): made by the rate limiter after
 * `ban_after_violations` violations in one window, or through the admin API. A ban is for one site
 * or, with `site` null, for every site. It lives in the pipeline services, so a reload keeps it;
 * the main thread keeps bans and strikes in `<data_dir>/bans.json` (ban-store.ts), so a restart
 * keeps them too. Bans and strikes live in the shared table, so a ban made on one worker holds
 * on all of them. Repeat offenders: each automatic ban doubles the previous one's length
 * (capped at 24 h) while the IP was banned on that site within the last 24 h.
 */
import { SharedTable } from './shared-table.ts';
import { wallNow } from './read-clock.ts';
import type { Logger } from 'pino';

export const MAX_BAN_SECS = 24 * 3600;
/** The longest ban the admin API makes (and a saved ban keeps): a year; longer is a blacklist entry's job. */
export const MAX_ADMIN_BAN_SECS = 365 * 24 * 3600;
// How long a past ban still counts towards doubling.
const STRIKE_MEMORY_MS = MAX_BAN_SECS * 1000;

export interface Ban {
  ip: string;
  /** The site the ban applies to; null = every site. */
  site: string | null;
  /** Epoch ms. */
  since: number;
  until: number;
  /** `rate_limit` (automatic) or `admin`. */
  reason: 'rate_limit' | 'admin';
}

export interface Strike {
  ip: string;
  site: string;
  /** Automatic bans of the IP on the site, each made less than 24 h after the previous one ended. */
  count: number;
  /** Epoch ms when the strikes stop counting: 24 h after the last ban's end. */
  until: number;
}

/** What a restart keeps (ban-store.ts): the active bans and the strikes that double the next ban. */
export interface BanState {
  bans: Ban[];
  strikes: Strike[];
}

export interface BanList {
  /** The ban that blocks `ip` on `site` right now (of a site ban and a global one, the one ending last), or undefined. */
  active(site: string, ip: string, now?: number): Ban | undefined;
  /**
   * Bans after a rate-limit offence: `baseSecs`, doubled per earlier ban of the IP on the site
   * within 24 h, capped at 24 h, and logs it. Returns the ban, or undefined when the IP is
   * already banned on the site (another worker's request got there first: one ban, one strike).
   */
  banOffender(site: string, ip: string, baseSecs: number, now?: number): Ban | undefined;
  /**
   * Adds or replaces the ban of `ip` on `site` (null = every site); the admin API's POST. Returns
   * the ban, or undefined when the shared table is full and the ban was not made.
   */
  add(ip: string, site: string | null, durationSecs: number, reason: Ban['reason'], now?: number): Ban | undefined;
  /**
   * Removes the IP's bans (on one site when `site` is given; null: the every-site ban) and, when
   * any went, the IP's strikes in the same scope; returns how many bans went.
   */
  remove(ip: string, site?: string | null): number;
  /** Active bans, oldest first. */
  list(now?: number): Ban[];
  /** Active bans and strikes still counting, to be written down (ban-store.ts). */
  state(now?: number): BanState;
  /** Puts back saved bans and strikes, leaving out what ended by `now`; runs at start, before any request. */
  restore(state: BanState, now?: number): void;
}

export const BAN_REASONS: readonly Ban['reason'][] = ['rate_limit', 'admin'];
const BAN = 'b\0';
const STRIKE = 'k\0';

/**
 * Creates the list in `table` (shared by every worker); runs once per thread at start. `logger`
 * gets one line per automatic ban (threads that serve requests pass theirs): bans are rare next
 * to requests, so even a flood logs little. Every change marks the table's `bans` flag, so the
 * main thread writes bans.json.
 */
export function createBanList(table: SharedTable = SharedTable.create(), logger?: Pick<Logger, 'warn'>): BanList {
  // Keys `b\0${site ?? ''}\0${ip}` (values since, until, reason) and `k\0...` (strike count, last until).
  const key = (site: string | null, ip: string): string => `${site ?? ''}\0${ip}`;

  /** The site (null: every site) and IP of a key without its prefix. */
  function split(k: string): { site: string | null; ip: string } {
    const sep = k.indexOf('\0');
    return { ip: k.slice(sep + 1), site: sep === 0 ? null : k.slice(0, sep) };
  }

  /** The ban stored at `at` under `k` (its key without the prefix). */
  function decode(k: string, at: number): Ban {
    const v = table.values;
    return { ...split(k), since: v[at + 1] as number, until: v[at] as number, reason: BAN_REASONS[v[at + 2] as number] ?? 'admin' };
  }

  /** Active bans, in table order (under the lock). */
  function bansAt(now: number): Ban[] {
    const out: Ban[] = [];
    table.scan(BAN, now, (k, at) => out.push(decode(k.slice(BAN.length), at)));
    return out;
  }

  const oldestFirst = (bans: Ban[]): Ban[] => bans.sort((a, b) => a.since - b.since);

  /** The ban under `k` (under the lock); an expired one is absent. */
  function current(k: string, now: number): Ban | undefined {
    const at = table.find(BAN + k, now, false);
    return at === -1 ? undefined : decode(k, at);
  }

  const banFor = (ip: string, site: string | null, durationSecs: number, reason: Ban['reason'], now: number): Ban => ({ ip, site, since: now, until: now + Math.max(0, durationSecs) * 1000, reason });

  /** Stores a ban (under the lock); false when the table is full and the ban is not stored. */
  function store(ban: Ban, now: number): boolean {
    const at = table.find(BAN + key(ban.site, ban.ip), now, true);
    if (at === -1) return false;
    const v = table.values;
    v[at] = ban.until;
    v[at + 1] = ban.since;
    v[at + 2] = BAN_REASONS.indexOf(ban.reason);
    if (ban.until > table.banHorizon) table.banHorizon = ban.until;
    table.markDirty('bans');
    return true;
  }

  /** Stores the strikes of `ip` on `site` (under the lock), forgotten at `until`. */
  function storeStrike(site: string, ip: string, count: number, until: number, now: number): void {
    const at = table.find(STRIKE + key(site, ip), now, true);
    if (at === -1) return;
    table.values[at] = until;
    table.values[at + 1] = count;
    table.markDirty('bans');
  }

  function locked<R>(fn: () => R): R {
    table.lock();
    try {
      return fn();
    } finally {
      table.unlock();
    }
  }

  return {
    active(site, ip, now = wallNow()) {
      // No ban made so far lasts until now: nothing to look up (the common case).
      if (now >= table.banHorizon) return undefined;
      return locked(() => {
        // A site ban and an every-site ban at once: the one that ends last is the one in force.
        const own = current(key(site, ip), now);
        const all = current(key(null, ip), now);
        return own === undefined || (all !== undefined && all.until > own.until) ? all : own;
      });
    },
    banOffender(site, ip, baseSecs, now = wallNow()) {
      const made = locked(() => {
        if (current(key(site, ip), now) !== undefined) return undefined;
        const at = table.find(STRIKE + key(site, ip), now, true);
        const v = table.values;
        const count = at === -1 || table.created ? 1 : (v[at + 1] as number) + 1;
        const secs = Math.min(MAX_BAN_SECS, baseSecs * 2 ** Math.min(count - 1, 20));
        // A full table holds no ban: the flood goes on being refused by the rate limit alone.
        const ban = banFor(ip, site, secs, 'rate_limit', now);
        store(ban, now);
        // The strike is forgotten 24 h after the ban ends (find may have moved it: look it up again).
        storeStrike(site, ip, count, ban.until + STRIKE_MEMORY_MS, now);
        return { ban, secs, count };
      });
      if (made === undefined) return undefined;
      // Outside the lock: writing a log line never holds up the other workers.
      logger?.warn({ site, client_ip: ip, duration_secs: made.secs, offence: made.count, until: new Date(made.ban.until).toISOString() }, 'client banned by the rate limiter');
      return made.ban;
    },
    add(ip, site, durationSecs, reason, now = Date.now()) {
      const ban = banFor(ip, site, durationSecs, reason, now);
      return locked(() => store(ban, now)) ? ban : undefined;
    },
    remove(ip, site) {
      const now = Date.now();
      const inScope = (k: string): boolean => {
        const entry = split(k);
        return entry.ip === ip && (site === undefined || entry.site === site);
      };
      return locked(() => {
        let n = 0;
        table.scan(BAN, now, (k, at) => {
          if (inScope(k.slice(BAN.length))) {
            table.remove(at);
            n++;
          }
        });
        if (n === 0) return 0;
        // A lift forgives: without its strikes, the next ban of the address starts at the base
        // length instead of doubling an offence the operator pardoned. Strikes are per site, so
        // lifting the every-site ban alone (site null) leaves them.
        table.scan(STRIKE, now, (k, at) => {
          if (inScope(k.slice(STRIKE.length))) table.remove(at);
        });
        table.markDirty('bans');
        return n;
      });
    },
    list: (now = Date.now()) => oldestFirst(locked(() => bansAt(now))),
    state(now = Date.now()) {
      const strikes: Strike[] = [];
      const bans = locked(() => {
        table.scan(STRIKE, now, (k, at) => {
          // Strikes are made by the rate limiter, always for one site.
          const { ip, site } = split(k.slice(STRIKE.length));
          strikes.push({ ip, site: site ?? '', count: table.values[at + 1] as number, until: table.values[at] as number });
        });
        return bansAt(now);
      });
      return { bans: oldestFirst(bans), strikes };
    },
    restore(state, now = Date.now()) {
      locked(() => {
        for (const ban of state.bans) if (ban.until > now) store(ban, now);
        for (const s of state.strikes) if (s.until > now) storeStrike(s.site, s.ip, s.count, s.until, now);
      });
    },
  };
}

/**
 * Temporary client bans (spec/3 §3 "proxy client"): made by the rate limiter after
 * `ban_after_violations` violations in one window, or through the admin API. A ban is for one site
 * or, with `site` null, for every site. It lives in the pipeline services, so a reload keeps it;
 * a restart forgets it. Repeat offenders: each automatic ban doubles the previous one's length
 * (capped at 24 h) while the IP was banned on that site within the last 24 h.
 */

export const MAX_BAN_SECS = 24 * 3600;
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

export interface BanList {
  /** The ban that blocks `ip` on `site` right now (a site ban before a global one), or undefined. */
  active(site: string, ip: string, now?: number): Ban | undefined;
  /**
   * Bans after a rate-limit offence: `baseSecs`, doubled per earlier ban of the IP on the site
   * within 24 h, capped at 24 h. Returns the ban.
   */
  banOffender(site: string, ip: string, baseSecs: number, now?: number): Ban;
  /** Adds or replaces the ban of `ip` on `site` (null = every site); the admin API's POST. */
  add(ip: string, site: string | null, durationSecs: number, reason: Ban['reason'], now?: number): Ban;
  /** Removes the IP's bans (on one site when `site` is given); returns how many went. */
  remove(ip: string, site?: string | null): number;
  /** Active bans, oldest first. */
  list(now?: number): Ban[];
}

/** Creates the empty list; runs once at start. */
export function createBanList(): BanList {
  // key `${site ?? ''}\0${ip}`
  const bans = new Map<string, Ban>();
  const strikes = new Map<string, { count: number; lastUntil: number }>();
  const key = (site: string | null, ip: string): string => `${site ?? ''}\0${ip}`;

  function current(k: string, now: number): Ban | undefined {
    const b = bans.get(k);
    if (b === undefined) return undefined;
    if (b.until > now) return b;
    bans.delete(k);
    return undefined;
  }

  function add(ip: string, site: string | null, durationSecs: number, reason: Ban['reason'], now = Date.now()): Ban {
    const ban: Ban = { ip, site, since: now, until: now + Math.max(0, durationSecs) * 1000, reason };
    bans.set(key(site, ip), ban);
    return ban;
  }

  return {
    active(site, ip, now = Date.now()) {
      if (bans.size === 0) return undefined;
      return current(key(site, ip), now) ?? current(key(null, ip), now);
    },
    banOffender(site, ip, baseSecs, now = Date.now()) {
      const k = key(site, ip);
      const prior = strikes.get(k);
      const count = prior !== undefined && now - prior.lastUntil < STRIKE_MEMORY_MS ? prior.count + 1 : 1;
      const secs = Math.min(MAX_BAN_SECS, baseSecs * 2 ** Math.min(count - 1, 20));
      const ban = add(ip, site, secs, 'rate_limit', now);
      strikes.set(k, { count, lastUntil: ban.until });
      // Strike records are only read on the next offence; drop stale ones so the map stays bounded.
      if (strikes.size > 10_000) for (const [sk, s] of strikes) if (now - s.lastUntil >= STRIKE_MEMORY_MS) strikes.delete(sk);
      return ban;
    },
    add,
    remove(ip, site) {
      let n = 0;
      for (const [k, b] of bans) {
        if (b.ip === ip && (site === undefined || b.site === site)) {
          bans.delete(k);
          if (b.until > Date.now()) n++;
        }
      }
      return n;
    },
    list(now = Date.now()) {
      const out: Ban[] = [];
      for (const [k, b] of bans) {
        if (b.until > now) out.push(b);
        else bans.delete(k);
      }
      return out.sort((a, b) => a.since - b.since);
    },
  };
}

/**
 * The rate_limit phase (spec/3 §2.5 `protection.rate_limit`) and the ban check that runs first in
 * the ban_acl phase. Fixed windows aligned to the epoch (`floor(now / window)`): one counter per
 * key, O(1) per request and no per-request timestamps, at the price of allowing up to twice the
 * limit across a window boundary. Counters live in the shared table (shared-table.ts), so every
 * worker counts into the same window and a reload keeps them.
 */
import type { BanList } from './ban-list.ts';
import type { RequestContext } from './request-context.ts';
import { SharedTable } from './shared-table.ts';
import { ALLOW, deny, type Verdict } from './verdict.ts';
import { wallNow } from './read-clock.ts';

/** Rule ids of this phase and of the ban check; also written in docs/proxy-admin-api.md. */
export const RATE_RULES = { perIp: 'rate.per_ip', perSite: 'rate.per_site', ban: 'ban' } as const;

// Key prefixes of the windows in the shared table: a site's, and a site's per-IP ones (+ IP).
const SITE_PREFIX = 'r\0site\0';
const ipPrefixOf = (siteId: string): string => `r\0ip\0${siteId}\0`;

export interface WindowHit {
  /** Requests in the current window, this one included. */
  count: number;
  /** Requests over the limit in the current window, this one included when it is over. */
  over: number;
  /** Seconds until the window ends (at least 1). */
  retryAfter: number;
}

export interface RateCounters {
  /**
   * Counts one request under the key `prefix` + `id` (two parts, so no key is joined per
   * request) in a fixed window of `windowSecs` against `limit`; between lock() and unlock().
   */
  count(prefix: string, id: string, limit: number, windowSecs: number, now: number): WindowHit;
  /** The counters' lock: one for every count() of a request. */
  lock(): void;
  unlock(): void;
  /** Drops the window counted under `prefix` + `id` (takes the lock itself), so the next count starts a new one. */
  forget(prefix: string, id: string, now: number): void;
}

/** Creates the counters in `table` (shared by every worker); runs once per thread at start. */
export function createRateCounters(table: SharedTable = SharedTable.create()): RateCounters {
  return {
    lock: () => table.lock(),
    unlock: () => table.unlock(),
    count(prefix, id, limit, windowSecs, now) {
      const ms = windowSecs * 1000;
      const start = now - (now % ms);
      const retryAfter = Math.max(1, Math.ceil((start + ms - now) / 1000));
      const at = table.find(prefix, now, true, id);
      // A full table: the request is not counted (limits fail open, never the request).
      if (at === -1) return { count: 1, over: 0, retryAfter };
      const v = table.values;
      // A new window, or a reload changed the window length. The entry expires with its window.
      if (v[at + 1] !== start || v[at + 2] !== ms) {
        v[at] = start + ms;
        v[at + 1] = start;
        v[at + 2] = ms;
        v[at + 3] = 0;
        v[at + 4] = 0;
      }
      const count = (v[at + 3] as number) + 1;
      const over = (v[at + 4] as number) + (count > limit ? 1 : 0);
      v[at + 3] = count;
      v[at + 4] = over;
      return { count, over, retryAfter };
    },
    forget(prefix, id, now) {
      table.lock();
      const at = table.find(prefix, now, false, id);
      if (at !== -1) table.remove(at);
      table.unlock();
    },
  };
}

export interface RateLimitConfig {
  enabled: boolean;
  per_ip: { requests: number; window_secs: number };
  per_site: { requests: number; window_secs: number };
  action: 'block' | 'challenge';
  ban_after_violations: number;
  ban_duration_secs: number;
}

/**
 * The site's rate_limit check, or undefined when disabled. Per IP first, then per site. Per IP,
 * action block: the first request over the limit in a window gets 429, later ones 403; every one
 * is a violation, and the `ban_after_violations`-th bans the IP on the site and drops its window.
 * Per site: always 429 (a site-wide surge is not one client's fault) and never a violation.
 * Action challenge: the challenge verdict when challenge.mode is on or auto, else 429. Every
 * refusal has Retry-After.
 */
export function createRateLimit(opts: {
  siteId: string;
  config: RateLimitConfig;
  challengeMode: 'off' | 'auto' | 'on';
  counters: RateCounters;
  bans: BanList;
  /** While the site is under auto-mitigation, both request limits are multiplied by its factor. */
  mitigation?: { readonly factor: number };
}): ((ctx: RequestContext) => Verdict) | undefined {
  const { siteId, config, counters, bans, mitigation } = opts;
  if (!config.enabled) return undefined;
  const challenge = config.action === 'challenge' && opts.challengeMode !== 'off';
  const ipPrefix = ipPrefixOf(siteId);
  const refuse = (status: number, rule: string, retryAfter: number): Verdict =>
    challenge ? { kind: 'challenge', rule } : deny(status, rule, { 'retry-after': String(retryAfter) });

  // A tightened limit never drops below one request per window.
  const scaled = (requests: number, factor: number): number => (factor === 1 ? requests : Math.max(1, Math.floor(requests * factor)));

  return function rateLimit(ctx) {
    const factor = mitigation?.factor ?? 1;
    const now = wallNow();
    // Both windows under one lock; the site's is not counted for a request its IP's refuses.
    counters.lock();
    const ip = counters.count(ipPrefix, ctx.clientIp, scaled(config.per_ip.requests, factor), config.per_ip.window_secs, now);
    const site = ip.over > 0 ? undefined : counters.count(SITE_PREFIX, siteId, scaled(config.per_site.requests, factor), config.per_site.window_secs, now);
    counters.unlock();
    if (site === undefined) {
      // Once banned, the IP's requests stop at the ban check: this runs only for the violation
      // that bans, and for requests of other workers already past that check at the moment.
      if (config.ban_after_violations > 0 && ip.over >= config.ban_after_violations && bans.banOffender(siteId, ctx.clientIp, config.ban_duration_secs) !== undefined) {
        // The ban starts the offender's count afresh (as fail2ban forgets an address's failures
        // when it bans it): a ban shorter than the window would otherwise end into a window that
        // still counts the flood, and the first request after it would ban again, doubled.
        counters.forget(ipPrefix, ctx.clientIp, now);
      }
      return refuse(config.action === 'block' && ip.over > 1 ? 403 : 429, RATE_RULES.perIp, ip.retryAfter);
    }
    if (site.over > 0) return refuse(429, RATE_RULES.perSite, site.retryAfter);
    return ALLOW;
  };
}

/** The ban check, first in the pipeline; runs for every site (bans come from the API at any time). */
export function createBanCheck(siteId: string, bans: BanList): (ctx: RequestContext) => Verdict {
  return function banCheck(ctx) {
    const ban = bans.active(siteId, ctx.clientIp);
    if (ban === undefined) return ALLOW;
    return deny(403, RATE_RULES.ban, { 'retry-after': String(Math.max(1, Math.ceil((ban.until - wallNow()) / 1000))) });
  };
}

/**
 * Send-rate caps (spec/3 §2.6 `max_site_bps`, `max_ip_bps`): token buckets, one per site and one
 * per client IP of a site, that shape the bytes sent to clients and never reject. A sender takes
 * tokens for what it just wrote; when a bucket goes into debt the sender pauses for as long as the
 * debt takes to refill, so the long-run rate is the cap. Buckets outlive config generations.
 */

export interface ShapedSite {
  readonly id: string;
  readonly maxSiteBps: number | null;
  readonly maxIpBps: number | null;
}

export interface RateShaper {
  /**
   * Runs after `bytes` were written to a client of `site`; returns how many milliseconds the
   * sender should wait before writing more (0: go on).
   */
  take(site: ShapedSite, ip: string, bytes: number, now?: number): number;
}

// A bucket holds at most this many seconds of its rate, so an idle client cannot save up a burst.
const BURST_SECS = 0.05;
// Per-IP buckets untouched this long are full again and dropped.
const IDLE_DROP_MS = 60_000;

interface Bucket {
  rate: number;
  tokens: number;
  last: number;
}

function takeFrom(b: Bucket, rate: number, bytes: number, now: number): number {
  const burst = Math.max(rate * BURST_SECS, 1);
  if (b.rate !== rate) {
    b.rate = rate;
    b.tokens = Math.min(b.tokens, burst);
  }
  b.tokens = Math.min(burst, b.tokens + ((now - b.last) * rate) / 1000);
  b.last = now;
  b.tokens -= bytes;
  return b.tokens >= 0 ? 0 : (-b.tokens * 1000) / rate;
}

/** Creates the buckets; runs once at start. */
export function createRateShaper(): RateShaper {
  const sites = new Map<string, Bucket>();
  const ips = new Map<string, Bucket>();
  let lastSweep = 0;

  function bucket(map: Map<string, Bucket>, key: string, rate: number, now: number): Bucket {
    let b = map.get(key);
    if (!b) map.set(key, (b = { rate, tokens: rate * BURST_SECS, last: now }));
    return b;
  }

  function sweep(now: number): void {
    lastSweep = now;
    for (const [key, b] of ips) if (now - b.last > IDLE_DROP_MS) ips.delete(key);
    for (const [key, b] of sites) if (now - b.last > IDLE_DROP_MS) sites.delete(key);
  }

  return {
    take(site, ip, bytes, now = performance.now()) {
      if (site.maxSiteBps === null && site.maxIpBps === null) return 0;
      if (now - lastSweep > IDLE_DROP_MS) sweep(now);
      let wait = 0;
      if (site.maxSiteBps !== null) wait = takeFrom(bucket(sites, site.id, site.maxSiteBps, now), site.maxSiteBps, bytes, now);
      if (site.maxIpBps !== null) wait = Math.max(wait, takeFrom(bucket(ips, `${site.id}\0${ip}`, site.maxIpBps, now), site.maxIpBps, bytes, now));
      return wait;
    },
  };
}

/**
 * Send-rate caps (spec/3 §2.6 `max_site_bps`, `max_ip_bps`): token buckets, one per site and one
 * per client IP of a site, that shape the bytes sent to clients and never reject. A sender takes
 * tokens for what it just wrote; when a bucket goes into debt the sender pauses for as long as the
 * debt takes to refill, so the long-run rate is the cap. Buckets live in the shared table (every
 * worker draws from the same bucket) and outlive config generations.
 */
import { SharedTable } from './shared-table.ts';

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
// Buckets untouched this long are full again and dropped.
const IDLE_DROP_MS = 60_000;

/** Takes `bytes` from the bucket at `at` (under the lock); returns the wait in ms. */
function takeFrom(table: SharedTable, at: number, rate: number, bytes: number, now: number): number {
  const v = table.values;
  const burst = Math.max(rate * BURST_SECS, 1);
  // Values: rate, tokens, last refill (ms).
  if (table.created) {
    v[at + 1] = rate;
    v[at + 2] = rate * BURST_SECS;
    v[at + 3] = now;
  } else if (v[at + 1] !== rate) {
    v[at + 1] = rate;
    v[at + 2] = Math.min(v[at + 2] as number, burst);
  }
  const tokens = Math.min(burst, (v[at + 2] as number) + ((now - (v[at + 3] as number)) * rate) / 1000) - bytes;
  v[at + 2] = tokens;
  v[at + 3] = now;
  // An untouched bucket is full again after a while: it is dropped then.
  v[at] = now + IDLE_DROP_MS;
  return tokens >= 0 ? 0 : (-tokens * 1000) / rate;
}

/** Creates the buckets in `table` (shared by every worker); runs once per thread at start. */
export function createRateShaper(table: SharedTable = SharedTable.create()): RateShaper {
  /** The wait for one bucket; a full table shapes nothing. */
  function take(key: string, rate: number, bytes: number, now: number): number {
    table.lock();
    const at = table.find(key, now, true);
    const wait = at === -1 ? 0 : takeFrom(table, at, rate, bytes, now);
    table.unlock();
    return wait;
  }

  return {
    // Wall-clock milliseconds with a fraction: the same clock in every worker thread.
    take(site, ip, bytes, now = performance.timeOrigin + performance.now()) {
      let wait = 0;
      if (site.maxSiteBps !== null) wait = take(`ss\0${site.id}`, site.maxSiteBps, bytes, now);
      if (site.maxIpBps !== null) wait = Math.max(wait, take(`si\0${site.id}\0${ip}`, site.maxIpBps, bytes, now));
      return wait;
    },
  };
}

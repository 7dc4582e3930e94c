/**
 * Keep-alive connection pools to the origins (undici Pool, one per distinct origin setting) and
 * the per-origin backoff after connection failures. Pools outlive config generations: a reload
 * that keeps a site's origin settings keeps its warm connections; a pool no generation uses any
 * more is closed after a grace period, so requests still running on it finish.
 */
import { Client, Pool } from 'undici';

export interface OriginSettings {
  url: string;
  connect_timeout_ms: number;
  read_timeout_ms: number;
  keepalive_secs: number;
  max_idle_per_host: number;
}

export interface Origin {
  /** The origin URL as configured (`http://10.0.0.5:8080`). */
  readonly url: string;
  readonly pool: Pool;
  readonly readTimeoutMs: number;
  /** keepalive_secs 0: every request closes its connection. */
  readonly noKeepAlive: boolean;
  /** Until when (ms since the epoch) requests fail fast with 502; 0 when the origin is not backing off. */
  backoffUntil(): number;
  /** A connection to the origin failed: back off for longer each time in a row. */
  recordFailure(now: number): void;
  /** A response arrived: the origin is reachable again. */
  recordSuccess(): void;
}

export interface OriginPools {
  /** The origin for these settings, sharing the pool of an identical earlier setting. */
  acquire(settings: OriginSettings): Origin;
  /** After a generation swap: pools not in `keep` close after the grace period. */
  retainOnly(keep: ReadonlySet<Origin>): void;
  /** Shutdown: closes every pool once its running requests finish. */
  close(): Promise<void>;
}

/** Backoff after consecutive connection failures: 250 ms, doubling, capped at 5 s. */
export const BACKOFF_BASE_MS = 250;
export const BACKOFF_MAX_MS = 5_000;
// Connections beyond max_idle_per_host close after this much idle time instead of keepalive_secs.
const SURPLUS_IDLE_MS = 1_000;
// The largest origin response header section accepted (undici's default follows node's 16 KiB).
const ORIGIN_MAX_HEADER_BYTES = 64 * 1024;

interface Backoff {
  failures: number;
  until: number;
}

function settingsKey(s: OriginSettings): string {
  return `${s.url}|${s.connect_timeout_ms}|${s.read_timeout_ms}|${s.keepalive_secs}|${s.max_idle_per_host}`;
}

/**
 * undici has no cap on idle connections, so the pool's factory gives its first
 * `max_idle_per_host` connections the configured keep-alive and later ones a short one: the
 * pool always hands a request to the first free connection, so the long-lived ones stay busy and
 * the surplus opened under a burst closes soon after it.
 */
function createPool(s: OriginSettings): Pool {
  const keepAliveMs = s.keepalive_secs * 1000;
  let created = 0;
  return new Pool(s.url, {
    connectTimeout: s.connect_timeout_ms,
    headersTimeout: s.read_timeout_ms,
    bodyTimeout: s.read_timeout_ms,
    maxHeaderSize: ORIGIN_MAX_HEADER_BYTES,
    factory(origin, opts) {
      const surplus = created++ >= s.max_idle_per_host;
      const idle = keepAliveMs === 0 ? 1 : surplus ? Math.min(SURPLUS_IDLE_MS, keepAliveMs) : keepAliveMs;
      return new Client(origin, { ...(opts as Client.Options), keepAliveTimeout: idle, keepAliveMaxTimeout: Math.max(idle, 1) });
    },
  });
}

/** Creates the registry; runs once at start. */
export function createOriginPools(opts: { graceMs?: number } = {}): OriginPools {
  const graceMs = opts.graceMs ?? 30_000;
  const byKey = new Map<string, Origin>();
  const backoffs = new Map<string, Backoff>();
  const retiring = new Map<Origin, NodeJS.Timeout>();

  function backoffOf(url: string): Backoff {
    let b = backoffs.get(url);
    if (!b) backoffs.set(url, (b = { failures: 0, until: 0 }));
    return b;
  }

  function acquire(s: OriginSettings): Origin {
    const key = settingsKey(s);
    const existing = byKey.get(key);
    if (existing) {
      const timer = retiring.get(existing);
      if (timer) {
        clearTimeout(timer);
        retiring.delete(existing);
      }
      return existing;
    }
    const backoff = backoffOf(s.url);
    const origin: Origin = {
      url: s.url,
      pool: createPool(s),
      readTimeoutMs: s.read_timeout_ms,
      noKeepAlive: s.keepalive_secs === 0,
      backoffUntil: () => backoff.until,
      recordFailure(now) {
        backoff.failures++;
        backoff.until = now + Math.min(BACKOFF_BASE_MS * 2 ** (backoff.failures - 1), BACKOFF_MAX_MS);
      },
      recordSuccess() {
        if (backoff.failures !== 0) {
          backoff.failures = 0;
          backoff.until = 0;
        }
      },
    };
    byKey.set(key, origin);
    return origin;
  }

  function retire(key: string, origin: Origin): void {
    if (retiring.has(origin)) return;
    const timer = setTimeout(() => {
      retiring.delete(origin);
      byKey.delete(key);
      void origin.pool.close().catch(() => undefined);
    }, graceMs);
    timer.unref();
    retiring.set(origin, timer);
  }

  return {
    acquire,
    retainOnly(keep) {
      for (const [key, origin] of byKey) if (!keep.has(origin)) retire(key, origin);
      const urls = new Set([...keep].map((o) => o.url));
      for (const url of backoffs.keys()) if (!urls.has(url)) backoffs.delete(url);
    },
    async close() {
      for (const timer of retiring.values()) clearTimeout(timer);
      retiring.clear();
      await Promise.all([...byKey.values()].map((o) => o.pool.close().catch(() => undefined)));
      byKey.clear();
    },
  };
}

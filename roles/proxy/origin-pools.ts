/**
 * Keep-alive connection pools to the origins (origin-client.ts, one per distinct origin setting) and
 * the per-origin backoff after connection failures. Pools outlive config generations: a reload
 * that keeps a site's origin settings keeps its warm connections; a pool no generation uses any
 * more is closed after a grace period, so requests still running on it finish.
 *
 * With `proxy_protocol` on, the header written first on a connection names one client, so a
 * connection must never carry another client's request: such an origin keeps one pool per
 * client IP and listener address, each writing its header on every connection it opens, and
 * drops a pool once it has been idle for keepalive_secs. With `transparent` on, connections are
 * sourced from the client's IPv4 address (`localAddress`), so such an origin keeps one pool per
 * client the same way; IPv6 clients share one pool on normal egress (spec/3 §2.4: IPv4 only).
 */
import { readFileSync } from 'node:fs';
import { isIPv4 } from 'node:net';
import type { Logger } from 'pino';
import { OriginPool, type OriginTarget } from './origin-client.ts';
import { proxyProtocolHeader, type ProxyEndpoints } from './proxy-protocol.ts';
import { SharedTable } from './shared-table.ts';
import { wallNow } from './read-clock.ts';

export interface OriginSettings {
  url: string;
  connect_timeout_ms: number;
  read_timeout_ms: number;
  keepalive_secs: number;
  max_idle_per_host: number;
  proxy_protocol: 'off' | 'v1' | 'v2';
  /** Source connections from the client IP (only when nonlocalBindAllowed()). */
  transparent: boolean;
}

/**
 * Whether this host lets a socket bind an address it does not own (`net.ipv4.ip_nonlocal_bind`,
 * set by root): what transparent mode needs, with policy routing that brings the origin's answers
 * back. Node cannot set IP_TRANSPARENT on a socket, so without it the documented fallback applies.
 */
export function nonlocalBindAllowed(): boolean {
  try {
    return readFileSync('/proc/sys/net/ipv4/ip_nonlocal_bind', 'utf8').trim() === '1';
  } catch {
    return false;
  }
}

export interface Origin {
  /** The origin URL as configured (`http://10.0.0.5:8080`). */
  readonly url: string;
  readonly proxyProtocol: 'off' | 'v1' | 'v2';
  /** Each client has its own pool (PROXY protocol or transparent): pool() needs its endpoints. */
  readonly perClient: boolean;
  /** The source address of this client's origin connections: its IPv4 address in transparent mode. */
  sourceFor(clientIp: string): string | undefined;
  /**
   * The pool a request goes through: the shared one, or the pool of this client (`endpoints` is
   * then required). Runs once per forwarded request.
   */
  pool(endpoints?: ProxyEndpoints): OriginPool;
  /** Until when (ms since the epoch) requests fail fast with 502; 0 when the origin is not backing off. */
  backoffUntil(): number;
  /** A connection to the origin failed (`code`: why): back off for longer each time in a row. */
  recordFailure(now: number, code: string): void;
  /**
   * A request to the reachable origin failed (a timeout, a broken answer): before its response
   * (the client got 502), or with `cut`, part-way through its body (the client's answer was cut).
   */
  recordError(code: string, cut?: boolean): void;
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
// How often per-client pools (PROXY protocol, transparent) are checked for idleness.
const CLIENT_POOL_SWEEP_MS = 5_000;
// An origin's failures are logged at most this often (per worker), with the count left unlogged.
const ORIGIN_WARN_EVERY_MS = 60_000;

function settingsKey(s: OriginSettings): string {
  return `${s.url}|${s.connect_timeout_ms}|${s.read_timeout_ms}|${s.keepalive_secs}|${s.max_idle_per_host}|${s.proxy_protocol}|${s.transparent}`;
}

/** Where a pool connects, from the origin settings; runs once per pool. */
function targetOf(s: OriginSettings, preface?: Buffer, localAddress?: string): OriginTarget {
  const url = new URL(s.url);
  const secure = url.protocol === 'https:';
  return {
    host: url.hostname.replace(/^\[|\]$/g, ''),
    port: Number(url.port) || (secure ? 443 : 80),
    secure,
    connectTimeoutMs: s.connect_timeout_ms,
    readTimeoutMs: s.read_timeout_ms,
    keepAliveMs: s.keepalive_secs * 1000,
    maxIdle: s.max_idle_per_host,
    ...(preface ? { preface } : {}),
    ...(localAddress ? { localAddress } : {}),
  };
}

/** Creates the registry; runs once at start. */
export function createOriginPools(opts: { graceMs?: number; table?: SharedTable; logger?: Logger } = {}): OriginPools {
  const logger = opts.logger;
  const graceMs = opts.graceMs ?? 30_000;
  // Backoffs live in the shared table: an origin one worker found down is down for all of them.
  const table = opts.table ?? SharedTable.create();
  const byKey = new Map<string, Origin>();
  // How to close each origin's pools, and drop its idle per-client pools.
  const internals = new Map<Origin, { closeAll(): Promise<void>; sweep(now: number): void }>();
  const retiring = new Map<Origin, NodeJS.Timeout>();

  /** The origin's backoff entry (values failures, until), -1 when it has none; under the lock. */
  const backoffOf = (key: string): number => table.find(key, 0, false);

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
    const backoffKey = `o\0${s.url}`;
    // The origin had a failure count at the last look (any worker's).
    let failing = false;
    // An origin that is down fails every request: the log gets the first failure of a minute.
    let lastWarned = -Infinity;
    let unlogged = 0;
    const warn = (code: string, msg: string): void => {
      const now = wallNow();
      if (now - lastWarned < ORIGIN_WARN_EVERY_MS) {
        unlogged++;
        return;
      }
      logger?.warn({ origin: s.url, error: code, failures_unlogged: unlogged }, msg);
      lastWarned = now;
      unlogged = 0;
    };
    const shared = s.proxy_protocol === 'off' && !s.transparent ? new OriginPool(targetOf(s)) : undefined;
    const perClient = new Map<string, { pool: OriginPool; lastUsed: number }>();
    const sourceFor = (clientIp: string): string | undefined => (s.transparent && isIPv4(clientIp) ? clientIp : undefined);
    const origin: Origin = {
      url: s.url,
      proxyProtocol: s.proxy_protocol,
      perClient: shared === undefined,
      sourceFor,
      pool(endpoints) {
        if (shared) return shared;
        const e = endpoints as ProxyEndpoints;
        const source = sourceFor(e.sourceIp);
        // Without a PROXY header to write, clients on normal egress (IPv6 ones) share one pool.
        const key = s.proxy_protocol === 'off' && source === undefined ? '' : `${e.sourceIp}|${e.destIp}|${e.destPort}`;
        let entry = perClient.get(key);
        if (!entry) {
          // The source port is the one of the client connection that opened this pool.
          const header = s.proxy_protocol === 'off' ? undefined : proxyProtocolHeader(s.proxy_protocol, e);
          entry = { pool: new OriginPool(targetOf(s, header, source)), lastUsed: 0 };
          perClient.set(key, entry);
        }
        entry.lastUsed = wallNow();
        return entry.pool;
      },
      backoffUntil() {
        // No origin has had a backoff entry for a while (nearly always): nothing to look up.
        if (wallNow() >= table.backoffHorizon) {
          failing = false;
          return 0;
        }
        table.lock();
        const at = backoffOf(backoffKey);
        const until = at === -1 ? 0 : (table.values[at + 2] as number);
        table.unlock();
        failing = at !== -1;
        return until;
      },
      recordFailure(now, code) {
        warn(code, 'origin unreachable: its requests get 502, and none is tried while it backs off');
        failing = true;
        table.lock();
        // An entry past its expiry (its count forgotten) starts over.
        const at = table.find(backoffKey, now, true);
        if (at !== -1) {
          const failures = (table.values[at + 1] as number) + 1;
          table.values[at + 1] = failures;
          table.values[at + 2] = now + Math.min(BACKOFF_BASE_MS * 2 ** (failures - 1), BACKOFF_MAX_MS);
          // The failure count is forgotten a minute after the backoff ends without a new failure.
          table.values[at] = (table.values[at + 2] as number) + 60_000;
          if ((table.values[at] as number) > table.backoffHorizon) table.backoffHorizon = table.values[at] as number;
        }
        table.unlock();
      },
      recordSuccess() {
        // Nothing to clear unless the last look found a failure count (or this worker made one):
        // the common case costs no lock.
        if (!failing) return;
        failing = false;
        table.lock();
        const at = backoffOf(backoffKey);
        if (at !== -1) table.remove(at);
        table.unlock();
        if (at !== -1) logger?.info({ origin: s.url }, 'origin reachable again');
      },
      recordError(code, cut) {
        warn(code, cut ? 'origin request failed: the client got a cut response' : 'origin request failed: the client got 502');
      },
    };
    const idleMs = Math.max(s.keepalive_secs * 1000, 1_000);
    internals.set(origin, {
      async closeAll() {
        const pools = shared ? [shared] : [...perClient.values()].map((p) => p.pool);
        perClient.clear();
        await Promise.all(pools.map((p) => p.close()));
      },
      sweep(now) {
        for (const [k, p] of perClient) {
          if (now - p.lastUsed > idleMs && !p.pool.busy()) {
            perClient.delete(k);
            void p.pool.close();
          }
        }
      },
    });
    byKey.set(key, origin);
    return origin;
  }

  const sweeper = setInterval(() => {
    const now = Date.now();
    for (const i of internals.values()) i.sweep(now);
  }, CLIENT_POOL_SWEEP_MS);
  sweeper.unref();

  function closeOrigin(origin: Origin): Promise<void> {
    const i = internals.get(origin);
    internals.delete(origin);
    return i ? i.closeAll() : Promise.resolve();
  }

  function retire(key: string, origin: Origin): void {
    if (retiring.has(origin)) return;
    const timer = setTimeout(() => {
      retiring.delete(origin);
      byKey.delete(key);
      void closeOrigin(origin);
    }, graceMs);
    timer.unref();
    retiring.set(origin, timer);
  }

  return {
    acquire,
    retainOnly(keep) {
      for (const [key, origin] of byKey) if (!keep.has(origin)) retire(key, origin);
    },
    async close() {
      for (const timer of retiring.values()) clearTimeout(timer);
      retiring.clear();
      clearInterval(sweeper);
      await Promise.all([...byKey.values()].map((o) => closeOrigin(o)));
      byKey.clear();
    },
  };
}

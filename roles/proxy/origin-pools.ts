/**
 * Keep-alive connection pools to the origins (undici Pool, one per distinct origin setting) and
 * the per-origin backoff after connection failures. Pools outlive config generations: a reload
 * that keeps a site's origin settings keeps its warm connections; a pool no generation uses any
 * more is closed after a grace period, so requests still running on it finish.
 *
 * With `proxy_protocol` on, the header written first on a connection names one client, so a
 * connection must never carry another client's request: such an origin keeps one pool per
 * client IP and listener address, each writing its header on every connection it opens, and
 * drops a pool once it has been idle for keepalive_secs.
 */
import { connect as netConnect, isIP, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { Client, Pool, type buildConnector } from 'undici';
import { proxyProtocolHeader, type ProxyEndpoints } from './proxy-protocol.ts';
import { SharedTable } from './shared-table.ts';

export interface OriginSettings {
  url: string;
  connect_timeout_ms: number;
  read_timeout_ms: number;
  keepalive_secs: number;
  max_idle_per_host: number;
  proxy_protocol: 'off' | 'v1' | 'v2';
}

export interface Origin {
  /** The origin URL as configured (`http://10.0.0.5:8080`). */
  readonly url: string;
  readonly proxyProtocol: 'off' | 'v1' | 'v2';
  /**
   * The pool a request goes through: the shared one, or with PROXY protocol the pool of this
   * client (`endpoints` is then required). Runs once per forwarded request.
   */
  dispatcher(endpoints?: ProxyEndpoints): Pool;
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
// How often per-client pools (PROXY protocol) are checked for idleness.
const CLIENT_POOL_SWEEP_MS = 5_000;

function settingsKey(s: OriginSettings): string {
  return `${s.url}|${s.connect_timeout_ms}|${s.read_timeout_ms}|${s.keepalive_secs}|${s.max_idle_per_host}|${s.proxy_protocol}`;
}

/**
 * Opens an origin connection that starts with `header` (before TLS, as the PROXY protocol
 * requires), for undici's `connect` option; runs whenever a per-client pool needs a connection.
 */
function proxyProtocolConnector(url: URL, connectTimeoutMs: number, header: Buffer): buildConnector.connector {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const secure = url.protocol === 'https:';
  const port = Number(url.port) || (secure ? 443 : 80);
  return function connectWithHeader(_opts, callback) {
    let settled = false;
    const raw = netConnect({ host, port });
    let sock: Socket = raw;
    const fail = (err: Error): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.destroy();
      raw.destroy();
      callback(err, null);
    };
    const ok = (): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.off('error', fail);
      callback(null, sock);
    };
    const timer = setTimeout(() => fail(Object.assign(new Error('connect timeout'), { code: 'UND_ERR_CONNECT_TIMEOUT' })), connectTimeoutMs);
    raw.once('error', fail);
    raw.setNoDelay(true);
    raw.write(header);
    if (secure) {
      sock = tlsConnect({ socket: raw, host, ...(isIP(host) === 0 ? { servername: host } : {}), ALPNProtocols: ['http/1.1'] });
      sock.once('error', fail);
      sock.once('secureConnect', ok);
    } else {
      raw.once('connect', ok);
    }
  };
}

/**
 * undici has no cap on idle connections, so the pool's factory gives its first
 * `max_idle_per_host` connections the configured keep-alive and later ones a short one: the
 * pool always hands a request to the first free connection, so the long-lived ones stay busy and
 * the surplus opened under a burst closes soon after it.
 */
function createPool(s: OriginSettings, connect?: buildConnector.connector): Pool {
  const keepAliveMs = s.keepalive_secs * 1000;
  let created = 0;
  return new Pool(s.url, {
    ...(connect ? { connect } : {}),
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
export function createOriginPools(opts: { graceMs?: number; table?: SharedTable } = {}): OriginPools {
  const graceMs = opts.graceMs ?? 30_000;
  // Backoffs live in the shared table: an origin one worker found down is down for all of them.
  const table = opts.table ?? SharedTable.create();
  const byKey = new Map<string, Origin>();
  // How to close each origin's pools, and drop its idle per-client pools.
  const internals = new Map<Origin, { closeAll(): Promise<void>; sweep(now: number): void }>();
  const retiring = new Map<Origin, NodeJS.Timeout>();

  /** The origin's backoff entry (values failures, until), -1 when it has none; under the lock. */
  const backoffOf = (key: string, create: boolean): number => table.find(key, 0, create);

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
    const shared = s.proxy_protocol === 'off' ? createPool(s) : undefined;
    const perClient = new Map<string, { pool: Pool; lastUsed: number }>();
    const origin: Origin = {
      url: s.url,
      proxyProtocol: s.proxy_protocol,
      dispatcher(endpoints) {
        if (shared) return shared;
        const e = endpoints as ProxyEndpoints;
        const key = `${e.sourceIp}|${e.destIp}|${e.destPort}`;
        let entry = perClient.get(key);
        if (!entry) {
          // The source port is the one of the client connection that opened this pool.
          const header = proxyProtocolHeader(s.proxy_protocol as 'v1' | 'v2', e);
          entry = { pool: createPool(s, proxyProtocolConnector(new URL(s.url), s.connect_timeout_ms, header)), lastUsed: 0 };
          perClient.set(key, entry);
        }
        entry.lastUsed = Date.now();
        return entry.pool;
      },
      readTimeoutMs: s.read_timeout_ms,
      noKeepAlive: s.keepalive_secs === 0,
      backoffUntil() {
        table.lock();
        const at = backoffOf(backoffKey, false);
        const until = at === -1 ? 0 : (table.values[at + 2] as number);
        table.unlock();
        return until;
      },
      recordFailure(now) {
        table.lock();
        const at = backoffOf(backoffKey, true);
        if (at !== -1) {
          const failures = (table.values[at + 1] as number) + 1;
          table.values[at + 1] = failures;
          table.values[at + 2] = now + Math.min(BACKOFF_BASE_MS * 2 ** (failures - 1), BACKOFF_MAX_MS);
          // The failure count is forgotten a minute after the backoff ends without a new failure.
          table.values[at] = (table.values[at + 2] as number) + 60_000;
        }
        table.unlock();
      },
      recordSuccess() {
        table.lock();
        const at = backoffOf(backoffKey, false);
        if (at !== -1) table.remove(at);
        table.unlock();
      },
    };
    const idleMs = Math.max(s.keepalive_secs * 1000, 1_000);
    internals.set(origin, {
      async closeAll() {
        const pools = shared ? [shared] : [...perClient.values()].map((p) => p.pool);
        perClient.clear();
        await Promise.all(pools.map((p) => p.close().catch(() => undefined)));
      },
      sweep(now) {
        for (const [k, p] of perClient) {
          const st = p.pool.stats;
          if (now - p.lastUsed > idleMs && st.running === 0 && st.pending === 0) {
            perClient.delete(k);
            void p.pool.close().catch(() => undefined);
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

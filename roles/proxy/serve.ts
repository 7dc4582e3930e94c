/**
 * `osproxy --root DIR` (= `osproxy serve`, `hostkit proxy serve`): loads the files (refusing to
 * start on a bad config.yaml), starts the data-plane workers (proxy-workers.ts) that bind the
 * listeners, serves the admin API and telemetry on the main thread, hot-reloads on file changes
 * (each new generation goes to every worker), rebuilds the certificates hourly, and on SIGTERM
 * stops accepting, lets in-flight requests finish (bounded), writes the counters and bans, then
 * exits. One proxy per data directory: the start takes its lock before reading anything there.
 */
import { isAbsolute, join, resolve } from 'node:path';
import { createLogger, type AppLogger } from '../../src/core/logger.ts';
import { createShutdown, exitOnSignals, type Shutdown } from '../../src/core/shutdown.ts';
import { parseListen } from '../../src/core/config-checks.ts';
import { loadConfigFile } from '../../src/core/config-loader.ts';
import { acquireLock, lockPathFor, logTakeover, type InstanceLock } from '../../src/lib/instance-lock.ts';
import { makeDirs } from '../../src/lib/make-dirs.ts';
import { globalFileOf, proxyGlobalSpec } from './config.ts';
import { createAdminApi } from './admin-api.ts';
import { createAdminAuth } from './admin-auth.ts';
import { openBanStore, type BanStore } from './ban-store.ts';
import { openChallengeSecret, type ChallengeSecret, type SecretLoad } from './challenge-secret.ts';
import { createChallengeTokens } from './challenge-tokens.ts';
import { createConnectionSlots } from './connection-slots.ts';
import { createConfigWriter } from './config-writer.ts';
import { watchConfigFiles } from './file-watch.ts';
import type { Generation } from './generation.ts';
import { levelFromRustLog } from './log-level.ts';
import { createOriginPools, type OriginPools } from './origin-pools.ts';
import type { PipelineServices } from './pipeline.ts';
import { createProxyRuntime } from './proxy-runtime.ts';
import { openQuotaStore, type QuotaExceeded, type QuotaStore } from './quota-store.ts';
import { createRateCounters } from './rate-limit.ts';
import { createRateShaper } from './rate-shaper.ts';
import { createEventBus, type EventBus } from './event-bus.ts';
import { createMitigation, type MitigationEvent } from './mitigation.ts';
import { startWorkers, workerCount } from './proxy-workers.ts';
import type { ProxyEvent, RequestEvent } from './recent-events.ts';
import { SharedTable } from './shared-table.ts';
import { encodeSites, unpackEvents, type ConfigSnapshot, type FromWorker } from './worker-protocol.ts';
import { createRecentEvents } from './recent-events.ts';
import { createTelemetry } from './telemetry.ts';

/** How long in-flight requests get to finish after SIGTERM. */
const SHUTDOWN_GRACE_MS = 10_000;
/** Spec/3 §2.3: the SNI certificate map is rebuilt hourly. */
const CERT_REBUILD_MS = 3_600_000;
// Node's own default for the request line plus headers; the parser never gets less.
const MIN_PARSER_HEADER_BYTES = 16 * 1024;
// Shared-table slots the main thread sweeps for expired entries each second.
const TABLE_SWEEP_SLICE = 16_384;

/** The parser's limit: the largest site's URI plus header caps, so each site's own check decides. */
function parserHeaderLimit(gen: Generation): number {
  let max = MIN_PARSER_HEADER_BYTES;
  for (const s of gen.sites) {
    const l = s.config.protection.request_limits;
    max = Math.max(max, l.max_uri_bytes + l.max_header_bytes + 1024);
  }
  return max;
}

/**
 * The access log: at log_level debug (or trace) one line per request event, a WebSocket at its
 * 101. It follows the telemetry bus, so under congestion it drops what the bus drops (counted in
 * the metrics). The line's own time is the response's end; `duration_ms` says when it began.
 */
function accessLog(logger: AppLogger): (e: ProxyEvent) => void {
  return (e) => {
    if (e.kind !== 'request' || !logger.isLevelEnabled('debug')) return;
    const { site, client_ip, method, host, path, status, bytes_in, bytes_out, duration_ms, rule } = e;
    logger.debug({ site, client_ip, method, host, path, status, bytes_in, bytes_out, duration_ms, rule }, '%s %s%s %d', method, host, path, status);
  };
}

/** log_level before anything is logged, so the loading itself logs at the configured level. */
function initialLogLevel(root: string): string {
  try {
    return loadConfigFile(globalFileOf(root), proxyGlobalSpec).config.log_level;
  } catch {
    // The start fails with every problem listed, at the default level.
    return 'info';
  }
}

function applyLogLevel(logger: AppLogger, gen: Generation): void {
  const level = levelFromRustLog(process.env['RUST_LOG']) ?? gen.global.log_level;
  if (logger.level !== level) logger.level = level;
}

/** Logs a challenge secret made anew (at start or on a reload): every clearance issued before is void. */
function logSecretLoad(logger: AppLogger, secret: ChallengeSecret, how: SecretLoad): void {
  if (how !== 'read') logger.warn({ how, file: secret.file }, 'new challenge secret: earlier clearances are invalid');
}

/** Runs the proxy until a signal stops it; resolves once every listener is up. */
export async function serveProxy(rootArg: string): Promise<void> {
  const root = resolve(rootArg);
  const logger = createLogger({ name: 'osproxy', level: 'info' });
  logger.level = levelFromRustLog(process.env['RUST_LOG']) ?? initialLogLevel(root);
  const rustLog = process.env['RUST_LOG'];
  if (rustLog !== undefined && rustLog.trim() !== '' && levelFromRustLog(rustLog) === undefined) logger.warn({ RUST_LOG: rustLog }, 'RUST_LOG names no level: log_level applies');

  const shutdown = createShutdown({ logger, timeoutMs: SHUTDOWN_GRACE_MS + 5_000 });
  const pools = createOriginPools({ logger });
  shutdown.add('origin pools', () => pools.close());
  try {
    await start(root, logger, pools, shutdown);
  } catch (err) {
    // Whatever was already bound must not keep the process alive.
    await shutdown.run('start failed', err);
    throw err;
  }
  exitOnSignals(shutdown);
}

/**
 * Takes the data directory's lock (`<data_dir>/osproxy.lock`, the directory created 0700 first);
 * runs at start before anything in it is read. Two proxies on one directory (a new executable
 * tried on other listen addresses, say) would each write their own quota totals and bans over the
 * other's: the second is refused, naming the lock and its holder's pid.
 */
function lockDataDir(dataDir: string, logger: AppLogger): InstanceLock {
  makeDirs(dataDir, 0o700);
  const lock = acquireLock(lockPathFor(join(dataDir, 'osproxy')), 'osproxy');
  logTakeover(lock, logger);
  return lock;
}

/** Quota and mitigation notices, from the main thread's services and from every worker. */
interface Notices {
  quotaExceeded(e: QuotaExceeded): void;
  mitigation(e: MitigationEvent): void;
}

/** The main thread's services and the stores among them that write data_dir files. */
interface Services {
  services: PipelineServices;
  quota: QuotaStore;
  bans: BanStore;
}

/**
 * The state that outlives config generations, in the shared table every worker also attaches:
 * quota counters (and quota.json), bans and their strikes (and bans.json) and the challenge secret
 * in `<root>/<data_dir>` (created 0700), rate windows, connection slots, mitigations. Runs once,
 * before the first generation is compiled.
 */
function createServices(dataDir: string, table: SharedTable, secret: ChallengeSecret, notices: Notices, logger: AppLogger): Services {
  const quota = openQuotaStore({
    dataDir,
    table,
    onExceeded: notices.quotaExceeded,
    onWriteError: (err) => logger.error({ err }, 'cannot write the quota counters (retried every second)'),
    onCorrupt: ({ file, site, value }) => logger.warn({ file, site, value }, 'quota counter of a site is damaged (not a window and a byte count of 0 or more): it counts from zero'),
  });
  const bans = openBanStore({
    dataDir,
    table,
    onDamaged: ({ file, problem }) => logger.error({ file, problem }, 'cannot read the saved bans: the proxy starts without what could not be read (the file is replaced at the next ban change)'),
    onWriteError: (err) => logger.error({ err }, 'cannot write the bans (retried every second)'),
  });
  const services: PipelineServices = {
    quota,
    shaper: createRateShaper(table),
    slots: createConnectionSlots(table),
    bans,
    rates: createRateCounters(table),
    transparentSaid: new Set(),
    challenge: createChallengeTokens({ secret: secret.get, table }),
    mitigation: createMitigation(notices.mitigation, { table }),
  };
  return { services, quota, bans };
}

/** Deletes expired shared-table entries a slice at a time and warns when the table is full. */
function maintainTable(table: SharedTable, logger: AppLogger): () => void {
  let next = 0;
  let refused = 0;
  let warnedAt = 0;
  const timer = setInterval(() => {
    table.lock();
    next = table.sweep(Date.now(), next, TABLE_SWEEP_SLICE);
    table.unlock();
    const now = Date.now();
    if (table.refused() > refused && now - warnedAt >= 60_000) {
      warnedAt = now;
      logger.warn({ refused: table.refused() - refused, entries: table.size() }, 'the shared counter table is full: new clients are not counted by rate and connection limits until entries expire');
      refused = table.refused();
    }
  }, 1_000);
  timer.unref();
  return () => clearInterval(timer);
}

/** Everything after the logger: config, workers, admin API, watchers; each registers its shutdown step. */
async function start(root: string, logger: AppLogger, pools: OriginPools, shutdown: Shutdown): Promise<void> {
  let bus: EventBus | undefined;
  let created: Services | undefined;
  let secret: ChallengeSecret | undefined;
  const table = SharedTable.create();
  const notices: Notices = {
    quotaExceeded(e) {
      logger.warn({ site: e.site, window_start: e.window_start, bytes: e.bytes, limit: e.limit }, 'quota_exceeded: the site reached its monthly quota');
      bus?.publish({ kind: 'quota_exceeded', time: new Date().toISOString(), ...e });
    },
    mitigation(e) {
      if (e.state === 'enter') logger.warn({ site: e.site, rps: e.rps, threshold_rps: e.threshold_rps, factor: e.factor, until: e.until }, 'mitigation: site over its RPS threshold, rate limits tightened');
      else logger.info({ site: e.site, since: e.since, peak_rps: e.rps }, 'mitigation ended: rate limits restored');
      bus?.publish(e);
    },
  };
  const runtime = createProxyRuntime({
    root,
    logger,
    pools,
    services(startGlobal) {
      bus = createEventBus(startGlobal.events.channel_capacity, (err) => logger.error({ err }, 'telemetry subscriber failed'));
      const dataDir = isAbsolute(startGlobal.data_dir) ? startGlobal.data_dir : join(root, startGlobal.data_dir);
      const lock = lockDataDir(dataDir, logger);
      // Registered first, so released last: after the counters and bans are written.
      shutdown.add('data_dir lock', () => lock.release());
      secret = openChallengeSecret(dataDir);
      // The first start makes the file; only a damaged one (replaced) voids clearances.
      if (secret.opened === 'replaced') logSecretLoad(logger, secret, secret.opened);
      created = createServices(dataDir, table, secret, notices, logger);
      return created.services;
    },
  });
  if (!bus || !created || !secret) throw new Error('proxy services were not created');
  const { services, quota, bans } = created;
  shutdown.add('quota counters', () => quota.close());
  shutdown.add('bans', () => bans.close());
  const mitigation = services.mitigation;
  shutdown.add('mitigation timer', () => mitigation.close());
  shutdown.add('table sweep', maintainTable(table, logger));
  const challengeSecret = secret;
  const first = runtime.current();
  applyLogLevel(logger, first);
  const siteIds = (gen: Generation): Set<string> => new Set(gen.sites.map((s) => s.id));
  const ring = createRecentEvents(first.global.events.recent_buffer);
  ring.configure(first.global.events.recent_buffer, siteIds(first));
  const telemetry = createTelemetry(first.global.events.aggregate_retention_hours);
  quota.track(siteIds(first));
  // A const the closures below can hold (the `let` above is only narrowed here).
  const events = bus;
  events.subscribe(ring.record);
  events.subscribe(telemetry.record);
  events.subscribe(accessLog(logger));

  // Events of WebSocket 101s, by worker and ref, until their tunnel's totals arrive.
  const tunnels = new Map<string, RequestEvent>();
  const fromWorker = (index: number, m: FromWorker): void => {
    switch (m.type) {
      case 'events':
        unpackEvents(m.events, (e, ref) => {
          if (ref !== 0) tunnels.set(`${index}:${ref}`, e);
          events.publish(e);
        });
        return;
      case 'tunnel': {
        telemetry.tunnelBytes(m.site, m.up, m.down);
        const key = `${index}:${m.ref}`;
        const e = tunnels.get(key);
        if (e) {
          tunnels.delete(key);
          e.bytes_in += m.up;
          e.bytes_out += m.down;
          e.duration_ms = m.duration_ms;
        }
        return;
      }
      case 'quota_exceeded':
        notices.quotaExceeded(m.event);
        return;
      case 'mitigation':
        notices.mitigation(m.event);
        return;
      default:
        return;
    }
  };
  const snapshotOf = (gen: Generation): ConfigSnapshot => ({
    number: gen.number,
    global: gen.global,
    sites: encodeSites(gen.sites.map((s) => ({ file: s.file, config: s.config }))),
    secret: challengeSecret.get(),
    maxHeaderSize: parserHeaderLimit(gen),
  });

  const boot = runtime.state.startGlobal;
  let failed = false;
  const workers = await startWorkers({
    count: workerCount(boot.workers),
    root,
    table,
    http: boot.listen_http,
    https: boot.listen_https,
    snapshot: snapshotOf(first),
    logger,
    onMessage: fromWorker,
    onFatal(err) {
      if (failed) return;
      failed = true;
      logger.fatal({ err: err.message }, 'a data-plane worker died: the proxy stops (its service manager restarts it)');
      void shutdown.run('worker died').finally(() => process.exit(1));
    },
  });
  shutdown.add('workers', () => workers.close(SHUTDOWN_GRACE_MS));
  for (const a of workers.addresses) logger.info({ address: a }, 'listening');

  const slots = services.slots;
  runtime.onSwap((gen) => {
    applyLogLevel(logger, gen);
    // A deleted (or replaced) secret applies without a restart: every clearance ends.
    try {
      logSecretLoad(logger, challengeSecret, challengeSecret.load());
    } catch (err) {
      logger.error({ err }, 'cannot read the challenge secret: the current one stays');
    }
    ring.configure(gen.global.events.recent_buffer, siteIds(gen));
    telemetry.configure(gen.global.events.aggregate_retention_hours, siteIds(gen));
    events.setCapacity(gen.global.events.channel_capacity);
    quota.track(siteIds(gen));
    workers.broadcast(snapshotOf(gen));
  });

  const admin = createAdminApi({
    runtime,
    writer: createConfigWriter(runtime),
    events: ring,
    quota,
    slots,
    bans: services.bans,
    telemetry,
    gauges: () => {
      const gen = runtime.current();
      return {
        generation: gen.number,
        inFlight: workers.inFlight(),
        eventsDropped: events.dropped(),
        eventsQueued: events.queued(),
        sites: gen.sites.map((s) => {
          const u = quota.usage(s.id, s.config.bandwidth);
          return { id: s.id, connections: slots.site(s.id), quotaBytes: u.bytes, quotaLimit: u.limit };
        }),
      };
    },
    auth: createAdminAuth(() => runtime.current().global),
    async sync() {
      await workers.sync();
      // The bus delivers on the next turn (setImmediate): let it hand the last events over.
      await new Promise((resolve) => setImmediate(resolve));
    },
    logger,
  });
  const adminAddress = parseListen(boot.admin.listen);
  if (!adminAddress) throw new Error(`bad admin.listen ${boot.admin.listen}`);
  try {
    await admin.app.listen({ host: adminAddress.host, port: adminAddress.port });
  } catch (err) {
    // Worded like the data-plane listeners' failure (listeners.ts), naming the setting.
    throw new Error(`cannot listen on admin.listen ${boot.admin.listen}: ${(err as Error).message}`);
  }
  shutdown.add('admin API', () => admin.app.close());
  logger.info({ address: `http://${boot.admin.listen}/api/v1` }, 'admin API listening');

  const reload = (reason: string, force = false): void => {
    try {
      runtime.reload({ force, reason });
    } catch (err) {
      logger.error({ err, reason }, 'reload failed');
    }
  };
  const watcher = watchConfigFiles({ dirs: [root, runtime.state.sitesDir], onChange: reload, logger });
  // `kill -HUP` reloads, as nginx does (the watcher already does on every change; this also
  // re-reads certificates).
  const onHangup = (): void => reload('SIGHUP', true);
  process.on('SIGHUP', onHangup);
  shutdown.add('SIGHUP', () => process.removeListener('SIGHUP', onHangup));
  shutdown.add('file watch', () => watcher.close());
  const certTimer = setInterval(() => reload('hourly certificate rebuild', true), CERT_REBUILD_MS);
  certTimer.unref();
  shutdown.add('certificate timer', () => clearInterval(certTimer));
  logger.info({ root, generation: first.number, sites: first.sites.length, workers: workers.count, listeners: workers.addresses }, 'osproxy started');
}

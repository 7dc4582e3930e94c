/**
 * `osproxy --root DIR` (= `osproxy serve`, `hostkit proxy serve`): loads the files (refusing to
 * start on a bad config.yaml), binds the data-plane listeners and the admin API, hot-reloads on
 * file changes, rebuilds the certificates hourly, and on SIGTERM stops accepting, lets in-flight
 * requests finish (bounded), then exits.
 */
import { isAbsolute, join, resolve } from 'node:path';
import { createLogger, type AppLogger } from '../../src/core/logger.ts';
import { createShutdown, exitOnSignals, type Shutdown } from '../../src/core/shutdown.ts';
import { parseListen } from '../../src/core/config-checks.ts';
import { loadConfigFile } from '../../src/core/config-loader.ts';
import { globalFileOf, proxyGlobalSpec } from './config.ts';
import { createAdminApi } from './admin-api.ts';
import { createAdminAuth } from './admin-auth.ts';
import { createBanList } from './ban-list.ts';
import { openChallengeSecret, type ChallengeSecret } from './challenge-secret.ts';
import { createChallengeTokens } from './challenge-tokens.ts';
import { createConnectionSlots } from './connection-slots.ts';
import { createConfigWriter } from './config-writer.ts';
import { createDataPlane } from './data-plane.ts';
import { watchConfigFiles } from './file-watch.ts';
import type { Generation } from './generation.ts';
import { startListeners } from './listeners.ts';
import { levelFromRustLog } from './log-level.ts';
import { createOriginPools, type OriginPools } from './origin-pools.ts';
import type { PipelineServices } from './pipeline.ts';
import { createProxyRuntime } from './proxy-runtime.ts';
import { openQuotaStore } from './quota-store.ts';
import { createRateCounters } from './rate-limit.ts';
import { createRateShaper } from './rate-shaper.ts';
import { createEventBus, type EventBus } from './event-bus.ts';
import { createMitigation } from './mitigation.ts';
import { createRecentEvents } from './recent-events.ts';
import { createTelemetry } from './telemetry.ts';

/** How long in-flight requests get to finish after SIGTERM. */
const SHUTDOWN_GRACE_MS = 10_000;
/** Spec/3 §2.3: the SNI certificate map is rebuilt hourly. */
const CERT_REBUILD_MS = 3_600_000;
// Node's own default for the request line plus headers; the parser never gets less.
const MIN_PARSER_HEADER_BYTES = 16 * 1024;

/** The parser's limit: the largest site's URI plus header caps, so each site's own check decides. */
function parserHeaderLimit(gen: Generation): number {
  let max = MIN_PARSER_HEADER_BYTES;
  for (const s of gen.sites) {
    const l = s.config.protection.request_limits;
    max = Math.max(max, l.max_uri_bytes + l.max_header_bytes + 1024);
  }
  return max;
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

/** Runs the proxy until a signal stops it; resolves once every listener is up. */
export async function serveProxy(rootArg: string): Promise<void> {
  const root = resolve(rootArg);
  const logger = createLogger({ name: 'osproxy', level: 'info' });
  logger.level = levelFromRustLog(process.env['RUST_LOG']) ?? initialLogLevel(root);
  const rustLog = process.env['RUST_LOG'];
  if (rustLog !== undefined && rustLog.trim() !== '' && levelFromRustLog(rustLog) === undefined) logger.warn({ RUST_LOG: rustLog }, 'RUST_LOG names no level: log_level applies');

  const shutdown = createShutdown({ logger, timeoutMs: SHUTDOWN_GRACE_MS + 5_000 });
  shutdown.add('logger', () => logger.close());
  const pools = createOriginPools();
  shutdown.add('origin pools', () => pools.close());
  try {
    await start(root, logger, pools, shutdown);
  } catch (err) {
    // Whatever was already bound must not keep the process alive.
    await shutdown.run('start failed');
    throw err;
  }
  exitOnSignals(shutdown);
}

/**
 * The state that outlives config generations: quota counters and the challenge secret in
 * `<root>/<data_dir>` (created 0700), rate buckets, connection slots, bans, mitigations. Runs
 * once, before the first generation is compiled.
 */
function createServices(dataDir: string, bus: EventBus, secret: ChallengeSecret, logger: AppLogger): PipelineServices {
  const quota = openQuotaStore({
    dataDir,
    onExceeded(e) {
      logger.warn({ site: e.site, window_start: e.window_start, bytes: e.bytes, limit: e.limit }, 'quota_exceeded: the site reached its monthly quota');
      bus.publish({ kind: 'quota_exceeded', time: new Date().toISOString(), ...e });
    },
    onWriteError: (err) => logger.error({ err }, 'cannot write the quota counters (retried every second)'),
  });
  const mitigation = createMitigation((e) => {
    if (e.state === 'enter') logger.warn({ site: e.site, rps: e.rps, threshold_rps: e.threshold_rps, factor: e.factor, until: e.until }, 'mitigation: site over its RPS threshold, rate limits tightened');
    else logger.info({ site: e.site, since: e.since, peak_rps: e.rps }, 'mitigation ended: rate limits restored');
    bus.publish(e);
  });
  return {
    quota,
    shaper: createRateShaper(),
    slots: createConnectionSlots(),
    bans: createBanList(),
    rates: createRateCounters(),
    transparentWarned: new Set(),
    challenge: createChallengeTokens({ secret: secret.get }),
    mitigation,
  };
}

/** Everything after the logger: config, listeners, admin API, watchers; each registers its shutdown step. */
async function start(root: string, logger: AppLogger, pools: OriginPools, shutdown: Shutdown): Promise<void> {
  let bus: EventBus | undefined;
  let services: PipelineServices | undefined;
  let secret: ChallengeSecret | undefined;
  const runtime = createProxyRuntime({
    root,
    logger,
    pools,
    services(startGlobal) {
      bus = createEventBus(startGlobal.events.channel_capacity, (err) => logger.error({ err }, 'telemetry subscriber failed'));
      const dataDir = isAbsolute(startGlobal.data_dir) ? startGlobal.data_dir : join(root, startGlobal.data_dir);
      secret = openChallengeSecret(dataDir);
      services = createServices(dataDir, bus, secret, logger);
      return services;
    },
  });
  if (!bus || !services || !secret) throw new Error('proxy services were not created');
  const quota = services.quota;
  shutdown.add('quota counters', () => quota.close());
  const mitigation = services.mitigation;
  shutdown.add('mitigation timer', () => mitigation.close());
  const challengeSecret = secret;
  const first = runtime.current();
  applyLogLevel(logger, first);
  const siteIds = (gen: Generation): Set<string> => new Set(gen.sites.map((s) => s.id));
  const ring = createRecentEvents(first.global.events.recent_buffer);
  ring.configure(first.global.events.recent_buffer, siteIds(first));
  const telemetry = createTelemetry(first.global.events.aggregate_retention_hours);
  // A const the closures below can hold (the `let` above is only narrowed here).
  const events = bus;
  events.subscribe(ring.record);
  events.subscribe(telemetry.record);

  const plane = createDataPlane({ current: runtime.current, onEvent: (e) => void events.publish(e), onTunnelBytes: telemetry.tunnelBytes, services, logger });
  const boot = runtime.state.startGlobal;
  const listeners = await startListeners({ http: boot.listen_http, https: boot.listen_https, plane, maxHeaderSize: parserHeaderLimit(first), logger });
  shutdown.add('listeners', () => listeners.close(SHUTDOWN_GRACE_MS));

  const slots = services.slots;
  runtime.onSwap((gen) => {
    applyLogLevel(logger, gen);
    // A deleted (or replaced) secret applies without a restart: every clearance ends.
    try {
      const how = challengeSecret.load();
      if (how !== 'read') logger.warn({ how }, 'new challenge secret: earlier clearances are invalid');
    } catch (err) {
      logger.error({ err }, 'cannot read the challenge secret: the current one stays');
    }
    ring.configure(gen.global.events.recent_buffer, siteIds(gen));
    telemetry.configure(gen.global.events.aggregate_retention_hours, siteIds(gen));
    events.setCapacity(gen.global.events.channel_capacity);
    listeners.setMaxHeaderSize(parserHeaderLimit(gen));
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
        inFlight: plane.inFlight(),
        eventsDropped: events.dropped(),
        eventsQueued: events.queued(),
        sites: gen.sites.map((s) => {
          const u = quota.usage(s.id, s.config.bandwidth);
          return { id: s.id, connections: slots.site(s.id), quotaBytes: u.bytes, quotaLimit: u.limit };
        }),
      };
    },
    auth: createAdminAuth(() => runtime.current().global),
    logger,
  });
  const adminAddress = parseListen(boot.admin.listen);
  if (!adminAddress) throw new Error(`bad admin.listen ${boot.admin.listen}`);
  await admin.app.listen({ host: adminAddress.host, port: adminAddress.port });
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
  shutdown.add('file watch', () => watcher.close());
  const certTimer = setInterval(() => reload('hourly certificate rebuild', true), CERT_REBUILD_MS);
  certTimer.unref();
  shutdown.add('certificate timer', () => clearInterval(certTimer));
  logger.info({ root, generation: first.number, sites: first.sites.length, listeners: listeners.addresses }, 'osproxy started');
}

/**
 * `bandwidth serve`: loads the config (refusing to start on any problem), takes the single-
 * instance lock, writes the pid file, opens the store, starts the notifier, the engine and the
 * local admin socket (mode 0600), sends daemon_started, and on SIGTERM/SIGINT stops everything,
 * sending daemon_stopped before the notifier drains.
 */
import type { BandwidthdConfig } from '../../src/contracts/types.ts';
import { errorMessage } from '../../src/core/app-error.ts';
import { createLogger } from '../../src/core/logger.ts';
import { createShutdown, exitOnSignals } from '../../src/core/shutdown.ts';
import { createContainerSource } from '../../src/lib/docker.ts';
import { claimSocketPath, restrictSocket } from '../../src/lib/local-socket.ts';
import { createTrafficControl } from '../../src/lib/tc.ts';
import { hostVethOf, readCounters } from '../../src/lib/veth.ts';
import { createLocalApi } from './api.ts';
import { loadBandwidthdConfig } from './config.ts';
import { createDaemon } from './daemon.ts';
import { acquireLock, writePidFile } from '../../src/lib/instance-lock.ts';
import { createNotifier } from './notifier.ts';
import { openBandwidthdStore } from './store.ts';

/** Sections held by open resources (lock, socket, store, engine client, logger, notifier). */
const RESTART_KEYS = ['general', 'logging', 'database', 'docker', 'webhook', 'notifications'] as const;

function pick(c: BandwidthdConfig, keys: readonly (typeof RESTART_KEYS)[number][]): Partial<BandwidthdConfig> {
  return Object.fromEntries(keys.map((k) => [k, c[k]])) as Partial<BandwidthdConfig>;
}

/** The restart-only sections that differ between two configs. Pure. */
export function restartOnly(a: BandwidthdConfig, b: BandwidthdConfig): string[] {
  // docker.discovery_interval and watch_events are the engine loop's, applied on reload.
  const norm = (c: BandwidthdConfig, k: (typeof RESTART_KEYS)[number]): string =>
    JSON.stringify(k === 'docker' ? { ...c.docker, discovery_interval: '', watch_events: false } : c[k]);
  return RESTART_KEYS.filter((k) => norm(a, k) !== norm(b, k));
}

/**
 * Runs until a signal stops it; resolves once everything is listening. SIGHUP re-reads the
 * config: a file with problems is refused (logged, `error` event) and the running config stays.
 */
export async function serveBandwidthd(configPath: string): Promise<void> {
  const { config, warnings } = loadBandwidthdConfig(configPath);
  const lock = acquireLock(config.general.lock_file, 'bandwidth daemon');
  const logger = createLogger({ name: 'bandwidth', ...config.logging, redactKeys: ['webhook_url', 'url', 'headers'] });
  for (const w of warnings) logger.warn(`${configPath}: ${w}`);
  const shutdown = createShutdown({ logger });
  shutdown.add('lock', () => lock.release());
  shutdown.add('logger', () => logger.close());
  try {
    shutdown.add('pid file', writePidFile(config.general.pid_file));
    await claimSocketPath(config.general.socket_path, 'bandwidth daemon');

    const store = openBandwidthdStore(config.database);
    shutdown.add('store', () => store.close());
    const notifier = createNotifier({ config, store: config.webhook.persist_queue ? store : null, logger });
    shutdown.add('notifier', () => notifier.stop());
    const source = createContainerSource({
      endpoint: config.docker.endpoint,
      apiVersion: config.docker.api_version,
      ...(config.docker.tls_verify ? { tls: { certPath: config.docker.tls_cert_path } } : {}),
      logger,
    });
    const daemon = createDaemon({ config, store, source, tc: createTrafficControl({ logger }), notifier, logger, hostVethOf, readCounters });
    shutdown.add('daemon', async () => {
      await daemon.stop();
      notifier.notify('daemon_stopped', 'the bandwidth daemon stopped', { pid: process.pid });
    });

    const local = createLocalApi(daemon, { logger });
    await local.app.listen({ path: config.general.socket_path });
    restrictSocket(config.general.socket_path);
    shutdown.add('local socket', () => local.app.close());
    exitOnSignals(shutdown);
    await daemon.start();
    process.on('SIGHUP', () => {
      void (async () => {
        let next: BandwidthdConfig;
        try {
          next = loadBandwidthdConfig(configPath).config;
        } catch (err) {
          logger.error(`config reload refused, the running config stays: ${errorMessage(err)}`);
          notifier.notify('error', `config reload refused: ${errorMessage(err).split('\n')[0] ?? ''}`, { file: configPath });
          return;
        }
        const kept = restartOnly(config, next);
        if (kept.length > 0) logger.warn({ keys: kept }, 'these settings change only with a restart; the running values stay');
        await daemon.reconfigure({
          ...next,
          ...pick(config, RESTART_KEYS),
          docker: { ...config.docker, discovery_interval: next.docker.discovery_interval, watch_events: next.docker.watch_events },
        });
        logger.info('config reloaded and rules re-applied');
        notifier.notify('config_updated', 'configuration reloaded and rules re-applied', { file: configPath, ...(kept.length > 0 ? { needs_restart: kept.join(', ') } : {}) });
      })().catch((err: unknown) => logger.error(`config reload failed: ${errorMessage(err)}`));
    });
    notifier.notify('daemon_started', 'the bandwidth daemon started', { pid: process.pid });
    logger.info({ socket: config.general.socket_path, containers: daemon.status().containers.length }, 'bandwidth daemon running');
  } catch (err) {
    await shutdown.run('start failed');
    throw err;
  }
}

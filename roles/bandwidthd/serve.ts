/**
 * `bandwidth serve`: loads the config (refusing to start on any problem), takes the single-
 * instance lock, writes the pid file, opens the store, starts the notifier, the engine and the
 * local admin socket (mode 0600), sends daemon_started, and on SIGTERM/SIGINT stops everything,
 * sending daemon_stopped before the notifier drains.
 */
import { createLogger } from '../../src/core/logger.ts';
import { createShutdown, exitOnSignals } from '../../src/core/shutdown.ts';
import { createContainerSource } from '../../src/lib/docker.ts';
import { claimSocketPath, restrictSocket } from '../../src/lib/local-socket.ts';
import { createTrafficControl } from '../../src/lib/tc.ts';
import { hostVethOf, readCounters } from '../../src/lib/veth.ts';
import { createLocalApi } from './api.ts';
import { loadBandwidthdConfig } from './config.ts';
import { createDaemon } from './daemon.ts';
import { acquireLock, logTakeover, writePidFile } from '../../src/lib/instance-lock.ts';
import { createNotifier } from './notifier.ts';
import { createReloader } from './reload.ts';
import { openBandwidthdStore } from './store.ts';

/**
 * Runs until a signal stops it; resolves once everything is listening. SIGHUP re-reads the
 * config (reload.ts).
 */
export async function serveBandwidthd(configPath: string): Promise<void> {
  const { config, warnings } = loadBandwidthdConfig(configPath);
  const lock = acquireLock(config.general.lock_file, 'bandwidth daemon');
  const logger = createLogger({ name: 'bandwidth', ...config.logging, redactKeys: ['webhook_url', 'url', 'headers'] });
  for (const w of warnings) logger.warn(`${configPath}: ${w}`);
  logTakeover(lock, logger);
  const shutdown = createShutdown({ logger });
  shutdown.add('lock', () => lock.release());
  try {
    shutdown.add('pid file', writePidFile(config.general.pid_file));
    await claimSocketPath(config.general.socket_path, 'bandwidth daemon');

    const store = openBandwidthdStore(config.database);
    shutdown.add('store', () => store.close());
    // Without persist_queue nothing sends what an earlier run stored; kept, like the stored
    // deliveries of a switched-off destination, for when it is switched on again.
    if (!config.webhook.persist_queue && store.outboxCount() > 0) {
      logger.warn({ deliveries: store.outboxCount() }, 'webhook.persist_queue is off: deliveries an earlier run stored for retry wait until it is switched on again');
    }
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
    // Before start(): its first cycle can wait 15 s on a slow engine while the socket already
    // answers, and an unhandled SIGHUP (a reload) would kill the process, leaving its lock behind.
    // A reload then is queued behind the first cycle like any other serial work.
    const reload = createReloader({ configPath, running: config, daemon, notifier, logger });
    process.on('SIGHUP', () => void reload());
    await daemon.start();
    notifier.notify('daemon_started', 'the bandwidth daemon started', { pid: process.pid });
    logger.info({ socket: config.general.socket_path, containers: daemon.status().containers.length }, 'bandwidth daemon running');
  } catch (err) {
    await shutdown.run('start failed', err);
    throw err;
  }
}

/**
 * `bandwidth-node serve`: loads the config (refusing to start on any problem), opens the store,
 * starts discovery, the cycle, the panel loop, the node API and the local admin socket, and
 * stops all of it cleanly on SIGTERM/SIGINT.
 */
import { readFileSync } from 'node:fs';
import { createLogger } from '../../src/core/logger.ts';
import { createShutdown, exitOnSignals } from '../../src/core/shutdown.ts';
import { errorMessage } from '../../src/core/app-error.ts';
import { acquireLock, lockPathFor, logTakeover } from '../../src/lib/instance-lock.ts';
import { claimSocketPath, restrictSocket } from '../../src/lib/local-socket.ts';
import { createTrafficControl } from '../../src/lib/tc.ts';
import { createAgent } from './agent.ts';
import { createNodeApi } from './api.ts';
import { loadNodeAgentConfig } from './config.ts';
import { createDockerView } from './containers.ts';
import { createPanelClient } from './panel-client.ts';
import { openAgentStore } from './store.ts';

/** Runs until a signal stops it; resolves once everything is listening. */
export async function serveNodeAgent(configPath: string): Promise<void> {
  const { config, warnings } = loadNodeAgentConfig(configPath);
  const logger = createLogger({ name: 'bandwidth-node', ...config.logging });
  for (const w of warnings) logger.warn(`${configPath}: ${w}`);
  const shutdown = createShutdown({ logger });

  try {
    // One agent per store: a second one on the same database would keep its own limits and
    // counters and write them over the first one's.
    if (config.database.path !== ':memory:') {
      const lock = acquireLock(lockPathFor(config.database.path), 'bandwidth-node');
      shutdown.add('lock', () => lock.release());
      logTakeover(lock, logger);
    }
    const token = readFileSync(config.panel.token_file, 'utf8').trim();
    const store = openAgentStore(config.database);
    shutdown.add('store', () => store.close());
    // Made with traffic control off too: the rules an earlier run left on running servers go (agent.ts).
    const tc = createTrafficControl({ logger });
    if (!config.traffic_control.enabled) logger.warn('traffic_control.enabled is false: usage is measured and reported, nothing is shaped');
    const agent = createAgent({
      config,
      store,
      // Like every Docker client, DOCKER_HOST names another engine (the spec has no key for it).
      containers: createDockerView({ endpoint: process.env['DOCKER_HOST'] ?? 'unix:///var/run/docker.sock', watchEvents: config.docker.watch_events, logger }),
      tc,
      panel: createPanelClient({ url: config.panel.url, token }),
      logger,
      tokenFile: config.panel.token_file,
    });
    shutdown.add('agent', () => agent.stop());

    await claimSocketPath(config.general.socket_path, 'bandwidth-node');
    const local = createNodeApi(agent, { logger });
    await local.listen({ path: config.general.socket_path });
    restrictSocket(config.general.socket_path);
    shutdown.add('local socket', () => local.close());

    if (config.api.enabled) {
      const api = createNodeApi(agent, { token: () => token, logger });
      await api.listen({ host: config.api.listen, port: config.api.port }).catch((err: unknown) => {
        throw new Error(`cannot listen on api.listen ${config.api.listen} port ${config.api.port}: ${errorMessage(err)}`);
      });
      shutdown.add('node API', () => api.close());
      logger.info({ listen: `${config.api.listen}:${config.api.port}` }, 'node API listening');
    } else {
      logger.warn('api.enabled is false: the panel cannot pull stats, push limits or unthrottle');
    }
    exitOnSignals(shutdown);
    process.on('SIGHUP', () => logger.warn('the node agent reads its config at start only: restart it to apply changes'));
    await agent.start();
  } catch (err) {
    // Close what was opened (the local socket above all) so the process exits and systemd restarts it.
    await shutdown.run('start failed', err);
    throw err;
  }
}

/**
 * `hostkit panel serve`: opens the panel (config, app key, store), builds the HTTP app and listens
 * on `listen` until SIGTERM/SIGINT, then stops taking requests, lets running ones finish and
 * closes the store. A config change needs a restart (the store and listener are held open).
 */
import { parseListen } from '../../src/core/config-checks.ts';
import { createShutdown, exitOnSignals } from '../../src/core/shutdown.ts';
import { SERVICE_VERSION } from '../../src/core/version.ts';
import { createPanelApp } from './http/app.ts';
import { openPanel } from './panel.ts';

/** Resolves once listening; runs until a signal stops the process. */
export async function servePanel(configPath: string): Promise<void> {
  const panel = await openPanel(configPath, { serve: true });
  const { ctx, logger } = panel;
  for (const w of panel.warnings) logger.warn(`${configPath}: ${w}`);
  const shutdown = createShutdown({ logger });
  shutdown.add('store', () => panel.release());
  if (panel.appKeyCreated) logger.warn('generated a new app key in %s: back it up, stored secrets cannot be read without it', ctx.config.data_dir);
  try {
    const app = await createPanelApp(ctx, panel.addons);
    const listen = parseListen(ctx.config.listen);
    if (listen === undefined) throw new Error(`listen ${ctx.config.listen} is not ip:port`);
    await app.listen({ host: listen.host, port: listen.port });
    shutdown.add('http', () => app.close());
    for (const addon of panel.addons) {
      addon.start?.();
      shutdown.add('addon', () => addon.stop?.());
    }
  } catch (err) {
    // The port in use, say: the lock and the store are released, the log says why.
    await shutdown.run('start failed', err);
    throw err;
  }
  exitOnSignals(shutdown);
  process.on('SIGHUP', () => logger.warn('the panel reads its config at start only: restart it to apply changes'));
  logger.info({ listen: ctx.config.listen, base_url: ctx.config.base_url, version: SERVICE_VERSION }, 'panel listening on %s', ctx.config.listen);
}

/**
 * SIGHUP for `bandwidth serve`: re-reads the config file. A file with problems is refused (logged,
 * and an `error` notification listing every problem) while the running config keeps serving; a
 * good one is applied to the engine at once, except the sections held by open resources, which
 * keep their running values until a restart.
 */
import type { Logger } from 'pino';
import type { BandwidthdConfig } from '../../src/contracts/types.ts';
import { errorMessage } from '../../src/core/app-error.ts';
import { loadBandwidthdConfig } from './config.ts';
import type { Daemon } from './daemon.ts';
import type { Notifier } from './notifier.ts';

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

export interface ReloadDeps {
  configPath: string;
  /** The config the process started with: the restart-only sections keep its values. */
  running: BandwidthdConfig;
  daemon: Pick<Daemon, 'reconfigure'>;
  notifier: Pick<Notifier, 'notify'>;
  logger: Logger;
}

/** Built once by serve.ts; the returned function runs on each SIGHUP and never rejects. */
export function createReloader(deps: ReloadDeps): () => Promise<void> {
  const { configPath, running, daemon, notifier, logger } = deps;
  return async () => {
    let next: BandwidthdConfig;
    try {
      next = loadBandwidthdConfig(configPath).config;
    } catch (err) {
      // The whole message: a ConfigError lists every problem (webhook URLs in it are redacted).
      const why = errorMessage(err);
      logger.error(`config reload refused, the running config stays: ${why}`);
      notifier.notify('error', `config reload refused, the running config stays: ${why}`, { file: configPath });
      return;
    }
    try {
      const kept = restartOnly(running, next);
      if (kept.length > 0) logger.warn({ keys: kept }, 'these settings change only with a restart; the running values stay');
      await daemon.reconfigure({
        ...next,
        ...pick(running, RESTART_KEYS),
        docker: { ...running.docker, discovery_interval: next.docker.discovery_interval, watch_events: next.docker.watch_events },
      });
      logger.info('config reloaded and rules re-applied');
      notifier.notify('config_updated', 'configuration reloaded and rules re-applied', { file: configPath, ...(kept.length > 0 ? { needs_restart: kept.join(', ') } : {}) });
    } catch (err) {
      logger.error(`config reload failed: ${errorMessage(err)}`);
    }
  };
}

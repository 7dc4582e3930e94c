/**
 * SIGHUP for `bandwidth serve`: re-reads the config file. A file with problems is refused (logged,
 * and an `error` notification listing every problem) while the running config keeps serving; a
 * good one is applied to the engine at once, except the settings held by open resources, which
 * keep their running values until a restart. Warnings (unknown keys, unset variables) are logged
 * as at start.
 */
import { isDeepStrictEqual } from 'node:util';
import type { Logger } from 'pino';
import type { BandwidthdConfig } from '../../src/contracts/types.ts';
import { errorMessage } from '../../src/core/app-error.ts';
import { loadBandwidthdConfig } from './config.ts';
import type { Daemon } from './daemon.ts';
import type { Notifier } from './notifier.ts';

/**
 * Sections held by open resources (lock, socket, store, engine client, logger, notifier), each with
 * the keys of it that apply at once all the same: the engine loop's timing, and the quota warning
 * threshold, which sits among the notifications but is a quota value the daemon reads per poll.
 */
const RESTART_ONLY = {
  general: [],
  logging: [],
  database: [],
  docker: ['discovery_interval', 'watch_events'],
  webhook: [],
  notifications: ['warning_threshold'],
} as const satisfies Partial<Record<keyof BandwidthdConfig, readonly string[]>>;

type Section = keyof typeof RESTART_ONLY;
const SECTIONS = Object.keys(RESTART_ONLY) as Section[];

const fields = (c: BandwidthdConfig, s: Section): Record<string, unknown> => c[s] as Record<string, unknown>;
const appliesAtOnce = (s: Section, key: string): boolean => (RESTART_ONLY[s] as readonly string[]).includes(key);

/** The restart-only settings that differ between two configs, as `section.key` (`notifications.chat_a`). Pure. */
export function restartOnly(a: BandwidthdConfig, b: BandwidthdConfig): string[] {
  return SECTIONS.flatMap((s) => {
    const keys = new Set([...Object.keys(fields(a, s)), ...Object.keys(fields(b, s))]);
    return [...keys].filter((k) => !appliesAtOnce(s, k) && !isDeepStrictEqual(fields(a, s)[k], fields(b, s)[k])).map((k) => `${s}.${k}`);
  });
}

/** What a reload applies: `next`, with the running values of the restart-only settings. Pure. */
function reloadedConfig(running: BandwidthdConfig, next: BandwidthdConfig): BandwidthdConfig {
  const out: Record<string, unknown> = { ...next };
  for (const s of SECTIONS) {
    const kept = Object.entries(fields(running, s)).filter(([k]) => !appliesAtOnce(s, k));
    const applied = Object.entries(fields(next, s)).filter(([k]) => appliesAtOnce(s, k));
    out[s] = Object.fromEntries([...kept, ...applied]);
  }
  return out as unknown as BandwidthdConfig;
}

export interface ReloadDeps {
  configPath: string;
  /** The config the process started with: the restart-only settings keep its values. */
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
      const loaded = loadBandwidthdConfig(configPath);
      next = loaded.config;
      for (const w of loaded.warnings) logger.warn(`${configPath}: ${w}`);
    } catch (err) {
      // The whole message: a ConfigError lists every problem and warning (webhook URLs in it are redacted).
      const why = errorMessage(err);
      logger.error(`config reload refused, the running config stays: ${why}`);
      notifier.notify('error', `config reload refused, the running config stays: ${why}`, { file: configPath });
      return;
    }
    try {
      const kept = restartOnly(running, next);
      if (kept.length > 0) logger.warn({ keys: kept }, 'these settings change only with a restart; the running values stay');
      await daemon.reconfigure(reloadedConfig(running, next));
      logger.info('config reloaded and rules re-applied');
      notifier.notify('config_updated', 'configuration reloaded and rules re-applied', { file: configPath, ...(kept.length > 0 ? { needs_restart: kept.join(', ') } : {}) });
    } catch (err) {
      logger.error(`config reload failed: ${errorMessage(err)}`);
    }
  };
}

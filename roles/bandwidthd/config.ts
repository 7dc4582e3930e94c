/**
 * The container bandwidth daemon's config (spec/3 §2.8-2.9), default /etc/bandwidth/config.yaml.
 * Besides the schema, the start-time rejections of the spec: max_open_conns other than 1, a
 * ceiling below the guaranteed rate, an exceeded speed of 0 (or any rate below what tc shapes),
 * tls_verify without a cert path or with one lacking its files, non-positive durations, bad cron
 * expressions, unknown time zones, bad webhook URLs (shown redacted: they hold secrets) and two
 * webhook destinations of one name.
 */
import { statSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { loadConfigFile, type ConfigProblem, type ConfigSpec, type LoadedConfig } from '../../src/core/config-loader.ts';
import { at, checkAbsolutePaths, checkPositiveDurations, checkTimerDurations, checkTimeZone, httpUrlProblem } from '../../src/core/config-checks.ts';
import { cronProblem } from '../../src/lib/cron.ts';
import { validateBandwidthdConfig } from '../../src/contracts/validators.js';
import { bandwidthdConfigSchema } from '../../src/contracts/schemas.ts';
import type { BandwidthdConfig } from '../../src/contracts/types.ts';
import { redactUrl, webhookTarget } from '../../src/lib/webhook-url.ts';
import { socketPathProblem } from '../../src/lib/local-socket.ts';
import { MIN_RATE_BPS } from '../../src/lib/tc.ts';

export const DEFAULT_CONFIG_PATH = '/etc/bandwidth/config.yaml';

const CRONS = ['reset_cron', 'cleanup_cron', 'history_cron', 'health_cron', 'webhook_retry_cron'];
const TLS_FILES = ['cert.pem', 'key.pem', 'ca.pem'];

/**
 * docker.tls_cert_path with tls_verify: the container source reads its files only when it first
 * contacts the engine, so a missing one would let the daemon start and never reach the engine.
 * Returns what is wrong with the directory, or undefined.
 */
function tlsCertPathProblem(dir: string): string | undefined {
  const is = (path: string, kind: 'isFile' | 'isDirectory'): boolean => {
    try {
      return statSync(path)[kind]();
    } catch {
      return false;
    }
  };
  const need = `docker.tls_verify needs ${TLS_FILES.join(', ')} in it`;
  if (!is(dir, 'isDirectory')) return `${JSON.stringify(dir)} does not exist or is not a directory: ${need}`;
  const missing = TLS_FILES.filter((f) => !is(join(dir, f), 'isFile'));
  return missing.length > 0 ? `${JSON.stringify(dir)} lacks ${missing.join(', ')}: ${need}` : undefined;
}

/**
 * A webhook URL: absolute http(s) with a host, and userinfo that decodes to basic-auth
 * credentials. The problem shows the URL redacted, since `check` output and logs are no place
 * for its token or password.
 */
function checkWebhookUrl(config: unknown, path: string, problems: ConfigProblem[]): void {
  const v = at(config, path);
  // An unset ${VAR} stays literal and is reported as a warning by the loader.
  if (typeof v !== 'string' || v === '' || v.includes('${')) return;
  const target = webhookTarget(v);
  const why = httpUrlProblem(v) ?? ('error' in target ? target.error : undefined);
  if (why) problems.push({ path, message: `${why} (got ${JSON.stringify(redactUrl(v))})` });
}

/**
 * Every webhook destination the config names, with where: `webhook.endpoints[]` and
 * `notifications.generic[]` by their `name`, `notifications.chat_a`/`chat_b` (once they have a
 * URL) as `chat_a`/`chat_b`, the names notifier.ts gives them.
 */
function destinationPlaces(config: unknown): { name: string; path: string }[] {
  // The fixed names first, so a problem lands on the name that can be changed.
  const places = ['chat_a', 'chat_b'].filter((p) => at(config, `/notifications/${p}/webhook_url`)).map((p) => ({ name: p, path: `/notifications/${p}` }));
  for (const list of ['/webhook/endpoints', '/notifications/generic']) {
    const items = at(config, list);
    if (!Array.isArray(items)) continue;
    items.forEach((_, i) => {
      const name = at(config, `${list}/${i}/name`);
      if (typeof name === 'string') places.push({ name, path: `${list}/${i}/name` });
    });
  }
  return places;
}

/**
 * Destination names must be unique across all kinds: stored deliveries, the retry job and the
 * logs know a destination by its name alone, so a second one of the same name received the
 * first one's stored payloads.
 */
function checkDestinationNames(config: unknown, problems: ConfigProblem[]): void {
  const first = new Map<string, string>();
  for (const { name, path } of destinationPlaces(config)) {
    const other = first.get(name);
    if (other === undefined) first.set(name, path);
    else problems.push({ path, message: `${JSON.stringify(name)} is also the name of the destination at ${other}: webhook destination names must be unique (stored deliveries and logs go by name)` });
  }
}

function num(config: unknown, path: string): number | undefined {
  const v = at(config, path);
  return typeof v === 'number' ? v : undefined;
}

export const bandwidthdConfigSpec: ConfigSpec<BandwidthdConfig> = {
  validate: validateBandwidthdConfig,
  schema: bandwidthdConfigSchema,
  checks(config, problems: ConfigProblem[]) {
    const conns = num(config, '/database/max_open_conns');
    if (conns !== undefined && conns !== 1) {
      problems.push({ path: '/database/max_open_conns', message: 'must be 1: the daemon’s store has a single writer' });
    }

    // tc shapes nothing slower than MIN_RATE_BPS: a slower rate would fail on every interface at
    // run time and leave the containers at their previous rules (an exceeded one unthrottled).
    const leastMbps = MIN_RATE_BPS / 1_000_000;
    for (const path of ['/bandwidth/default_rx_mbps', '/bandwidth/default_tx_mbps', '/quota/exceeded_speed_rx_mbps', '/quota/exceeded_speed_tx_mbps']) {
      const v = num(config, path);
      if (v !== undefined && v <= 0) problems.push({ path, message: 'must be above 0' });
      else if (v !== undefined && v < leastMbps) problems.push({ path, message: `must be at least ${leastMbps} (${MIN_RATE_BPS} bit/s, the slowest rate tc shapes)` });
    }
    const ceil = num(config, '/bandwidth/default_ceil_mbps');
    const rate = Math.max(num(config, '/bandwidth/default_rx_mbps') ?? 0, num(config, '/bandwidth/default_tx_mbps') ?? 0);
    if (ceil !== undefined && ceil < rate) {
      problems.push({ path: '/bandwidth/default_ceil_mbps', message: `must not be below the guaranteed rate (${rate} Mbit/s)` });
    }

    checkAbsolutePaths(config, ['/general/socket_path', '/general/lock_file', '/general/pid_file', '/database/path', '/logging/file', '/docker/tls_cert_path', '/history/export_path'], problems);
    const socketPath = at(config, '/general/socket_path');
    const socketProblem = typeof socketPath === 'string' && socketPath !== '' ? socketPathProblem(socketPath) : undefined;
    if (socketProblem !== undefined) problems.push({ path: '/general/socket_path', message: socketProblem });

    const endpoint = at(config, '/docker/endpoint');
    if (typeof endpoint === 'string' && !/^(unix:\/\/\/.+|tcp:\/\/[^/]+)$/.test(endpoint)) {
      problems.push({ path: '/docker/endpoint', message: 'must be unix:///path/to/socket or tcp://host:port' });
    }
    if (at(config, '/docker/tls_verify') === true) {
      const certPath = at(config, '/docker/tls_cert_path');
      if (!certPath) problems.push({ path: '/docker/tls_cert_path', message: 'is required when docker.tls_verify is true (a directory with cert.pem, key.pem, ca.pem)' });
      // A relative path is reported above; an unset ${VAR} by the loader.
      const why = typeof certPath === 'string' && isAbsolute(certPath) && !certPath.includes('${') ? tlsCertPathProblem(certPath) : undefined;
      if (why) problems.push({ path: '/docker/tls_cert_path', message: why });
    }

    checkPositiveDurations(
      config,
      [
        '/docker/discovery_interval',
        '/bandwidth/poll_interval',
        '/webhook/backoff_base',
        '/scheduler/check_interval',
        '/status/update_interval',
        '/history/rollup_interval',
        '/cleanup/interval',
        '/notifications/retry/backoff_base',
      ],
      problems,
    );
    // 0s is allowed here (no batching); retry backoffs are capped at 60 s where they are used.
    checkTimerDurations(config, ['/notifications/batch_window'], problems);
    checkTimeZone(config, '/timezone', problems);
    for (const name of CRONS) {
      const expr = at(config, `/scheduler/${name}`);
      const why = typeof expr === 'string' ? cronProblem(expr) : undefined;
      if (why) problems.push({ path: `/scheduler/${name}`, message: `invalid cron expression: ${why}` });
    }

    const endpoints = at(config, '/webhook/endpoints');
    if (Array.isArray(endpoints)) endpoints.forEach((_, i) => checkWebhookUrl(config, `/webhook/endpoints/${i}/url`, problems));
    for (const platform of ['chat_a', 'chat_b']) {
      if (at(config, `/notifications/${platform}/enabled`) === true && !at(config, `/notifications/${platform}/webhook_url`)) {
        problems.push({ path: `/notifications/${platform}/webhook_url`, message: `is required when ${platform} is enabled` });
      }
      checkWebhookUrl(config, `/notifications/${platform}/webhook_url`, problems);
    }
    const generic = at(config, '/notifications/generic');
    if (Array.isArray(generic)) {
      generic.forEach((_, i) => {
        checkWebhookUrl(config, `/notifications/generic/${i}/url`, problems);
        checkPositiveDurations(config, [`/notifications/generic/${i}/retry/backoff_base`], problems);
      });
    }
    checkDestinationNames(config, problems);
  },
};

/** Loads and checks the daemon config; throws ConfigError listing every problem. */
export function loadBandwidthdConfig(file: string): LoadedConfig<BandwidthdConfig> {
  return loadConfigFile(file, bandwidthdConfigSpec);
}

/**
 * The local CLI of the daemon: `bandwidth status|reset|cleanup` over the admin socket named by the
 * config file, and `bandwidth webhook test`, which needs only the config file.
 */
import { AppError } from '../../src/core/app-error.ts';
import { localRequest } from '../../src/lib/local-socket.ts';
import { formatBytes as bytes, printLine as print, socketPathFromConfig, table } from '../../src/lib/cli-format.ts';
import { DEFAULT_CONFIG_PATH, loadBandwidthdConfig } from './config.ts';
import { JOBS, type DaemonStatus } from './daemon.ts';
import { bodyFor, destinationsOf, sendOnce, type Platform } from './notifier.ts';

const DEFAULT_SOCKET = '/var/run/bandwidth.sock';

/** general.socket_path of the config file (read leniently: status must work with a half-broken file), else the default. */
export function socketPathOf(configPath: string): string {
  return socketPathFromConfig(configPath, DEFAULT_CONFIG_PATH, DEFAULT_SOCKET);
}

const call = <T>(socket: string, method: 'GET' | 'POST', path: string): Promise<T> => localRequest<T>(socket, method, `/api/v1${path}`, 'the bandwidth daemon');

export async function statusCommand(socket: string, json: boolean): Promise<void> {
  const s = await call<DaemonStatus>(socket, 'GET', '/status');
  if (json) return print(JSON.stringify(s, null, 2));
  const w = s.webhooks;
  print(
    [
      `bandwidth daemon ${s.version}, pid ${s.pid}, up ${s.uptime_seconds} s`,
      `docker:      ${s.docker}`,
      `daily reset: last ${s.last_reset_at}, next ${s.next_reset_at} (${s.timezone})`,
      `webhooks:    ${w.delivered} delivered, ${w.failed} failed, ${w.queued} queued, ${w.dropped} dropped, ${w.persisted} stored for retry`,
      '',
      s.containers.length === 0
        ? 'no containers managed'
        : table([
            ['CONTAINER', 'IFACE', 'RX TODAY', 'TX TODAY', 'QUOTA', 'USED', 'RX MBIT/S', 'TX MBIT/S', 'STATE'],
            ...s.containers.map((c) => [
              c.name,
              c.iface ?? '-',
              bytes(c.rx_day_bytes),
              bytes(c.tx_day_bytes),
              c.quota_bytes > 0 ? bytes(c.quota_bytes) : 'none',
              c.quota_bytes > 0 ? `${c.usage_pct}%` : '-',
              c.rx_mbps.toFixed(2),
              c.tx_mbps.toFixed(2),
              c.exceeded ? (c.mode === 'none' ? 'exceeded (unrestricted)' : 'exceeded (throttled)') : c.warned ? 'warned' : 'ok',
            ]),
          ]),
    ].join('\n'),
  );
}

export async function resetCommand(socket: string, container: string | undefined): Promise<void> {
  const q = container === undefined ? '' : `?container=${encodeURIComponent(container)}`;
  const r = await call<{ reset: string[] }>(socket, 'POST', `/reset${q}`);
  print(r.reset.length === 0 ? 'no containers to reset' : `reset: ${r.reset.join(', ')}`);
}

export async function jobCommand(socket: string, job: string): Promise<void> {
  if (!(JOBS as readonly string[]).includes(job)) throw new AppError('ERR_USAGE', `unknown job ${JSON.stringify(job)} (jobs: ${JOBS.join(', ')})`);
  const r = await call<{ result: string }>(socket, 'POST', `/jobs/${encodeURIComponent(job)}`);
  print(r.result);
}

/**
 * `bandwidth webhook test`: one synthetic notice to every enabled destination (of one platform
 * with --platform), one attempt each; prints each result. Sets exit code 1 unless all succeeded
 * (and when none is enabled, since nothing was proven).
 */
export async function webhookTestCommand(configPath: string, platform: string | undefined): Promise<void> {
  if (platform !== undefined && !['chat_a', 'chat_b', 'generic'].includes(platform)) {
    throw new AppError('ERR_USAGE', `--platform must be chat_a, chat_b or generic, got ${platform}`);
  }
  const { config } = loadBandwidthdConfig(configPath);
  const dests = destinationsOf(config)
    .filter((d) => d.enabled && (platform === undefined || d.dest.type === (platform as Platform)))
    .map((d) => d.dest);
  if (dests.length === 0) {
    print(`no enabled webhook endpoints${platform ? ` of platform ${platform}` : ''}`);
    process.exitCode = 1;
    return;
  }
  const notice = { event: 'test' as const, timestamp: new Date().toISOString(), message: 'test notification from `bandwidth webhook test`', data: { container: 'example', interface: 'veth0', direction: 'rx', current_mbps: 0, limit_mbps: 0, usage_pct: 0 } };
  const results = await Promise.all(dests.map(async (d) => ({ d, r: await sendOnce(d, bodyFor(d, [notice])) })));
  let ok = true;
  for (const { d, r } of results) {
    ok &&= r.ok;
    print(`${d.name} (${d.type}): ${r.ok ? `ok (HTTP ${r.status})` : `FAILED: ${r.error ?? 'unknown error'}`}`);
  }
  if (!ok) process.exitCode = 1;
}

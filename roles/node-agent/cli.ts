/**
 * The local CLI of the node agent (`bandwidth-node status|stats|history|unthrottle`): talks to
 * the running agent over its admin socket and prints for people, or JSON with --json.
 */
import { formatBytes as bytes, formatRate as rate, printLine as print, socketPathFromConfig, table } from '../../src/lib/cli-format.ts';
import { localRequest } from '../../src/lib/local-socket.ts';
import { DEFAULT_CONFIG_PATH } from './config.ts';
import type { ServerStatsRecord } from '../../src/contracts/types.ts';
import type { AgentStatus } from './agent.ts';

const DEFAULT_SOCKET = '/var/run/bandwidth-node.sock';

/** BANDWIDTH_NODE_SOCKET, else general.socket_path of the config file, else the default. */
export function agentSocketPath(configPath: string): string {
  return process.env['BANDWIDTH_NODE_SOCKET'] || socketPathFromConfig(configPath, DEFAULT_CONFIG_PATH, DEFAULT_SOCKET);
}

const call = <T>(socket: string, method: 'GET' | 'POST', path: string): Promise<T> => localRequest<T>(socket, method, `/api/v1${path}`, 'bandwidth-node');

export async function statusCommand(socket: string, json: boolean): Promise<void> {
  const s = await call<AgentStatus>(socket, 'GET', '/status');
  if (json) return print(JSON.stringify(s, null, 2));
  // Fields added by later releases are missing while an older agent still runs (the executable
  // was replaced, the service not yet restarted).
  const database = (s as Partial<AgentStatus>).database;
  const smart = (s as Partial<AgentStatus>).smart;
  print(
    [
      `bandwidth-node ${s.version}, up ${s.uptime_seconds} s`,
      `panel:           ${s.panel.registered ? `registered as node ${s.panel.node_id}` : 'not registered'}${s.panel.last_heartbeat_at ? `, last heartbeat ${s.panel.last_heartbeat_at}` : ''}${s.panel.last_error ? `\n                 last error: ${s.panel.last_error}` : ''}`,
      `docker:          ${s.docker}`,
      `containers:      ${s.containers} running managed (${s.servers} servers known)`,
      `throttled:       ${s.throttled}`,
      `quota exceeded:  ${s.quota_exceeded}`,
      `limits:          config_version ${s.config_version}, timezone ${s.timezone}`,
      `traffic control: ${s.traffic_control ? 'on' : 'off'}`,
      `queued events:   ${s.outbox}`,
      smart ? `SMART:           ${smart.enabled ? `${smart.watched} servers watched, ${smart.attacked} under attack now` : 'off on this node (smart.enabled)'}` : 'SMART:           not reported: the running agent is older than this executable',
      database
        ? `database:        ${database.path}${database.last_error ? `\n                 last error: ${database.last_error} at ${database.last_error_at ?? '?'} (usage is not being recorded)` : ''}`
        : 'database:        not reported: the running agent is older than this executable (restart it to run this one)',
    ].join('\n'),
  );
}

export async function statsCommand(socket: string, json: boolean): Promise<void> {
  const { servers } = await call<{ servers: ServerStatsRecord[] }>(socket, 'GET', '/stats');
  if (json) return print(JSON.stringify(servers, null, 2));
  if (servers.length === 0) return print('no servers known yet');
  print(
    table([
      ['UUID', 'ONLINE', 'RX RATE', 'TX RATE', 'RX DAY', 'TX DAY', 'RX MONTH', 'TX MONTH', 'THROTTLED', 'EXCEEDED'],
      ...servers.map((s) => [
        s.uuid,
        s.online ? 'yes' : 'no',
        rate(s.rx_rate_bps),
        rate(s.tx_rate_bps),
        bytes(s.rx_used_day_bytes),
        bytes(s.tx_used_day_bytes),
        bytes(s.rx_used_month_bytes),
        bytes(s.tx_used_month_bytes),
        s.throttled ? 'yes' : 'no',
        s.exceeded.join(',') || '-',
      ]),
    ]),
  );
}

export async function historyCommand(socket: string, uuid: string, period: string, bucket: string, json: boolean): Promise<void> {
  const q = new URLSearchParams({ period, bucket });
  const data = await call<{ points: { t: string; rx_bytes: number; tx_bytes: number }[] }>(socket, 'GET', `/servers/${encodeURIComponent(uuid)}/history?${q}`);
  if (json) return print(JSON.stringify(data, null, 2));
  print(table([['BUCKET START', 'RX', 'TX'], ...data.points.map((p) => [p.t, bytes(p.rx_bytes), bytes(p.tx_bytes)])]));
}

export async function unthrottleCommand(socket: string, uuid: string): Promise<void> {
  const data = await call<{ unthrottled: boolean }>(socket, 'POST', `/servers/${encodeURIComponent(uuid)}/unthrottle`);
  print(data.unthrottled ? `${uuid}: unthrottled until its exceeded periods reset` : `${uuid}: nothing to unthrottle`);
}

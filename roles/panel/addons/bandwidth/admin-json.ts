/**
 * The admin session JSON endpoints of spec/1 §4.3 (plain JSON, no envelope), for the addon's own
 * pages: the fleet In/Out series, the top consumers, the node cards and one node's live rates.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { PanelContext } from '../../context.ts';
import { localMidnight, localParts } from '../../../../src/lib/calendar.ts';
import type { BandwidthService } from './service.ts';
import type { BandwidthStore, SeriesPoint } from './store.ts';

export const MAX_HOURS = 2160;
/** Ranges up to a week are drawn per hour, longer ones per day. */
export const HOURLY_UP_TO = 168;
export const TOP_CONSUMERS = 10;

/** A positive integer query parameter in [min, max]; undefined when absent, null when invalid. */
function intQuery(req: FastifyRequest, name: string, min: number, max: number): number | undefined | null {
  const v = (req.query as Record<string, unknown>)[name];
  if (v === undefined || v === '') return undefined;
  if (typeof v !== 'string' || !/^\d{1,10}$/.test(v)) return null;
  const n = Number(v);
  return n >= min && n <= max ? n : null;
}

function invalid(reply: FastifyReply, message: string): FastifyReply {
  return reply.code(422).send({ error: message });
}

export interface Series {
  hours: number;
  bucket: 'hour' | 'day';
  points: { t: string; rx_bytes: number; tx_bytes: number }[];
}

/**
 * The last `count` calendar days in `tz` up to the one holding `nowMs`, oldest first: each day's
 * rollup key and the instant its local midnight starts it. Counted on the calendar, not in steps
 * of 24 hours, which skip or repeat a day next to a daylight-saving change.
 */
export function calendarDays(nowMs: number, count: number, tz: string): { key: string; start: number }[] {
  const today = localParts(nowMs, tz);
  const days = [];
  for (let i = count - 1; i >= 0; i--) {
    const d = new Date(Date.UTC(today.year, today.month - 1, today.day - i));
    days.push({ key: d.toISOString().slice(0, 10), start: localMidnight(d.getUTCFullYear(), d.getUTCMonth() + 1, d.getUTCDate(), tz) });
  }
  return days;
}

/** The series of the last `hours` hours, gaps filled with zeros so a chart has one point per bucket. */
export async function timeseries(store: BandwidthStore, hours: number, filter: { nodeId?: number | undefined; serverId?: number | undefined }, nowMs = Date.now()): Promise<Series> {
  const tz = (await store.settings()).settings.timezone;
  const hourNow = Math.floor(nowMs / 3_600_000) * 3600;
  if (hours <= HOURLY_UP_TO) {
    const from = hourNow - (hours - 1) * 3600;
    const rows = new Map((await store.hourlySeries(from, hourNow, filter)).map((p: SeriesPoint) => [Number(p.t), p]));
    const points = [];
    for (let h = from; h <= hourNow; h += 3600) {
      const p = rows.get(h);
      points.push({ t: new Date(h * 1000).toISOString(), rx_bytes: p?.rx_bytes ?? 0, tx_bytes: p?.tx_bytes ?? 0 });
    }
    return { hours, bucket: 'hour', points };
  }
  const days = calendarDays(nowMs, Math.ceil(hours / 24), tz);
  const rows = new Map((await store.dailySeries(days[0]!.key, days[days.length - 1]!.key, filter)).map((p) => [String(p.t), p]));
  // Each day starts at its local midnight in the quota timezone, so `t` is that instant.
  const points = days.map(({ key, start }) => {
    const p = rows.get(key);
    return { t: new Date(start).toISOString(), rx_bytes: p?.rx_bytes ?? 0, tx_bytes: p?.tx_bytes ?? 0 };
  });
  return { hours, bucket: 'day', points };
}

/**
 * The top consumers of the last `hours` hours: per hour up to a week, per day (in the quota
 * timezone, like the timeseries) beyond, where the hourly rows would be 24 times as many to sum.
 */
export async function topConsumers(store: BandwidthStore, hours: number, nodeId?: number, nowMs = Date.now()): Promise<{ server_id: number; rx_bytes: number; tx_bytes: number }[]> {
  if (hours <= HOURLY_UP_TO) return store.topConsumers(Math.floor(nowMs / 3_600_000) * 3600 - (hours - 1) * 3600, TOP_CONSUMERS, nodeId);
  const tz = (await store.settings()).settings.timezone;
  return store.topConsumersDaily(calendarDays(nowMs, Math.ceil(hours / 24), tz)[0]!.key, TOP_CONSUMERS, nodeId);
}

/** The node cards, from the panel's own records (no node is called). */
export async function nodeCards(ctx: PanelContext, store: BandwidthStore): Promise<Record<string, unknown>[]> {
  const statuses = new Map((await store.nodes()).map((s) => [s.node_id, s]));
  return (await ctx.store.nodes.all()).map((n) => {
    const s = statuses.get(n.id);
    const stats = JSON.parse(s?.cached_stats ?? '{}') as Record<string, unknown>;
    // An offline node's last figures are history, not live: its rates and running containers read 0
    // (its throttled and exceeded counts stay: the node keeps enforcing them while unreachable).
    const live = s?.online === 1;
    return {
      id: n.id,
      name: n.name,
      fqdn: n.fqdn,
      // A row made by heartbeats alone has no registered_at (spec/1 §3: a heartbeat marks it online).
      registered: s !== undefined && s.registered_at !== '',
      online: s?.online === 1,
      api_url: s === undefined || s.api_url === '' ? null : s.api_url,
      version: s === undefined || s.version === '' ? null : s.version,
      last_seen_at: s?.last_seen_at ?? null,
      health_failures: s?.health_failures ?? 0,
      containers: live ? Number(stats.containers ?? 0) : 0,
      rx_rate_bps: live ? Number(stats.rx_rate_bps ?? 0) : 0,
      tx_rate_bps: live ? Number(stats.tx_rate_bps ?? 0) : 0,
      throttled: Number(stats.throttled ?? 0),
      quota_exceeded: Number(stats.quota_exceeded ?? 0),
    };
  });
}

/** Registers the endpoints on the admin scope; runs once at app build. */
export function registerAdminJson(admin: FastifyInstance, ctx: PanelContext, store: BandwidthStore, service: BandwidthService): void {
  admin.get('/admin/bandwidth/api/timeseries', async (req, reply) => {
    const hours = intQuery(req, 'hours', 1, MAX_HOURS);
    const nodeId = intQuery(req, 'node_id', 1, Number.MAX_SAFE_INTEGER);
    const serverId = intQuery(req, 'server_id', 1, Number.MAX_SAFE_INTEGER);
    if (hours === null) return invalid(reply, `hours must be an integer from 1 to ${MAX_HOURS}`);
    if (nodeId === null || serverId === null) return invalid(reply, 'node_id and server_id must be record ids');
    return timeseries(store, hours ?? 24, { nodeId, serverId });
  });
  admin.get('/admin/bandwidth/api/top-consumers', async (req, reply) => {
    const hours = intQuery(req, 'hours', 1, MAX_HOURS);
    const nodeId = intQuery(req, 'node_id', 1, Number.MAX_SAFE_INTEGER);
    if (hours === null) return invalid(reply, `hours must be an integer from 1 to ${MAX_HOURS}`);
    if (nodeId === null) return invalid(reply, 'node_id must be a record id');
    const h = hours ?? 24;
    const rows = await topConsumers(store, h, nodeId);
    const servers = await Promise.all(rows.map((r) => ctx.store.servers.find(r.server_id)));
    return {
      hours: h,
      servers: rows.map((r, i) => ({ server_id: r.server_id, uuid: servers[i]?.uuid ?? null, name: servers[i]?.name ?? null, node_id: servers[i]?.node_id ?? null, rx_bytes: r.rx_bytes, tx_bytes: r.tx_bytes, total_bytes: r.rx_bytes + r.tx_bytes })),
    };
  });
  admin.get('/admin/bandwidth/nodes/poll', async () => ({ nodes: await nodeCards(ctx, store) }));
  admin.get('/admin/bandwidth/nodes/:node/live', async (req, reply) => {
    // Written as query ids are (`0x1`, `1.0` or `1e0` name no node).
    const raw = (req.params as { node: string }).node;
    const id = /^[1-9]\d{0,9}$/.test(raw) ? Number(raw) : 0;
    if (id === 0 || (await ctx.store.nodes.find(id)) === undefined) return reply.code(404).send({ error: 'no such node' });
    return service.live(id);
  });
}

/**
 * The bandwidth addon's behaviour: limits changes (settings, overrides, servers appearing or
 * going away) bump config_version and push the full limits set to the affected online nodes with
 * retries; the stats poll of every online node turns counters into hourly and daily rollups and
 * decides online/offline; the daily prune; quota suspensions with the optional rename.
 */
import { localParts } from '../../../../src/lib/calendar.ts';
import { AppError, errorMessage } from '../../../../src/core/app-error.ts';
import type { LimitsPayload, ServerLimitsEntry } from '../../../../src/contracts/types.ts';
import type { PanelContext } from '../../context.ts';
import { found, now } from '../../services/records.ts';
import { setSuspended } from '../../services/servers.ts';
import { createValidator, NAME, problemsOf, type FieldProblem } from '../../services/validation.ts';
import type { ServerRow } from '../../store/records.ts';
import { limitsPayload } from './limits.ts';
import { fetchStats, pushLimits, unthrottle, type NodeTarget } from '../../services/node-client.ts';
import { EXCEED_ACTIONS, SETTING_SCHEMA, validateSettings, type BandwidthSettings } from './settings.ts';
import type { BandwidthStore, OverrideRow } from './store.ts';

/** The prefix spec/1 §2.8 puts on a quota-suspended server's name and description. */
export const QUOTA_PREFIX = '(Bandwidth Quota Exceeded) ';
/** The daily rollup bucket of an instant: its calendar day in the quota timezone. */
export function dayKey(ms: number, tz: string): string {
  const p = localParts(ms, tz);
  return `${p.year}-${String(p.month).padStart(2, '0')}-${String(p.day).padStart(2, '0')}`;
}

/** Consecutive failed stats polls after which an online node counts as offline. */
export const OFFLINE_AFTER_FAILURES = 3;
/** A node not heard from (heartbeat or poll) for this many poll intervals counts as offline. */
export const OFFLINE_AFTER_INTERVALS = 3;
const PUSH_BACKOFF_MS = [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 60_000];
const LIVE_CACHE_MS = 3_000;
const DAY_MS = 86_400_000;
const HOUR_S = 3600;

const overrideProps = {
  enabled: { type: 'boolean' },
  rx_speed_mbps: SETTING_SCHEMA.default_rx_speed_mbps,
  tx_speed_mbps: SETTING_SCHEMA.default_tx_speed_mbps,
  rx_quota_day_gb: SETTING_SCHEMA.default_rx_quota_day_gb,
  rx_quota_week_gb: SETTING_SCHEMA.default_rx_quota_week_gb,
  rx_quota_month_gb: SETTING_SCHEMA.default_rx_quota_month_gb,
  tx_quota_day_gb: SETTING_SCHEMA.default_tx_quota_day_gb,
  tx_quota_week_gb: SETTING_SCHEMA.default_tx_quota_week_gb,
  tx_quota_month_gb: SETTING_SCHEMA.default_tx_quota_month_gb,
  exceed_action: { enum: EXCEED_ACTIONS },
  throttle_rx_mbps: SETTING_SCHEMA.default_throttle_rx_mbps,
  throttle_tx_mbps: SETTING_SCHEMA.default_throttle_tx_mbps,
};
export type OverrideInput = Omit<OverrideRow, 'server_id' | 'enabled'> & { enabled: boolean };
/** A whole override row (spec/1 §2.9 defaults for omitted fields). */
export const validateOverride = createValidator<OverrideInput>({
  properties: Object.fromEntries(
    Object.entries(overrideProps).map(([k, v]) => [k, { ...v, default: k === 'enabled' ? true : k === 'exceed_action' ? 'throttle' : k.startsWith('throttle_') ? 5 : 0 }]),
  ),
});

/**
 * The problems of a server create request's `bandwidth` object (absent or null: none, the server
 * follows the defaults), each named `bandwidth.<field>`; runs before the server is written.
 */
export function bandwidthInputProblems(bandwidth: unknown): FieldProblem[] {
  if (bandwidth === undefined || bandwidth === null) return [];
  if (typeof bandwidth !== 'object' || Array.isArray(bandwidth)) return [{ field: 'bandwidth', rule: 'type', detail: 'the bandwidth field must be an object' }];
  try {
    validateOverride(bandwidth);
    return [];
  } catch (err) {
    if (!(err instanceof AppError) || err.code !== 'ERR_VALIDATION') throw err;
    return problemsOf(err).map((p) => {
      const field = p.field === '' ? 'bandwidth' : `bandwidth.${p.field}`;
      return { ...p, field, detail: p.detail.replace(p.field === '' ? 'the request' : `the ${p.field} field`, `the ${field} field`) };
    });
  }
}

export interface LiveRates {
  ok: boolean;
  rx_rate_bps: number;
  tx_rate_bps: number;
  throttled: number;
  quota_exceeded: number;
  containers: number;
}

export interface BandwidthService {
  settings(): Promise<{ settings: BandwidthSettings; configVersion: number }>;
  /** Validates and saves the whole settings form; pushes to every online node when something changed. */
  saveSettings(input: unknown): Promise<number | undefined>;
  /** Sets (input) or removes (null) a server's override; pushes to its node when something changed. */
  saveOverride(serverId: number, input: unknown): Promise<number | undefined>;
  limitsFor(nodeId: number): Promise<LimitsPayload>;
  /** A server of the node appeared or went away, or an addon changed its entries: new version, push. */
  serversChanged(nodeId: number): Promise<void>;
  /** The agent of a node that is online and registered (its address and token), else undefined. */
  onlineAgent(nodeId: number): Promise<NodeTarget | undefined>;
  /** Runs the core's nodeStatus hooks for a transition this addon made (went offline, came back); never throws. */
  nodeTransition(nodeId: number, online: boolean, reason: string): Promise<void>;
  /** Pushes the node's full limits now and retries with backoff until it lands or goes stale. */
  schedulePush(nodeId: number): void;
  /** The node-facing suspend: returns whether this call caused the transition. */
  suspendForQuota(nodeId: number, uuid: string, reason: string, ip: string): Promise<boolean>;
  /** The unsuspend hook: takes the quota prefix off again. */
  undoQuotaRename(server: ServerRow): Promise<void>;
  live(nodeId: number): Promise<LiveRates>;
  unthrottle(serverId: number): Promise<boolean>;
  /** One stats poll of every online node (also run by the timer). */
  pollOnce(): Promise<void>;
  prune(): Promise<number>;
  start(): void;
  stop(): Promise<void>;
}

/** Creates the service; timers start with start(). */
export function createBandwidthService(ctx: PanelContext, store: BandwidthStore): BandwidthService {
  const log = ctx.logger.child({ addon: 'bandwidth' });
  const pushing = new Set<number>();
  const liveCache = new Map<number, { at: number; value: Promise<LiveRates> }>();
  const timers = new Set<NodeJS.Timeout>();
  let stopped = false;
  let polling: Promise<void> | undefined;
  let wakePoll: (() => void) | undefined;

  async function target(nodeId: number): Promise<NodeTarget | undefined> {
    const node = await ctx.store.nodes.find(nodeId);
    const status = await store.node(nodeId);
    // A node known only from heartbeats (it never registered) has no address to call yet.
    if (node === undefined || status === undefined || status.api_url === '') return undefined;
    return { name: node.name, apiUrl: status.api_url, token: ctx.appKey.decrypt(node.token_encrypted) };
  }

  async function limitsFor(nodeId: number): Promise<LimitsPayload> {
    const { settings, configVersion } = await store.settings();
    const servers = await ctx.store.servers.all({ node_id: nodeId });
    const extras = new Map<number, Partial<ServerLimitsEntry>>();
    for (const hook of ctx.hooks.limitsEntries ?? []) {
      for (const [id, fields] of await hook(servers)) extras.set(id, { ...extras.get(id), ...fields });
    }
    return limitsPayload(configVersion, settings, servers, await store.overrides(servers.map((s) => s.id)), extras);
  }

  async function nodeTransition(nodeId: number, online: boolean, reason: string): Promise<void> {
    const node = await ctx.store.nodes.find(nodeId);
    if (node === undefined) return;
    if (online) log.info({ node: node.name }, 'node %s is online (%s)', node.name, reason);
    for (const hook of ctx.hooks.nodeStatus ?? []) {
      try {
        await hook(node, online, reason);
      } catch (err) {
        log.error({ err, node: node.name }, 'a node %s hook of node %s failed', online ? 'online' : 'offline', node.name);
      }
    }
  }

  async function markOffline(nodeId: number, reason: string): Promise<void> {
    if (await store.setOffline(nodeId)) await nodeTransition(nodeId, false, reason);
  }

  const sleep = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      const t = setTimeout(() => {
        timers.delete(t);
        resolve();
      }, ms);
      timers.add(t);
    });

  /** One push loop per node: a change made while it runs is picked up by the same loop (it re-reads the version). */
  async function pushLoop(nodeId: number): Promise<void> {
    if (pushing.has(nodeId)) return;
    pushing.add(nodeId);
    try {
      for (let attempt = 0; !stopped; attempt++) {
        const status = await store.node(nodeId);
        if (status === undefined || status.online !== 1) return; // an offline node pulls on its next heartbeat
        const payload = await limitsFor(nodeId);
        const node = await target(nodeId);
        if (node === undefined) return;
        try {
          const r = await pushLimits(node, payload);
          log.info({ node: node.name, config_version: payload.config_version, ...r }, 'pushed limits to node %s', node.name);
          if ((await store.configVersion()) <= payload.config_version) return;
          attempt = -1;
        } catch (err) {
          const wait = PUSH_BACKOFF_MS[Math.min(attempt, PUSH_BACKOFF_MS.length - 1)] ?? 60_000;
          log.warn({ node: node.name, err: errorMessage(err) }, 'limits push to node %s failed; retrying in %d s', node.name, wait / 1000);
          await sleep(wait);
        }
      }
    } finally {
      pushing.delete(nodeId);
    }
  }

  function schedulePush(nodeId: number): void {
    void pushLoop(nodeId).catch((err: unknown) => log.error({ err, node_id: nodeId }, 'limits push loop failed'));
  }

  async function pushAllOnline(): Promise<void> {
    for (const n of await store.nodes()) if (n.online === 1) schedulePush(n.node_id);
  }

  async function pollNode(nodeId: number, intervalS: number, tz: string): Promise<void> {
    const node = await target(nodeId);
    if (node === undefined) {
      // Not pollable (heartbeats only): offline once it has been silent for a few intervals.
      const status = await store.node(nodeId);
      const silentMs = status === undefined ? 0 : Date.now() - Date.parse(status.last_seen_at);
      if (silentMs > OFFLINE_AFTER_INTERVALS * intervalS * 1000) await markOffline(nodeId, `no heartbeat for ${Math.round(silentMs / 1000)} s`);
      return;
    }
    try {
      const stats = await fetchStats(node);
      const servers = await ctx.store.servers.all({ node_id: nodeId });
      const byUuid = new Map(servers.map((s) => [s.uuid, s.id]));
      const totals = stats.servers.flatMap((s) => {
        const id = byUuid.get(s.uuid);
        return id === undefined ? [] : [{ server_id: id, rx_total: s.rx_bytes_total, tx_total: s.tx_bytes_total }];
      });
      const t = Date.now();
      await store.addTotals(nodeId, totals, Math.floor(t / 1000 / HOUR_S) * HOUR_S, dayKey(t, tz));
      const sum = (f: (s: (typeof stats.servers)[number]) => number): number => stats.servers.reduce((a, s) => a + f(s), 0);
      const cameBack = await store.seen(nodeId, now(), {
        containers: stats.servers.filter((s) => s.online).length,
        rx_rate_bps: sum((s) => s.rx_rate_bps),
        tx_rate_bps: sum((s) => s.tx_rate_bps),
        throttled: stats.servers.filter((s) => s.throttled).length,
        quota_exceeded: stats.servers.filter((s) => s.exceeded.length > 0).length,
        servers: stats.servers.map((s) => ({ uuid: s.uuid, rx_rate_bps: s.rx_rate_bps, tx_rate_bps: s.tx_rate_bps, throttled: s.throttled, exceeded: s.exceeded, rx_day: s.rx_used_day_bytes, tx_day: s.tx_used_day_bytes, rx_week: s.rx_used_week_bytes, tx_week: s.tx_used_week_bytes, rx_month: s.rx_used_month_bytes, tx_month: s.tx_used_month_bytes })),
        polled_at: now(),
      });
      if (cameBack) await nodeTransition(nodeId, true, 'a stats poll succeeded again');
    } catch (err) {
      const failures = await store.pollFailed(nodeId);
      const status = await store.node(nodeId);
      const silentMs = status === undefined ? Infinity : Date.now() - Date.parse(status.last_seen_at);
      if (failures >= OFFLINE_AFTER_FAILURES || silentMs > OFFLINE_AFTER_INTERVALS * intervalS * 1000) {
        const why = failures >= OFFLINE_AFTER_FAILURES ? `${failures} failed stats polls` : `not heard from for ${Math.round(silentMs / 1000)} s`;
        log.warn({ node: node.name, failures, err: errorMessage(err) }, 'node %s is offline (%s)', node.name, why);
        await markOffline(nodeId, `${why}: ${errorMessage(err)}`);
      } else {
        log.warn({ node: node.name, failures, err: errorMessage(err) }, 'stats poll of node %s failed', node.name);
      }
    }
  }

  async function pollOnce(): Promise<void> {
    const { settings } = await store.settings();
    const nodes = (await store.nodes()).filter((n) => n.online === 1);
    await Promise.all(nodes.map((n) => pollNode(n.node_id, settings.poll_interval_seconds, settings.timezone)));
  }

  async function prune(): Promise<number> {
    const { settings } = await store.settings();
    const t = Date.now();
    const cutoffDay = new Date(t - settings.retention_days_daily * DAY_MS).toISOString().slice(0, 10);
    const removed = await store.prune(Math.floor((t - settings.retention_days_hourly * DAY_MS) / 1000), cutoffDay, new Date(t - settings.events_retention_days * DAY_MS).toISOString());
    if (removed > 0) log.info({ removed }, 'pruned %d old rollups and events', removed);
    return removed;
  }

  async function pollLoop(): Promise<void> {
    while (!stopped) {
      const { settings } = await store.settings();
      // saveSettings wakes this wait when the interval changes, so a new interval applies at once
      // instead of after the old one (60 s at a fresh start, up to an hour) has run out.
      await new Promise<void>((resolve) => {
        wakePoll = resolve;
        void sleep(settings.poll_interval_seconds * 1000).then(resolve);
      });
      wakePoll = undefined;
      if (stopped) return;
      polling = pollOnce().catch((err: unknown) => log.error({ err }, 'stats poll failed'));
      await polling;
    }
  }

  async function pruneLoop(): Promise<void> {
    while (!stopped) {
      await prune().catch((err: unknown) => log.error({ err }, 'prune failed'));
      await sleep(DAY_MS);
    }
  }

  return {
    settings: () => store.settings(),
    async saveSettings(input) {
      const next = validateSettings(input);
      const interval = (await store.settings()).settings.poll_interval_seconds;
      const version = await store.saveSettings(next);
      if (version !== undefined) {
        log.info({ config_version: version }, 'bandwidth settings changed (config_version %d)', version);
        await pushAllOnline();
        if (next.poll_interval_seconds !== interval) wakePoll?.();
      }
      return version;
    },
    async saveOverride(serverId, input) {
      const server = found(await ctx.store.servers.find(serverId), 'server');
      let row: Omit<OverrideRow, 'server_id'> | null = null;
      if (input !== null) {
        const v = validateOverride(input);
        row = { ...v, enabled: v.enabled ? 1 : 0 };
      }
      const version = await store.saveOverride(serverId, row);
      if (version !== undefined) schedulePush(server.node_id);
      return version;
    },
    limitsFor,
    async serversChanged(nodeId) {
      await store.bumpVersion();
      schedulePush(nodeId);
    },
    schedulePush,
    async onlineAgent(nodeId) {
      return (await store.node(nodeId))?.online === 1 ? target(nodeId) : undefined;
    },
    nodeTransition,
    async suspendForQuota(nodeId, uuid, reason, ip) {
      const server = await ctx.store.servers.findBy({ uuid });
      if (server === undefined || server.node_id !== nodeId) throw new AppError('ERR_UNKNOWN_SERVER', 'unknown server, or a server of another node', { status: 404 });
      if (server.suspended === 1) return false;
      try {
        // The node asked: the entry names it and the reason the owner sees in the activity log.
        await setSuspended(ctx, server.id, true, { type: 'node', id: nodeId }, ip, { reason: reason.slice(0, 1000), source: 'bandwidth quota' });
        const { settings } = await store.settings();
        if (settings.rename_on_quota_suspend) {
          // A name the prefix would push past the 191 characters every edit allows keeps its name
          // (its description still carries the prefix), so the server stays editable.
          const prefixed = `${QUOTA_PREFIX}${server.name}`;
          await ctx.store.servers.update(server.id, {
            name: server.name.startsWith(QUOTA_PREFIX) || prefixed.length > NAME.maxLength ? server.name : prefixed,
            description: server.description.startsWith(QUOTA_PREFIX) ? server.description : `${QUOTA_PREFIX}${server.description}`,
            updated_at: now(),
          });
        }
      } catch (err) {
        log.error({ err, server: uuid }, 'quota suspension of %s failed', uuid);
        throw new AppError('ERR_SUSPEND_FAILED', 'the suspension service failed', { status: 500, cause: err });
      }
      await store.addEvents(nodeId, [{ server_id: server.id, server_uuid: uuid, type: 'suspended', period: null, direction: null, message: reason.slice(0, 1000), occurred_at: now() }], now());
      log.info({ server: uuid, reason }, 'suspended server %s for exceeding its bandwidth quota', server.name);
      return true;
    },
    async undoQuotaRename(server) {
      const strip = (t: string): string => (t.startsWith(QUOTA_PREFIX) ? t.slice(QUOTA_PREFIX.length) : t);
      if (strip(server.name) === server.name && strip(server.description) === server.description) return;
      await ctx.store.servers.update(server.id, { name: strip(server.name), description: strip(server.description), updated_at: now() });
    },
    live(nodeId) {
      const cached = liveCache.get(nodeId);
      if (cached !== undefined && Date.now() - cached.at < LIVE_CACHE_MS) return cached.value;
      const value = (async (): Promise<LiveRates> => {
        const node = await target(nodeId);
        if (node === undefined) return { ok: false, rx_rate_bps: 0, tx_rate_bps: 0, throttled: 0, quota_exceeded: 0, containers: 0 };
        try {
          const stats = await fetchStats(node);
          return {
            ok: true,
            rx_rate_bps: stats.servers.reduce((a, s) => a + s.rx_rate_bps, 0),
            tx_rate_bps: stats.servers.reduce((a, s) => a + s.tx_rate_bps, 0),
            throttled: stats.servers.filter((s) => s.throttled).length,
            quota_exceeded: stats.servers.filter((s) => s.exceeded.length > 0).length,
            containers: stats.servers.filter((s) => s.online).length,
          };
        } catch {
          return { ok: false, rx_rate_bps: 0, tx_rate_bps: 0, throttled: 0, quota_exceeded: 0, containers: 0 };
        }
      })();
      liveCache.set(nodeId, { at: Date.now(), value });
      return value;
    },
    async unthrottle(serverId) {
      const server = found(await ctx.store.servers.find(serverId), 'server');
      const node = await target(server.node_id);
      if (node === undefined) throw new AppError('ERR_NODE_UNREACHABLE', 'the server\'s node has not registered with the panel', { status: 409 });
      return (await unthrottle(node, server.uuid)).unthrottled;
    },
    pollOnce,
    prune,
    start() {
      void pollLoop();
      void pruneLoop();
    },
    async stop() {
      stopped = true;
      for (const t of timers) clearTimeout(t);
      timers.clear();
      wakePoll?.();
      await polling;
    },
  };
}

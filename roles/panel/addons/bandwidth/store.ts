/**
 * The bandwidth addon's records: settings and config_version, per-server overrides, the panel's
 * view of each node agent, enforcement events and hourly/daily usage rollups. An interface with
 * a SQLite driver (the panel's default); every change that must be atomic (a settings save and
 * its config_version bump, a batch of usage deltas) is one method and one transaction.
 */
import type { Database } from '../../../../src/lib/sqlite.ts';
import { promisify, type Async } from '../../store/repository.ts';
import type { ServerLimitsEntry } from '../../../../src/contracts/types.ts';
import { parseSettings, type BandwidthSettings } from './settings.ts';

/**
 * A per-server override row (spec/1 §2.9): the contract's limits entry, keyed by server, enabled
 * as 0/1; without `smart`, which the firewall addon adds to the entry (PanelHooks.limitsEntries).
 */
export type OverrideRow = Omit<Required<ServerLimitsEntry>, 'uuid' | 'enabled' | 'smart'> & { server_id: number; enabled: number };

export interface NodeStatusRow {
  node_id: number;
  api_url: string;
  version: string;
  hostname: string;
  registered_at: string;
  last_seen_at: string;
  health_failures: number;
  online: number;
  cached_stats: string;
}

export interface StoredEvent {
  server_id: number | null;
  server_uuid: string;
  type: string;
  period: string | null;
  direction: string | null;
  message: string;
  occurred_at: string;
}

export interface EventRow extends StoredEvent {
  id: number;
  node_id: number;
  received_at: string;
}

export interface Totals {
  server_id: number;
  rx_total: number;
  tx_total: number;
}

export interface SeriesPoint {
  t: number | string;
  rx_bytes: number;
  tx_bytes: number;
}

export interface UsageFilter {
  nodeId?: number | undefined;
  serverId?: number | undefined;
}

/** The synchronous SQLite driver's methods; services use the asynchronous BandwidthStore. */
export interface BandwidthStoreSync {
  settings(): { settings: BandwidthSettings; configVersion: number };
  configVersion(): number;
  /** Writes the settings and bumps config_version when something changed; returns the new version or undefined. */
  saveSettings(next: BandwidthSettings): number | undefined;
  override(serverId: number): OverrideRow | undefined;
  overrides(serverIds: readonly number[]): Map<number, OverrideRow>;
  /** Creates, replaces (`row`) or deletes (null) a server's override; bumps and returns the version only when it changed something. */
  saveOverride(serverId: number, row: Omit<OverrideRow, 'server_id'> | null): number | undefined;
  /** Bumps config_version (a server of a node appeared or went away). */
  bumpVersion(): number;
  node(nodeId: number): NodeStatusRow | undefined;
  nodes(): NodeStatusRow[];
  /** Register: api_url and version upserted, failures reset, online, last_seen_at stamped; true when the node was not online before. */
  register(nodeId: number, v: { api_url: string; version: string; hostname: string }, now: string): boolean;
  /** Heartbeat or a good stats poll: online, failures reset, last_seen_at; cached_stats merged when given. True when the node was offline before. */
  seen(nodeId: number, now: string, stats?: Record<string, unknown>): boolean;
  /**
   * A heartbeat (spec/1 §3: online, last_seen_at stamped, cached_stats refreshed), also from a node
   * that never registered: its row is created without api_url or registered_at (nothing is pushed
   * to it or polled until it registers). True when the node was not online before.
   */
  heartbeat(nodeId: number, now: string, stats: Record<string, unknown>): boolean;
  /** A failed stats poll; returns the failure count. */
  pollFailed(nodeId: number): number;
  /** True when the node was online (this call made the transition). */
  setOffline(nodeId: number): boolean;
  /** Inserts events in one transaction, skipping any already stored (same node and content); returns how many were new. */
  addEvents(nodeId: number, events: readonly StoredEvent[], now: string): number;
  events(opts: { page: number; perPage: number; serverId?: number }): { items: EventRow[]; total: number };
  /**
   * Turns cumulative counters into usage: the delta since the last totals (a counter that went
   * backwards is a reset: its whole value is new usage) is added to the hour and day buckets.
   * One transaction per poll.
   */
  addTotals(nodeId: number, totals: readonly Totals[], hour: number, day: string): void;
  /** Fleet (or filtered) usage per hour (t = unix seconds of the hour) in [fromHour, toHour]. */
  hourlySeries(fromHour: number, toHour: number, f: UsageFilter): SeriesPoint[];
  /** Usage per day (t = YYYY-MM-DD) in [fromDay, toDay]. */
  dailySeries(fromDay: string, toDay: string, f: UsageFilter): SeriesPoint[];
  /** The `limit` servers with the most rx+tx bytes since `fromHour`. */
  topConsumers(fromHour: number, limit: number, nodeId?: number): { server_id: number; rx_bytes: number; tx_bytes: number }[];
  /** The same from the daily rollups since `fromDay` (YYYY-MM-DD): long ranges read a 24th of the rows. */
  topConsumersDaily(fromDay: string, limit: number, nodeId?: number): { server_id: number; rx_bytes: number; tx_bytes: number }[];
  /** Deletes rollups and events older than the given bounds; returns rows deleted. */
  prune(hourlyBefore: number, dailyBefore: string, eventsBefore: string): number;
}

export type BandwidthStore = Async<BandwidthStoreSync>;

/** The SQLite driver; runs once at panel start. */
export function createBandwidthStore(database: Database): BandwidthStore {
  return promisify(createSqliteBandwidthStore(database));
}

function createSqliteBandwidthStore(database: Database): BandwidthStoreSync {
  const { db } = database;
  const settingRows = db.prepare('SELECT key, value FROM bandwidth_settings');
  const setSetting = db.prepare('UPDATE bandwidth_settings SET value = ? WHERE key = ?');
  const bump = db.prepare("UPDATE bandwidth_settings SET value = CAST(value AS INTEGER) + 1 WHERE key = 'config_version' RETURNING CAST(value AS INTEGER) AS v");
  const readVersion = db.prepare("SELECT CAST(value AS INTEGER) AS v FROM bandwidth_settings WHERE key = 'config_version'");
  const getOverride = db.prepare('SELECT * FROM bandwidth_overrides WHERE server_id = ?');
  const deleteOverride = db.prepare('DELETE FROM bandwidth_overrides WHERE server_id = ?');
  const upsertOverride = db.prepare(`INSERT INTO bandwidth_overrides (server_id, enabled, rx_speed_mbps, tx_speed_mbps, rx_quota_day_gb, rx_quota_week_gb, rx_quota_month_gb,
      tx_quota_day_gb, tx_quota_week_gb, tx_quota_month_gb, exceed_action, throttle_rx_mbps, throttle_tx_mbps)
    VALUES (:server_id, :enabled, :rx_speed_mbps, :tx_speed_mbps, :rx_quota_day_gb, :rx_quota_week_gb, :rx_quota_month_gb,
      :tx_quota_day_gb, :tx_quota_week_gb, :tx_quota_month_gb, :exceed_action, :throttle_rx_mbps, :throttle_tx_mbps)
    ON CONFLICT(server_id) DO UPDATE SET enabled = excluded.enabled, rx_speed_mbps = excluded.rx_speed_mbps, tx_speed_mbps = excluded.tx_speed_mbps,
      rx_quota_day_gb = excluded.rx_quota_day_gb, rx_quota_week_gb = excluded.rx_quota_week_gb, rx_quota_month_gb = excluded.rx_quota_month_gb,
      tx_quota_day_gb = excluded.tx_quota_day_gb, tx_quota_week_gb = excluded.tx_quota_week_gb, tx_quota_month_gb = excluded.tx_quota_month_gb,
      exceed_action = excluded.exceed_action, throttle_rx_mbps = excluded.throttle_rx_mbps, throttle_tx_mbps = excluded.throttle_tx_mbps`);
  const getNode = db.prepare('SELECT * FROM bandwidth_nodes WHERE node_id = ?');
  const register = db.prepare(`INSERT INTO bandwidth_nodes (node_id, api_url, version, hostname, registered_at, last_seen_at, health_failures, online)
    VALUES (?, ?, ?, ?, ?, ?, 0, 1)
    ON CONFLICT(node_id) DO UPDATE SET api_url = excluded.api_url, version = excluded.version, hostname = excluded.hostname,
      registered_at = excluded.registered_at, last_seen_at = excluded.last_seen_at, health_failures = 0, online = 1`);
  const seen = db.prepare('UPDATE bandwidth_nodes SET last_seen_at = ?, health_failures = 0, online = 1 WHERE node_id = ?');
  const firstSeen = db.prepare("INSERT INTO bandwidth_nodes (node_id, api_url, registered_at, last_seen_at, health_failures, online) VALUES (?, '', '', ?, 0, 1) ON CONFLICT(node_id) DO NOTHING");
  const setStats = db.prepare('UPDATE bandwidth_nodes SET cached_stats = ? WHERE node_id = ?');
  const failed = db.prepare('UPDATE bandwidth_nodes SET health_failures = health_failures + 1 WHERE node_id = ? RETURNING health_failures AS n');
  const offline = db.prepare('UPDATE bandwidth_nodes SET online = 0 WHERE node_id = ? AND online = 1');
  const isOnline = db.prepare('SELECT online FROM bandwidth_nodes WHERE node_id = ?');
  const wasOnline = (nodeId: number): boolean => (isOnline.get(nodeId) as { online: number } | undefined)?.online === 1;
  const addEvent = db.prepare(`INSERT OR IGNORE INTO bandwidth_events (node_id, server_id, server_uuid, type, period, direction, message, occurred_at, received_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`);
  const lastTotals = db.prepare('SELECT rx_total, tx_total FROM bandwidth_counters WHERE server_id = ?');
  const setTotals = db.prepare('INSERT INTO bandwidth_counters (server_id, rx_total, tx_total) VALUES (?, ?, ?) ON CONFLICT(server_id) DO UPDATE SET rx_total = excluded.rx_total, tx_total = excluded.tx_total');
  const addHourly = db.prepare(`INSERT INTO bandwidth_hourly (hour, server_id, node_id, rx_bytes, tx_bytes) VALUES (?, ?, ?, ?, ?)
    ON CONFLICT(hour, server_id) DO UPDATE SET rx_bytes = rx_bytes + excluded.rx_bytes, tx_bytes = tx_bytes + excluded.tx_bytes, node_id = excluded.node_id`);
  const addDaily = db.prepare(`INSERT INTO bandwidth_daily (day, server_id, node_id, rx_bytes, tx_bytes) VALUES (?, ?, ?, ?, ?)
    ON CONFLICT(day, server_id) DO UPDATE SET rx_bytes = rx_bytes + excluded.rx_bytes, tx_bytes = tx_bytes + excluded.tx_bytes, node_id = excluded.node_id`);

  const configVersion = (): number => (readVersion.get() as { v: number }).v;
  const readSettings = (): BandwidthSettings => parseSettings(Object.fromEntries((settingRows.all() as { key: string; value: string }[]).map((r) => [r.key, r.value])));
  const encode = (v: unknown): string => (typeof v === 'boolean' ? (v ? '1' : '0') : String(v));
  const bumpVersion = (): number => (bump.get() as { v: number }).v;
  const markSeen = (nodeId: number, now: string, stats?: Record<string, unknown>): boolean =>
    database.transaction(() => {
      const before = wasOnline(nodeId);
      seen.run(now, nodeId);
      if (stats !== undefined) {
        const row = getNode.get(nodeId) as NodeStatusRow | undefined;
        const merged = { ...(JSON.parse(row?.cached_stats ?? '{}') as Record<string, unknown>), ...stats };
        setStats.run(JSON.stringify(merged), nodeId);
      }
      return !before;
    });
  const usageWhere = (f: UsageFilter): { sql: string; args: number[] } => {
    const parts: string[] = [];
    const args: number[] = [];
    if (f.nodeId !== undefined) {
      parts.push('node_id = ?');
      args.push(f.nodeId);
    }
    if (f.serverId !== undefined) {
      parts.push('server_id = ?');
      args.push(f.serverId);
    }
    return { sql: parts.map((p) => ` AND ${p}`).join(''), args };
  };

  return {
    settings: () => database.transaction(() => ({ settings: readSettings(), configVersion: configVersion() })),
    configVersion,
    saveSettings(next) {
      return database.transaction(() => {
        const current = readSettings();
        const changed = (Object.keys(next) as (keyof BandwidthSettings)[]).filter((k) => encode(current[k]) !== encode(next[k]));
        if (changed.length === 0) return undefined;
        for (const k of changed) setSetting.run(encode(next[k]), k);
        return bumpVersion();
      });
    },
    override: (serverId) => getOverride.get(serverId) as OverrideRow | undefined,
    overrides(serverIds) {
      const out = new Map<number, OverrideRow>();
      for (const id of serverIds) {
        const row = getOverride.get(id) as OverrideRow | undefined;
        if (row !== undefined) out.set(id, row);
      }
      return out;
    },
    saveOverride(serverId, row) {
      return database.transaction(() => {
        const current = getOverride.get(serverId) as OverrideRow | undefined;
        if (row === null) {
          if (current === undefined) return undefined;
          deleteOverride.run(serverId);
          return bumpVersion();
        }
        const next = { server_id: serverId, ...row };
        if (current !== undefined && (Object.keys(next) as (keyof OverrideRow)[]).every((k) => String(current[k]) === String(next[k]))) return undefined;
        upsertOverride.run(next);
        return bumpVersion();
      });
    },
    bumpVersion: () => database.transaction(bumpVersion),
    node: (nodeId) => getNode.get(nodeId) as NodeStatusRow | undefined,
    nodes: () => db.prepare('SELECT * FROM bandwidth_nodes ORDER BY node_id').all() as unknown as NodeStatusRow[],
    register(nodeId, v, now) {
      return database.transaction(() => {
        const before = wasOnline(nodeId);
        register.run(nodeId, v.api_url, v.version, v.hostname, now, now);
        return !before;
      });
    },
    seen: markSeen,
    heartbeat(nodeId, now, stats) {
      return database.transaction(() => {
        const before = wasOnline(nodeId);
        firstSeen.run(nodeId, now);
        markSeen(nodeId, now, stats);
        return !before;
      });
    },
    pollFailed: (nodeId) => (failed.get(nodeId) as { n: number } | undefined)?.n ?? 0,
    setOffline: (nodeId) => offline.run(nodeId).changes > 0,
    addEvents(nodeId, events, now) {
      return database.transaction(() => events.reduce((n, e) => n + Number(addEvent.run(nodeId, e.server_id, e.server_uuid, e.type, e.period, e.direction, e.message, e.occurred_at, now).changes), 0));
    },
    events({ page, perPage, serverId }) {
      const where = serverId === undefined ? '' : ' WHERE server_id = ?';
      const args = serverId === undefined ? [] : [serverId];
      const total = (db.prepare(`SELECT COUNT(*) AS n FROM bandwidth_events${where}`).get(...args) as { n: number }).n;
      const items = db.prepare(`SELECT * FROM bandwidth_events${where} ORDER BY id DESC LIMIT ? OFFSET ?`).all(...args, perPage, (page - 1) * perPage) as unknown as EventRow[];
      return { items, total };
    },
    addTotals(nodeId, totals, hour, day) {
      database.transaction(() => {
        for (const t of totals) {
          const last = lastTotals.get(t.server_id) as { rx_total: number; tx_total: number } | undefined;
          const delta = (now: number, before: number | undefined): number => (before === undefined ? 0 : now >= before ? now - before : now);
          const rx = delta(t.rx_total, last?.rx_total);
          const tx = delta(t.tx_total, last?.tx_total);
          setTotals.run(t.server_id, t.rx_total, t.tx_total);
          if (rx === 0 && tx === 0) continue;
          addHourly.run(hour, t.server_id, nodeId, rx, tx);
          addDaily.run(day, t.server_id, nodeId, rx, tx);
        }
      });
    },
    hourlySeries(fromHour, toHour, f) {
      const w = usageWhere(f);
      return db
        .prepare(`SELECT hour AS t, SUM(rx_bytes) AS rx_bytes, SUM(tx_bytes) AS tx_bytes FROM bandwidth_hourly WHERE hour BETWEEN ? AND ?${w.sql} GROUP BY hour ORDER BY hour`)
        .all(fromHour, toHour, ...w.args) as unknown as SeriesPoint[];
    },
    dailySeries(fromDay, toDay, f) {
      const w = usageWhere(f);
      return db
        .prepare(`SELECT day AS t, SUM(rx_bytes) AS rx_bytes, SUM(tx_bytes) AS tx_bytes FROM bandwidth_daily WHERE day BETWEEN ? AND ?${w.sql} GROUP BY day ORDER BY day`)
        .all(fromDay, toDay, ...w.args) as unknown as SeriesPoint[];
    },
    // `GROUP BY +server_id`: with the bare column SQLite walks the whole (server_id, hour) index to
    // get the groups in order and looks every row of every hour up in the table (11-25 s at 10,000
    // servers x 90 days, scripts/bench/panel.ts); the unary plus makes it read only the time range
    // through the primary key and group in a temporary b-tree.
    topConsumers(fromHour, limit, nodeId) {
      const w = usageWhere({ nodeId });
      return db
        .prepare(`SELECT server_id, SUM(rx_bytes) AS rx_bytes, SUM(tx_bytes) AS tx_bytes FROM bandwidth_hourly WHERE hour >= ?${w.sql} GROUP BY +server_id ORDER BY SUM(rx_bytes) + SUM(tx_bytes) DESC LIMIT ?`)
        .all(fromHour, ...w.args, limit) as unknown as { server_id: number; rx_bytes: number; tx_bytes: number }[];
    },
    topConsumersDaily(fromDay, limit, nodeId) {
      const w = usageWhere({ nodeId });
      return db
        .prepare(`SELECT server_id, SUM(rx_bytes) AS rx_bytes, SUM(tx_bytes) AS tx_bytes FROM bandwidth_daily WHERE day >= ?${w.sql} GROUP BY +server_id ORDER BY SUM(rx_bytes) + SUM(tx_bytes) DESC LIMIT ?`)
        .all(fromDay, ...w.args, limit) as unknown as { server_id: number; rx_bytes: number; tx_bytes: number }[];
    },
    prune(hourlyBefore, dailyBefore, eventsBefore) {
      return database.transaction(
        () =>
          Number(db.prepare('DELETE FROM bandwidth_hourly WHERE hour < ?').run(hourlyBefore).changes) +
          Number(db.prepare('DELETE FROM bandwidth_daily WHERE day < ?').run(dailyBefore).changes) +
          Number(db.prepare('DELETE FROM bandwidth_events WHERE received_at < ?').run(eventsBefore).changes),
      );
    },
  };
}

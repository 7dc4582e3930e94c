/**
 * The firewall alerts' records: settings, the SMART grant and owner choices per server, the pull
 * cursor of each node, the attack events with their acknowledgement, the mitigation in force per
 * server, the offline incidents of nodes, and the alert outbox with its per-destination gates. An
 * interface with a SQLite driver, asynchronous like the core's repositories; what must be atomic
 * (a page of pulled events with its alerts and the node's cursor, an incident change with its
 * alert) is one method and one transaction.
 */
import type { Database } from '../../../../src/lib/sqlite.ts';
import type { SmartEvent } from '../../../../src/contracts/types.ts';
import { promisify, type Async, type Page } from '../../store/repository.ts';
import type { NodeIncident } from './node-incidents.ts';
import type { WebhookStyle } from './settings.ts';

/** A server's SMART record; a server without one is not granted, not enabled, has no webhook. */
export interface SmartRow {
  server_id: number;
  granted: number;
  granted_by: number | null;
  granted_at: string | null;
  enabled: number;
  /** Encrypted with the app key; '' = none. */
  webhook_url: string;
  webhook_style: WebhookStyle;
  updated_at: string;
}

export interface EventRow {
  id: number;
  node_id: number;
  stream: string;
  agent_id: number;
  incident: number;
  server_id: number;
  type: SmartEvent['type'];
  level: number;
  occurred_at: string;
  started_at: string;
  ended_at: string | null;
  pps: number;
  bps: number;
  peak_pps: number;
  peak_bps: number;
  baseline_pps: number;
  baseline_bps: number;
  ratio: number;
  action: SmartEvent['mitigation']['action'];
  cap_mbps: number | null;
  message: string;
  received_at: string;
  acknowledged_by: number | null;
  acknowledged_at: string | null;
}

export interface MitigationRow {
  server_id: number;
  node_id: number;
  stream: string;
  incident: number;
  cap_mbps: number | null;
  since: string;
}

export interface Cursor {
  stream: string;
  last_id: number;
}

/** An alert to queue: its destination (`admin`, `owner:<server id>`, `email:<server id>`), what it is about, and the notice as JSON. */
export interface OutboxInput {
  destination: string;
  kind: 'smart' | 'node';
  server_id: number | null;
  level: number | null;
  notice: string;
}

export interface OutboxRow extends OutboxInput {
  id: number;
  created_at: string;
}

export interface Gate {
  destination: string;
  failures: number;
  not_before: string;
}

/** One pulled event of a known server, with the alerts it causes when it is new. */
export interface PulledEvent {
  server_id: number;
  event: SmartEvent;
  alerts: OutboxInput[];
}

export interface EventQuery {
  serverId?: number;
  unacknowledged?: boolean;
  page: number;
  perPage: number;
}

/** The synchronous SQLite driver's methods; services use the asynchronous FirewallStore. */
export interface FirewallStoreSync {
  settingRows(): Record<string, string>;
  /** Writes every setting in one transaction. */
  saveSettings(rows: readonly [string, string][]): void;
  smart(serverId: number): SmartRow | undefined;
  smartOf(serverIds: readonly number[]): Map<number, SmartRow>;
  /** Creates or changes a server's SMART record; returns it. */
  saveSmart(serverId: number, change: Partial<Omit<SmartRow, 'server_id'>>, at: string): SmartRow;
  cursor(nodeId: number): Cursor | undefined;
  /**
   * Stores one page of a node's pull in one transaction: the new events (one already stored,
   * same node, stream and agent id, is skipped with its alerts), the incidents' end times, the
   * mitigation state, the alerts of the new events and the cursor. A stream other than the
   * stored cursor's clears the node's mitigations of the old stream (that store is gone).
   * Returns the events that were new.
   */
  storePage(nodeId: number, cursor: Cursor, events: readonly PulledEvent[], at: string): SmartEvent[];
  events(q: EventQuery): Page<EventRow>;
  event(id: number): EventRow | undefined;
  /** The servers that have events, by id (the admin filter's choices). */
  eventServers(): number[];
  /** Acknowledges once: a second call keeps the first acknowledgement. Undefined when there is no such event. */
  acknowledge(id: number, userId: number, at: string): EventRow | undefined;
  mitigations(serverIds: readonly number[]): Map<number, MitigationRow>;
  nodeIncident(nodeId: number): NodeIncident | undefined;
  nodeIncidents(): (NodeIncident & { node_id: number })[];
  /** Saves (or with null ends) a node's incident and queues its alerts, in one transaction. */
  saveNodeIncident(nodeId: number, incident: NodeIncident | null, alerts: readonly OutboxInput[], at: string): void;
  enqueue(alerts: readonly OutboxInput[], at: string): void;
  /** Destinations with waiting alerts, and their gates. */
  destinations(): { destination: string; not_before: string | null; failures: number }[];
  /** The oldest `limit` waiting alerts of a destination. */
  pending(destination: string, limit: number): OutboxRow[];
  /** Deletes the destination's alerts up to id `covers` and opens its gate; returns how many. */
  done(destination: string, covers: number): number;
  /** A failed delivery: the gate closes until `notBefore`; returns the failures in a row. */
  failed(destination: string, notBefore: string): number;
  /** Every destination's waiting alerts in all (the settings page shows it). */
  outboxSize(): number;
}

export type FirewallStore = Async<FirewallStoreSync>;

/** The SQLite driver; runs once at panel start. */
export function createFirewallStore(database: Database): FirewallStore {
  return promisify(createSqliteFirewallStore(database));
}

/** RFC 3339 in one spelling (UTC with milliseconds), so times sort and compare as text; unreadable text is kept as sent. */
function canonical(t: string): string {
  const ms = Date.parse(t);
  return Number.isNaN(ms) ? t : new Date(ms).toISOString();
}

function createSqliteFirewallStore(database: Database): FirewallStoreSync {
  const { db } = database;
  const settingRows = db.prepare('SELECT key, value FROM firewall_settings');
  const setSetting = db.prepare('INSERT INTO firewall_settings (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value');
  const getSmart = db.prepare('SELECT * FROM firewall_smart WHERE server_id = ?');
  const upsertSmart = db.prepare(`INSERT INTO firewall_smart (server_id, granted, granted_by, granted_at, enabled, webhook_url, webhook_style, updated_at)
    VALUES (:server_id, :granted, :granted_by, :granted_at, :enabled, :webhook_url, :webhook_style, :updated_at)
    ON CONFLICT(server_id) DO UPDATE SET granted = excluded.granted, granted_by = excluded.granted_by, granted_at = excluded.granted_at, enabled = excluded.enabled,
      webhook_url = excluded.webhook_url, webhook_style = excluded.webhook_style, updated_at = excluded.updated_at RETURNING *`);
  const getCursor = db.prepare('SELECT stream, last_id FROM firewall_cursors WHERE node_id = ?');
  const setCursor = db.prepare(`INSERT INTO firewall_cursors (node_id, stream, last_id, synced_at) VALUES (?, ?, ?, ?)
    ON CONFLICT(node_id) DO UPDATE SET stream = excluded.stream, last_id = excluded.last_id, synced_at = excluded.synced_at`);
  const insertEvent = db.prepare(`INSERT OR IGNORE INTO firewall_events (node_id, stream, agent_id, incident, server_id, type, level, occurred_at, started_at, ended_at,
      pps, bps, peak_pps, peak_bps, baseline_pps, baseline_bps, ratio, action, cap_mbps, message, received_at)
    VALUES (:node_id, :stream, :agent_id, :incident, :server_id, :type, :level, :occurred_at, :started_at, :ended_at,
      :pps, :bps, :peak_pps, :peak_bps, :baseline_pps, :baseline_bps, :ratio, :action, :cap_mbps, :message, :received_at)`);
  const endIncident = db.prepare('UPDATE firewall_events SET ended_at = ? WHERE node_id = ? AND stream = ? AND incident = ? AND ended_at IS NULL');
  const latestDetection = db.prepare("SELECT node_id, stream, incident FROM firewall_events WHERE server_id = ? AND type = 'attack_detected' ORDER BY id DESC LIMIT 1");
  const getMitigation = db.prepare('SELECT * FROM firewall_mitigations WHERE server_id = ?');
  const setMitigation = db.prepare(`INSERT INTO firewall_mitigations (server_id, node_id, stream, incident, cap_mbps, since) VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT(server_id) DO UPDATE SET node_id = excluded.node_id, stream = excluded.stream, incident = excluded.incident, cap_mbps = excluded.cap_mbps, since = excluded.since`);
  const clearMitigation = db.prepare('DELETE FROM firewall_mitigations WHERE server_id = ?');
  const clearOldStream = db.prepare('DELETE FROM firewall_mitigations WHERE node_id = ? AND stream <> ?');
  const getEvent = db.prepare('SELECT * FROM firewall_events WHERE id = ?');
  const ack = db.prepare('UPDATE firewall_events SET acknowledged_by = ?, acknowledged_at = ? WHERE id = ? AND acknowledged_at IS NULL');
  const getIncident = db.prepare('SELECT started_at, offline, offline_count, offline_alerts, online_since FROM firewall_node_incidents WHERE node_id = ?');
  const setIncident = db.prepare(`INSERT INTO firewall_node_incidents (node_id, started_at, offline, offline_count, offline_alerts, online_since) VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT(node_id) DO UPDATE SET started_at = excluded.started_at, offline = excluded.offline, offline_count = excluded.offline_count,
      offline_alerts = excluded.offline_alerts, online_since = excluded.online_since`);
  const deleteIncident = db.prepare('DELETE FROM firewall_node_incidents WHERE node_id = ?');
  const insertAlert = db.prepare('INSERT INTO firewall_outbox (destination, kind, server_id, level, notice, created_at) VALUES (?, ?, ?, ?, ?, ?)');
  const pending = db.prepare('SELECT * FROM firewall_outbox WHERE destination = ? ORDER BY id LIMIT ?');
  const deleteAlerts = db.prepare('DELETE FROM firewall_outbox WHERE destination = ? AND id <= ?');
  const openGate = db.prepare('DELETE FROM firewall_outbox_gates WHERE destination = ?');
  const closeGate = db.prepare(`INSERT INTO firewall_outbox_gates (destination, failures, not_before) VALUES (?, 1, ?)
    ON CONFLICT(destination) DO UPDATE SET failures = failures + 1, not_before = excluded.not_before RETURNING failures`);

  const enqueue = (alerts: readonly OutboxInput[], at: string): void => {
    for (const a of alerts) insertAlert.run(a.destination, a.kind, a.server_id, a.level, a.notice, at);
  };

  // The mitigation in force follows the latest event of the server's latest incident (the
  // contract's `mitigation` is what is in force after each event); an event of an older incident
  // changes nothing. A new detection starts from "none".
  const trackMitigation = (nodeId: number, stream: string, serverId: number, e: SmartEvent): void => {
    if (e.type === 'attack_detected') clearMitigation.run(serverId);
    const latest = latestDetection.get(serverId) as { node_id: number; stream: string; incident: number } | undefined;
    if (latest !== undefined && (latest.node_id !== nodeId || latest.stream !== stream || latest.incident !== e.incident)) return;
    if (e.mitigation.action !== 'rate_cap') {
      clearMitigation.run(serverId);
      return;
    }
    const current = getMitigation.get(serverId) as MitigationRow | undefined;
    const since = current !== undefined && current.incident === e.incident && current.stream === stream ? current.since : canonical(e.occurred_at);
    setMitigation.run(serverId, nodeId, stream, e.incident, e.mitigation.cap_mbps, since);
  };

  const eventWhere = (q: Pick<EventQuery, 'serverId' | 'unacknowledged'>): { sql: string; args: number[] } => {
    const parts: string[] = [];
    const args: number[] = [];
    if (q.serverId !== undefined) {
      parts.push('server_id = ?');
      args.push(q.serverId);
    }
    if (q.unacknowledged === true) parts.push('acknowledged_at IS NULL');
    return { sql: parts.length === 0 ? '' : ` WHERE ${parts.join(' AND ')}`, args };
  };

  return {
    settingRows: () => Object.fromEntries((settingRows.all() as { key: string; value: string }[]).map((r) => [r.key, r.value])),
    saveSettings: (rows) =>
      database.transaction(() => {
        for (const [k, v] of rows) setSetting.run(k, v);
      }),
    smart: (serverId) => getSmart.get(serverId) as SmartRow | undefined,
    smartOf(serverIds) {
      const out = new Map<number, SmartRow>();
      for (const id of serverIds) {
        const row = getSmart.get(id) as SmartRow | undefined;
        if (row !== undefined) out.set(id, row);
      }
      return out;
    },
    saveSmart(serverId, change, at) {
      return database.transaction(() => {
        const current = (getSmart.get(serverId) as SmartRow | undefined) ?? { server_id: serverId, granted: 0, granted_by: null, granted_at: null, enabled: 0, webhook_url: '', webhook_style: 'chat_a', updated_at: at };
        return upsertSmart.get({ ...current, ...change, server_id: serverId, updated_at: at }) as unknown as SmartRow;
      });
    },
    cursor: (nodeId) => getCursor.get(nodeId) as Cursor | undefined,
    storePage(nodeId, cursor, events, at) {
      return database.transaction(() => {
        const before = getCursor.get(nodeId) as Cursor | undefined;
        if (before !== undefined && before.stream !== cursor.stream) clearOldStream.run(nodeId, cursor.stream);
        const added: SmartEvent[] = [];
        for (const { server_id, event: e, alerts } of events) {
          const ended = e.ended_at === null ? null : canonical(e.ended_at);
          const inserted = insertEvent.run({
            node_id: nodeId,
            stream: cursor.stream,
            agent_id: e.id,
            incident: e.incident,
            server_id,
            type: e.type,
            level: e.level,
            occurred_at: canonical(e.occurred_at),
            started_at: canonical(e.started_at),
            ended_at: ended,
            ...e.metrics,
            action: e.mitigation.action,
            cap_mbps: e.mitigation.cap_mbps,
            message: e.message,
            received_at: at,
          }).changes;
          if (inserted === 0) continue;
          if (ended !== null) endIncident.run(ended, nodeId, cursor.stream, e.incident);
          trackMitigation(nodeId, cursor.stream, server_id, e);
          enqueue(alerts, at);
          added.push(e);
        }
        setCursor.run(nodeId, cursor.stream, cursor.last_id, at);
        return added;
      });
    },
    events(q) {
      const w = eventWhere(q);
      const total = (db.prepare(`SELECT COUNT(*) AS n FROM firewall_events${w.sql}`).get(...w.args) as { n: number }).n;
      const items = db.prepare(`SELECT * FROM firewall_events${w.sql} ORDER BY id DESC LIMIT ? OFFSET ?`).all(...w.args, q.perPage, (q.page - 1) * q.perPage) as unknown as EventRow[];
      return { items, total, page: q.page, perPage: q.perPage };
    },
    event: (id) => getEvent.get(id) as EventRow | undefined,
    eventServers: () => (db.prepare('SELECT DISTINCT server_id FROM firewall_events ORDER BY server_id').all() as { server_id: number }[]).map((r) => r.server_id),
    acknowledge(id, userId, at) {
      return database.transaction(() => {
        ack.run(userId, at, id);
        return getEvent.get(id) as EventRow | undefined;
      });
    },
    mitigations(serverIds) {
      const out = new Map<number, MitigationRow>();
      for (const id of serverIds) {
        const row = getMitigation.get(id) as MitigationRow | undefined;
        if (row !== undefined) out.set(id, row);
      }
      return out;
    },
    nodeIncident: (nodeId) => getIncident.get(nodeId) as NodeIncident | undefined,
    nodeIncidents: () => db.prepare('SELECT * FROM firewall_node_incidents ORDER BY node_id').all() as unknown as (NodeIncident & { node_id: number })[],
    saveNodeIncident(nodeId, incident, alerts, at) {
      database.transaction(() => {
        if (incident === null) deleteIncident.run(nodeId);
        else setIncident.run(nodeId, incident.started_at, incident.offline, incident.offline_count, incident.offline_alerts, incident.online_since);
        enqueue(alerts, at);
      });
    },
    enqueue: (alerts, at) => database.transaction(() => enqueue(alerts, at)),
    destinations: () =>
      db
        .prepare('SELECT o.destination, g.not_before, COALESCE(g.failures, 0) AS failures FROM (SELECT DISTINCT destination FROM firewall_outbox) o LEFT JOIN firewall_outbox_gates g ON g.destination = o.destination ORDER BY o.destination')
        .all() as unknown as { destination: string; not_before: string | null; failures: number }[],
    pending: (destination, limit) => pending.all(destination, limit) as unknown as OutboxRow[],
    done: (destination, covers) =>
      database.transaction(() => {
        openGate.run(destination);
        return Number(deleteAlerts.run(destination, covers).changes);
      }),
    failed: (destination, notBefore) => (closeGate.get(destination, notBefore) as { failures: number }).failures,
    outboxSize: () => (db.prepare('SELECT COUNT(*) AS n FROM firewall_outbox').get() as { n: number }).n,
  };
}

/**
 * The node agent's persistent state (spec/1 §1: counters, limits, enforcement flags and the
 * outbound event queue survive restarts and panel outages). One SQLite connection, WAL, every
 * state change of a cycle in one transaction, so `kill -9` at any moment loses nothing that was
 * acknowledged and never counts a byte twice (counters and raw readings commit together).
 */
import type { DatabaseSync } from 'node:sqlite';
import { openDatabase, type Migration } from '../../src/lib/sqlite.ts';
import { randomUUID } from 'node:crypto';
import type { SmartEvent } from '../../src/contracts/types.ts';
import type { AgentEvent, Limits, ServerState } from './accounting.ts';
import type { SmartEventDraft, SmartState } from './smart.ts';

const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'initial',
    up: `
      CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      CREATE TABLE servers (
        uuid TEXT PRIMARY KEY,
        container_id TEXT NOT NULL DEFAULT '',
        online INTEGER NOT NULL DEFAULT 0,
        iface TEXT,
        first_seen_at INTEGER NOT NULL,
        last_seen_at INTEGER NOT NULL,
        state TEXT NOT NULL
      );
      CREATE TABLE limits (uuid TEXT PRIMARY KEY, entry TEXT NOT NULL);
      CREATE TABLE hourly (
        uuid TEXT NOT NULL,
        hour INTEGER NOT NULL,
        rx_bytes INTEGER NOT NULL DEFAULT 0,
        tx_bytes INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (uuid, hour)
      ) WITHOUT ROWID;
      CREATE TABLE outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, event TEXT NOT NULL, created_at INTEGER NOT NULL);
    `,
  },
  {
    version: 2,
    name: 'smart',
    up: `
      CREATE TABLE smart_state (uuid TEXT PRIMARY KEY, state TEXT NOT NULL);
      CREATE TABLE smart_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        server_uuid TEXT NOT NULL,
        incident INTEGER NOT NULL,
        occurred_at INTEGER NOT NULL,
        event TEXT NOT NULL
      );
    `,
  },
];

/** A managed server as stored: the accounting state plus what discovery last saw. */
export interface ServerRecord {
  state: ServerState;
  containerId: string;
  online: boolean;
  iface: string | null;
  firstSeenAt: number;
  lastSeenAt: number;
}

export interface StoredLimits {
  configVersion: number;
  timezone: string | null;
  servers: Map<string, Limits>;
}

export interface HourlyDelta {
  uuid: string;
  hour: number;
  rx: number;
  tx: number;
}

export interface OutboxItem {
  id: number;
  event: AgentEvent;
}

/** What a cycle changed of the SMART detector: states to write and events to append. */
export interface SmartChanges {
  states: readonly SmartState[];
  events: readonly SmartEventDraft[];
}

export interface AgentStore {
  loadServers(): Map<string, ServerRecord>;
  /** Commits one cycle: server rows, hourly deltas, new events and the detector's changes, all or nothing. */
  saveCycle(servers: readonly ServerRecord[], hourly: readonly HourlyDelta[], events: readonly AgentEvent[], smart?: SmartChanges): void;
  /** The detector's states as last written, and the highest incident number used. */
  loadSmart(): { states: Map<string, SmartState>; lastIncident: number };
  /** SMART events with id > after, oldest first, at most `limit`; the stream id and the highest id held. */
  smartEvents(after: number, limit: number): { stream: string; events: SmartEvent[]; last_id: number };
  loadLimits(): StoredLimits;
  /** Full replace of the limits set (PUT /limits rule 1) with the events it causes; timezone null keeps the stored one. */
  replaceLimits(configVersion: number, timezone: string | null, servers: readonly Limits[], events: readonly AgentEvent[]): void;
  outboxPeek(limit: number): OutboxItem[];
  outboxDelete(ids: readonly number[]): void;
  outboxCount(): number;
  /** Hourly buckets of one server with hour >= fromMs, oldest first. */
  hourly(uuid: string, fromMs: number): { hour: number; rx: number; tx: number }[];
  /**
   * Forgets servers not seen since `beforeMs` (except those in `keep`) and hourly rows older than
   * `historyBeforeMs`; returns the forgotten UUIDs.
   */
  cleanup(beforeMs: number | null, historyBeforeMs: number, keep: ReadonlySet<string>, smartBeforeMs?: number): string[];
  compact(): void;
  close(): void;
}

export interface AgentStoreOptions {
  path: string;
  journal_mode?: 'WAL' | 'DELETE' | 'TRUNCATE';
  synchronous?: 'OFF' | 'NORMAL' | 'FULL';
  cache_size_kb?: number;
  auto_migrate?: boolean;
}

/** Opens (and migrates) the store; runs once at agent start. */
export function openAgentStore(opts: AgentStoreOptions): AgentStore {
  const store = openDatabase({ ...opts, migrations: MIGRATIONS });
  const db: DatabaseSync = store.db;
  const upsertServer = db.prepare(
    `INSERT INTO servers (uuid, container_id, online, iface, first_seen_at, last_seen_at, state) VALUES (?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT(uuid) DO UPDATE SET container_id = excluded.container_id, online = excluded.online, iface = excluded.iface,
       last_seen_at = excluded.last_seen_at, state = excluded.state`,
  );
  const addHourly = db.prepare(
    `INSERT INTO hourly (uuid, hour, rx_bytes, tx_bytes) VALUES (?, ?, ?, ?)
     ON CONFLICT(uuid, hour) DO UPDATE SET rx_bytes = rx_bytes + excluded.rx_bytes, tx_bytes = tx_bytes + excluded.tx_bytes`,
  );
  const addEvent = db.prepare('INSERT INTO outbox (event, created_at) VALUES (?, ?)');
  const setMeta = db.prepare('INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value');
  const getMeta = db.prepare('SELECT value FROM meta WHERE key = ?');
  const putSmartState = db.prepare('INSERT INTO smart_state (uuid, state) VALUES (?, ?) ON CONFLICT(uuid) DO UPDATE SET state = excluded.state');
  const addSmartEvent = db.prepare('INSERT INTO smart_events (server_uuid, incident, occurred_at, event) VALUES (?, ?, ?, ?)');

  const meta = (key: string): string | undefined => (getMeta.get(key) as { value: string } | undefined)?.value;
  // The panel pulls events by id; a new store (a deleted file) starts its ids again, and a new
  // stream id tells the panel so.
  let stream = meta('smart_stream');
  if (stream === undefined) {
    stream = randomUUID();
    setMeta.run('smart_stream', stream);
  }
  const smartStream = stream;
  // What each server row last committed, minus the sample time and rates: an idle server's row is
  // not rewritten every cycle (rates restart from the next sample after a restart anyway).
  const written = new Map<string, string>();
  const durable = (r: ServerRecord): string => {
    const st = r.state;
    const keys = Object.values(st.usage).map((u) => u.key).join(',');
    return `${r.containerId}|${r.online}|${r.iface}|${Math.floor(r.lastSeenAt / 3_600_000)}|${st.ifindex}|${st.rxRaw}|${st.txRaw}|${st.suspend}|${st.throttled}|${st.tz}|${keys}|${JSON.stringify(st.exceeded)}`;
  };

  return {
    loadServers() {
      const out = new Map<string, ServerRecord>();
      for (const row of db.prepare('SELECT * FROM servers').all() as Record<string, unknown>[]) {
        const state = JSON.parse(String(row['state'])) as ServerState;
        const record: ServerRecord = {
          state,
          containerId: String(row['container_id']),
          online: row['online'] === 1,
          iface: (row['iface'] as string | null) ?? null,
          firstSeenAt: Number(row['first_seen_at']),
          lastSeenAt: Number(row['last_seen_at']),
        };
        out.set(state.uuid, record);
        written.set(state.uuid, durable(record));
      }
      return out;
    },
    saveCycle(servers, hourly, events, smart) {
      const committed: [string, string][] = [];
      store.transaction(() => {
        for (const st of smart?.states ?? []) putSmartState.run(st.uuid, JSON.stringify(st));
        for (const e of smart?.events ?? []) addSmartEvent.run(e.server_uuid, e.incident, Date.parse(e.occurred_at), JSON.stringify(e));
        for (const s of servers) {
          const sig = durable(s);
          if (written.get(s.state.uuid) === sig) continue;
          upsertServer.run(s.state.uuid, s.containerId, s.online ? 1 : 0, s.iface, s.firstSeenAt, s.lastSeenAt, JSON.stringify(s.state));
          committed.push([s.state.uuid, sig]);
        }
        for (const h of hourly) if (h.rx > 0 || h.tx > 0) addHourly.run(h.uuid, h.hour, h.rx, h.tx);
        const now = Date.now();
        for (const e of events) addEvent.run(JSON.stringify(e), now);
      });
      for (const [uuid, sig] of committed) written.set(uuid, sig);
    },
    loadSmart() {
      const states = new Map<string, SmartState>();
      for (const row of db.prepare('SELECT state FROM smart_state').all() as { state: string }[]) {
        const st = JSON.parse(row.state) as SmartState;
        states.set(st.uuid, st);
      }
      const lastIncident = Number((db.prepare('SELECT max(incident) AS n FROM smart_events').get() as { n: number | null }).n ?? 0);
      const stored = Number(meta('smart_incident') ?? 0);
      return { states, lastIncident: Math.max(lastIncident, stored, ...[...states.values()].map((s) => s.incident?.id ?? 0)) };
    },
    smartEvents(after, limit) {
      const rows = db.prepare('SELECT id, event FROM smart_events WHERE id > ? ORDER BY id LIMIT ?').all(after, limit) as { id: number; event: string }[];
      const last = Number((db.prepare('SELECT max(id) AS n FROM smart_events').get() as { n: number | null }).n ?? 0);
      return { stream: smartStream, events: rows.map((r) => ({ id: r.id, ...(JSON.parse(r.event) as SmartEventDraft) })), last_id: last };
    },
    loadLimits() {
      const servers = new Map<string, Limits>();
      for (const row of db.prepare('SELECT entry FROM limits').all() as { entry: string }[]) {
        const entry = JSON.parse(row.entry) as Limits;
        servers.set(entry.uuid, entry);
      }
      return { configVersion: Number(meta('config_version') ?? 0), timezone: meta('timezone') ?? null, servers };
    },
    replaceLimits(configVersion, timezone, servers, events) {
      store.transaction(() => {
        const now = Date.now();
        for (const e of events) addEvent.run(JSON.stringify(e), now);
        db.exec('DELETE FROM limits');
        const ins = db.prepare('INSERT OR REPLACE INTO limits (uuid, entry) VALUES (?, ?)');
        for (const s of servers) ins.run(s.uuid, JSON.stringify(s));
        setMeta.run('config_version', String(configVersion));
        if (timezone !== null) setMeta.run('timezone', timezone);
      });
    },
    outboxPeek(limit) {
      return (db.prepare('SELECT id, event FROM outbox ORDER BY id LIMIT ?').all(limit) as { id: number; event: string }[]).map((r) => ({
        id: r.id,
        event: JSON.parse(r.event) as AgentEvent,
      }));
    },
    outboxDelete(ids) {
      if (ids.length === 0) return;
      store.transaction(() => {
        const del = db.prepare('DELETE FROM outbox WHERE id = ?');
        for (const id of ids) del.run(id);
      });
    },
    outboxCount() {
      return Number((db.prepare('SELECT count(*) AS n FROM outbox').get() as { n: number }).n);
    },
    hourly(uuid, fromMs) {
      return (db.prepare('SELECT hour, rx_bytes, tx_bytes FROM hourly WHERE uuid = ? AND hour >= ? ORDER BY hour').all(uuid, fromMs) as {
        hour: number;
        rx_bytes: number;
        tx_bytes: number;
      }[]).map((r) => ({ hour: r.hour, rx: r.rx_bytes, tx: r.tx_bytes }));
    },
    cleanup(beforeMs, historyBeforeMs, keep, smartBeforeMs) {
      let forgotten: string[] = [];
      store.transaction(() => {
        if (smartBeforeMs !== undefined) {
          // Pruned events take their incident numbers with them: keep the highest, so none is reused.
          const top = (db.prepare('SELECT max(incident) AS n FROM smart_events').get() as { n: number | null }).n;
          if (top !== null && top > Number(meta('smart_incident') ?? 0)) setMeta.run('smart_incident', String(top));
          db.prepare('DELETE FROM smart_events WHERE occurred_at < ?').run(smartBeforeMs);
        }
        if (beforeMs !== null) {
          forgotten = (db.prepare('SELECT uuid FROM servers WHERE last_seen_at < ?').all(beforeMs) as { uuid: string }[])
            .map((r) => r.uuid)
            .filter((uuid) => !keep.has(uuid));
          const delServer = db.prepare('DELETE FROM servers WHERE uuid = ?');
          const delHourly = db.prepare('DELETE FROM hourly WHERE uuid = ?');
          const delSmart = db.prepare('DELETE FROM smart_state WHERE uuid = ?');
          for (const uuid of forgotten) {
            delServer.run(uuid);
            delHourly.run(uuid);
            delSmart.run(uuid);
            written.delete(uuid);
          }
        }
        db.prepare('DELETE FROM hourly WHERE hour < ?').run(historyBeforeMs);
      });
      return forgotten;
    },
    compact() {
      store.compact();
    },
    close() {
      store.close();
    },
  };
}

/**
 * The daemon's SQLite store: one row per container ever managed (daily usage, last raw counters,
 * warning/exceeded flags of the current day), hourly usage history, the persisted webhook outbox
 * and the time of the last daily reset. One connection, one writer (database.max_open_conns = 1).
 */
import { openDatabase, type Database, type Migration } from '../../src/lib/sqlite.ts';
import type { BandwidthdConfig } from '../../src/contracts/types.ts';

export interface ContainerRow {
  id: string;
  name: string;
  iface: string | null;
  /** Container's point of view: rx = received by the container (down), tx = sent (up). */
  rx_day: number;
  tx_day: number;
  /** Last raw host-veth counters (host tx = container rx), to compute deltas; null = no sample yet. */
  last_rx: number | null;
  last_tx: number | null;
  warned: number;
  exceeded: number;
  first_seen_at: number;
  last_seen_at: number;
}

export interface OutboxRow {
  id: number;
  destination: string;
  body: string;
  attempts: number;
  created_at: number;
}

const MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'containers, history, outbox, meta',
    up: `
      CREATE TABLE containers (
        id TEXT PRIMARY KEY, name TEXT NOT NULL, iface TEXT,
        rx_day INTEGER NOT NULL DEFAULT 0, tx_day INTEGER NOT NULL DEFAULT 0,
        last_rx INTEGER, last_tx INTEGER,
        warned INTEGER NOT NULL DEFAULT 0, exceeded INTEGER NOT NULL DEFAULT 0,
        first_seen_at INTEGER NOT NULL, last_seen_at INTEGER NOT NULL
      );
      CREATE TABLE usage_hourly (
        container TEXT NOT NULL, hour INTEGER NOT NULL,
        rx_bytes INTEGER NOT NULL DEFAULT 0, tx_bytes INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (container, hour)
      );
      CREATE TABLE webhook_outbox (
        id INTEGER PRIMARY KEY AUTOINCREMENT, destination TEXT NOT NULL, body TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0, created_at INTEGER NOT NULL
      );
      CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    `,
  },
];

export interface BandwidthdStore {
  readonly database: Database;
  containers(): ContainerRow[];
  container(id: string): ContainerRow | undefined;
  /** The last-seen row of another container id with this name, if any (a container recreated under its name). */
  predecessor(name: string, id: string): ContainerRow | undefined;
  upsert(row: ContainerRow): void;
  deleteContainer(id: string): void;
  addHourly(container: string, hourMs: number, rx: number, tx: number): void;
  hourly(sinceMs: number, untilMs: number): { container: string; name: string; hour: number; rx_bytes: number; tx_bytes: number }[];
  deleteHourlyBefore(ms: number): number;
  enqueue(destination: string, body: string, now: number): void;
  /** The destinations that have stored deliveries. */
  outboxDestinations(): string[];
  /** The oldest `limit` stored deliveries of one destination. */
  outbox(destination: string, limit: number): OutboxRow[];
  /** Deletes every stored delivery of a destination; returns how many. */
  outboxDrop(destination: string): number;
  outboxDelete(id: number): void;
  outboxFailed(id: number): void;
  /** Stored deliveries now, of one destination or of all. */
  outboxCount(destination?: string): number;
  meta(key: string): string | undefined;
  setMeta(key: string, value: string): void;
  close(): void;
}

/** Opens (and migrates) the store at daemon start, or for tests with path ':memory:'. */
export function openBandwidthdStore(cfg: Pick<BandwidthdConfig['database'], 'path' | 'journal_mode' | 'synchronous' | 'cache_size_kb' | 'auto_migrate'>): BandwidthdStore {
  const database = openDatabase({ ...cfg, migrations: MIGRATIONS });
  const { db } = database;
  const q = {
    all: db.prepare('SELECT * FROM containers ORDER BY name'),
    one: db.prepare('SELECT * FROM containers WHERE id = ?'),
    predecessor: db.prepare('SELECT * FROM containers WHERE name = ? AND id != ? ORDER BY last_seen_at DESC LIMIT 1'),
    upsert: db.prepare(`INSERT INTO containers (id, name, iface, rx_day, tx_day, last_rx, last_tx, warned, exceeded, first_seen_at, last_seen_at)
      VALUES (:id, :name, :iface, :rx_day, :tx_day, :last_rx, :last_tx, :warned, :exceeded, :first_seen_at, :last_seen_at)
      ON CONFLICT(id) DO UPDATE SET name = excluded.name, iface = excluded.iface, rx_day = excluded.rx_day, tx_day = excluded.tx_day,
        last_rx = excluded.last_rx, last_tx = excluded.last_tx, warned = excluded.warned, exceeded = excluded.exceeded, last_seen_at = excluded.last_seen_at`),
    del: db.prepare('DELETE FROM containers WHERE id = ?'),
    delHourlyOf: db.prepare('DELETE FROM usage_hourly WHERE container = ?'),
    addHourly: db.prepare(`INSERT INTO usage_hourly (container, hour, rx_bytes, tx_bytes) VALUES (?, ?, ?, ?)
      ON CONFLICT(container, hour) DO UPDATE SET rx_bytes = rx_bytes + excluded.rx_bytes, tx_bytes = tx_bytes + excluded.tx_bytes`),
    hourly: db.prepare(`SELECT h.container, COALESCE(c.name, h.container) AS name, h.hour, h.rx_bytes, h.tx_bytes FROM usage_hourly h
      LEFT JOIN containers c ON c.id = h.container WHERE h.hour >= ? AND h.hour < ? ORDER BY h.hour, name`),
    delHourly: db.prepare('DELETE FROM usage_hourly WHERE hour < ?'),
    enqueue: db.prepare('INSERT INTO webhook_outbox (destination, body, created_at) VALUES (?, ?, ?)'),
    outboxDestinations: db.prepare('SELECT DISTINCT destination FROM webhook_outbox ORDER BY destination'),
    outbox: db.prepare('SELECT * FROM webhook_outbox WHERE destination = ? ORDER BY id LIMIT ?'),
    outboxDrop: db.prepare('DELETE FROM webhook_outbox WHERE destination = ?'),
    outboxDel: db.prepare('DELETE FROM webhook_outbox WHERE id = ?'),
    outboxFail: db.prepare('UPDATE webhook_outbox SET attempts = attempts + 1 WHERE id = ?'),
    outboxCount: db.prepare('SELECT COUNT(*) AS n FROM webhook_outbox'),
    outboxCountOf: db.prepare('SELECT COUNT(*) AS n FROM webhook_outbox WHERE destination = ?'),
    meta: db.prepare('SELECT value FROM meta WHERE key = ?'),
    setMeta: db.prepare('INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value'),
  };
  return {
    database,
    containers: () => q.all.all() as unknown as ContainerRow[],
    container: (id) => q.one.get(id) as unknown as ContainerRow | undefined,
    predecessor: (name, id) => q.predecessor.get(name, id) as unknown as ContainerRow | undefined,
    upsert: (row) => void q.upsert.run({ ...row }),
    deleteContainer: (id) =>
      database.transaction(() => {
        q.del.run(id);
        q.delHourlyOf.run(id);
      }),
    addHourly: (c, hour, rx, tx) => void q.addHourly.run(c, hour, rx, tx),
    hourly: (since, until) => q.hourly.all(since, until) as unknown as ReturnType<BandwidthdStore['hourly']>,
    deleteHourlyBefore: (ms) => Number(q.delHourly.run(ms).changes),
    enqueue: (d, body, now) => void q.enqueue.run(d, body, now),
    outboxDestinations: () => (q.outboxDestinations.all() as { destination: string }[]).map((r) => r.destination),
    outbox: (destination, limit) => q.outbox.all(destination, limit) as unknown as OutboxRow[],
    outboxDrop: (destination) => Number(q.outboxDrop.run(destination).changes),
    outboxDelete: (id) => void q.outboxDel.run(id),
    outboxFailed: (id) => void q.outboxFail.run(id),
    outboxCount: (destination) => Number(((destination === undefined ? q.outboxCount.get() : q.outboxCountOf.get(destination)) as { n: number }).n),
    meta: (key) => (q.meta.get(key) as { value: string } | undefined)?.value,
    setMeta: (key, value) => void q.setMeta.run(key, value),
    close: () => database.close(),
  };
}

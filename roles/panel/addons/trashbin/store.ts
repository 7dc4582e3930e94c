/**
 * The trash bin's records: settings, trash entries, and the egg and server overrides. An interface
 * with a SQLite driver (the panel's default), asynchronous like the core's repositories; a
 * settings save is one method and one transaction.
 */
import type { Database } from '../../../../src/lib/sqlite.ts';
import { promisify, type Async } from '../../store/repository.ts';
import type { OverrideValues } from './rules.ts';
import { encodeSettings, parseSettings, type TrashSettings } from './settings.ts';

/** One trashed item; it lives at `.trash/{id}` of its server's volume. */
export interface TrashEntry {
  id: number;
  server_id: number;
  /** Original path, volume-relative without a leading slash. */
  path: string;
  is_file: number;
  is_symlink: number;
  size: number;
  mode: string;
  mode_bits: string;
  deleted_by: number | null;
  /** ISO 8601 UTC with milliseconds (sorts as text). */
  deleted_at: string;
}

export type EggOverride = OverrideValues & { egg_id: number };

export interface TrashUsage {
  entries: number;
  bytes: number;
}

/** The synchronous SQLite driver's methods; services use the asynchronous TrashStore. */
export interface TrashStoreSync {
  /** The stored settings; a missing row takes its default. Throws when the table cannot be read. */
  settings(): TrashSettings;
  /** Writes every setting in one transaction. */
  saveSettings(s: TrashSettings): void;
  addEntry(e: Omit<TrashEntry, 'id'>): TrashEntry;
  /** A server's entries, newest first. */
  entries(serverId: number): TrashEntry[];
  /** The entries of a server among `ids` (others' ids are not found). */
  entriesByIds(serverId: number, ids: readonly number[]): TrashEntry[];
  /** Entries of a server deleted before `before`, oldest first, at most `limit`. */
  expired(serverId: number, before: string, limit: number): TrashEntry[];
  removeEntries(ids: readonly number[]): number;
  usage(serverId: number): TrashUsage;
  /** Every server's trash together. */
  fleet(): TrashUsage & { servers: number };
  /** The `limit` servers with the most bytes in their trash. */
  topServers(limit: number): (TrashUsage & { server_id: number })[];
  serverOverride(serverId: number): OverrideValues | undefined;
  eggOverride(eggId: number): OverrideValues | undefined;
  eggOverrides(): EggOverride[];
  saveEggOverride(o: EggOverride): void;
  /** False when the egg had none. */
  removeEggOverride(eggId: number): boolean;
}

export type TrashStore = Async<TrashStoreSync>;

/** The SQLite driver; runs once at panel start. */
export function createTrashStore(database: Database): TrashStore {
  return promisify(createSqliteTrashStore(database));
}

function createSqliteTrashStore(database: Database): TrashStoreSync {
  const { db } = database;
  const settingRows = db.prepare('SELECT key, value FROM trashbin_settings');
  const setSetting = db.prepare('INSERT INTO trashbin_settings (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value');
  const insertEntry = db.prepare(`INSERT INTO trashbin_entries (server_id, path, is_file, is_symlink, size, mode, mode_bits, deleted_by, deleted_at)
    VALUES (:server_id, :path, :is_file, :is_symlink, :size, :mode, :mode_bits, :deleted_by, :deleted_at) RETURNING *`);
  const serverEntries = db.prepare('SELECT * FROM trashbin_entries WHERE server_id = ? ORDER BY deleted_at DESC, id DESC');
  const expiredEntries = db.prepare('SELECT * FROM trashbin_entries WHERE server_id = ? AND deleted_at < ? ORDER BY deleted_at, id LIMIT ?');
  const deleteEntry = db.prepare('DELETE FROM trashbin_entries WHERE id = ?');
  const serverUsage = db.prepare('SELECT COUNT(*) AS entries, COALESCE(SUM(size), 0) AS bytes FROM trashbin_entries WHERE server_id = ?');
  const fleetUsage = db.prepare('SELECT COUNT(*) AS entries, COALESCE(SUM(size), 0) AS bytes, COUNT(DISTINCT server_id) AS servers FROM trashbin_entries');
  const top = db.prepare('SELECT server_id, COUNT(*) AS entries, SUM(size) AS bytes FROM trashbin_entries GROUP BY server_id ORDER BY bytes DESC, server_id LIMIT ?');
  // Override rows may be written by hand (bigint columns; 2^63 - 1 is a common "no limit"): values
  // past 2^53 - 1, which node:sqlite refuses to read as numbers, read as that, still more than any trash holds.
  const overrideValues = `MIN(max_bytes, ${Number.MAX_SAFE_INTEGER}) AS max_bytes, MIN(retention_hours, ${Number.MAX_SAFE_INTEGER}) AS retention_hours`;
  const serverOverride = db.prepare(`SELECT ${overrideValues} FROM trashbin_server_overrides WHERE server_id = ?`);
  const eggOverride = db.prepare(`SELECT ${overrideValues} FROM trashbin_egg_overrides WHERE egg_id = ?`);
  const eggOverrides = db.prepare(`SELECT egg_id, ${overrideValues} FROM trashbin_egg_overrides ORDER BY egg_id`);
  const upsertEgg = db.prepare(`INSERT INTO trashbin_egg_overrides (egg_id, retention_hours, max_bytes) VALUES (:egg_id, :retention_hours, :max_bytes)
    ON CONFLICT(egg_id) DO UPDATE SET retention_hours = excluded.retention_hours, max_bytes = excluded.max_bytes`);
  const deleteEgg = db.prepare('DELETE FROM trashbin_egg_overrides WHERE egg_id = ?');

  return {
    settings: () => parseSettings(Object.fromEntries((settingRows.all() as { key: string; value: string }[]).map((r) => [r.key, r.value]))),
    saveSettings: (s) => database.transaction(() => {
      for (const [k, v] of encodeSettings(s)) setSetting.run(k, v);
    }),
    addEntry: (e) => insertEntry.get({ ...e }) as unknown as TrashEntry,
    entries: (serverId) => serverEntries.all(serverId) as unknown as TrashEntry[],
    entriesByIds: (serverId, ids) => {
      if (ids.length === 0) return [];
      return db.prepare(`SELECT * FROM trashbin_entries WHERE server_id = ? AND id IN (${ids.map(() => '?').join(', ')}) ORDER BY id`).all(serverId, ...ids) as unknown as TrashEntry[];
    },
    expired: (serverId, before, limit) => expiredEntries.all(serverId, before, limit) as unknown as TrashEntry[],
    removeEntries: (ids) => database.transaction(() => ids.reduce((n, id) => n + Number(deleteEntry.run(id).changes), 0)),
    usage: (serverId) => serverUsage.get(serverId) as unknown as TrashUsage,
    fleet: () => fleetUsage.get() as unknown as TrashUsage & { servers: number },
    topServers: (limit) => top.all(limit) as unknown as (TrashUsage & { server_id: number })[],
    serverOverride: (serverId) => serverOverride.get(serverId) as OverrideValues | undefined,
    eggOverride: (eggId) => eggOverride.get(eggId) as OverrideValues | undefined,
    eggOverrides: () => eggOverrides.all() as unknown as EggOverride[],
    saveEggOverride: (o) => void upsertEgg.run({ ...o }),
    removeEggOverride: (eggId) => deleteEgg.run(eggId).changes > 0,
  };
}

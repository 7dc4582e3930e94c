/**
 * The trash bin's tables (versions 200+): global settings seeded with spec/2 §2.3's defaults, one
 * record per trashed item, and the egg and server overrides of §2.4. Records and overrides go with
 * their server or egg through the foreign keys (the panel's SQLite runs with foreign_keys on).
 */
import type { Migration } from '../../../../src/lib/sqlite.ts';
import { encodeSettings, TRASH_DEFAULTS } from './settings.ts';

const seed = encodeSettings(TRASH_DEFAULTS).map(([k, v]) => `('${k}', '${v}')`).join(', ');

export const TRASHBIN_MIGRATIONS: readonly Migration[] = [
  {
    version: 200,
    name: 'trash bin addon',
    up: `
      CREATE TABLE trashbin_settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      INSERT INTO trashbin_settings (key, value) VALUES ${seed};
      CREATE TABLE trashbin_entries (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        server_id INTEGER NOT NULL REFERENCES servers(id) ON DELETE CASCADE,
        path TEXT NOT NULL,
        is_file INTEGER NOT NULL,
        is_symlink INTEGER NOT NULL,
        size INTEGER NOT NULL,
        mode TEXT NOT NULL,
        mode_bits TEXT NOT NULL,
        deleted_by INTEGER REFERENCES users(id) ON DELETE SET NULL,
        deleted_at TEXT NOT NULL
      );
      CREATE INDEX trashbin_entries_server ON trashbin_entries(server_id, deleted_at);
      CREATE TABLE trashbin_egg_overrides (
        egg_id INTEGER PRIMARY KEY REFERENCES eggs(id) ON DELETE CASCADE,
        retention_hours INTEGER CHECK (retention_hours IS NULL OR retention_hours BETWEEN 1 AND 8760),
        max_bytes INTEGER CHECK (max_bytes IS NULL OR max_bytes >= 0)
      );
      CREATE TABLE trashbin_server_overrides (
        server_id INTEGER PRIMARY KEY REFERENCES servers(id) ON DELETE CASCADE,
        max_bytes INTEGER CHECK (max_bytes IS NULL OR max_bytes >= 0),
        retention_hours INTEGER CHECK (retention_hours IS NULL OR retention_hours >= 0)
      );
    `,
  },
];

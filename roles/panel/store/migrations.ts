/**
 * The panel's numbered schema migrations (core records; addons append their own versions from 100
 * up). Published versions are never edited: a change is a new version. Column names are the
 * attribute names of the APIs (Pterodactyl's snake_case), so rows map to attributes without a
 * translation table.
 */
import type { DatabaseSync } from 'node:sqlite';
import { canonicalIp } from '../../../src/lib/ip-match.ts';
import type { Migration } from '../../../src/lib/sqlite.ts';

export const CORE_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'core records',
    up: `
      CREATE TABLE users (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        uuid TEXT NOT NULL UNIQUE,
        username TEXT NOT NULL UNIQUE COLLATE NOCASE,
        email TEXT NOT NULL UNIQUE COLLATE NOCASE,
        first_name TEXT NOT NULL DEFAULT '',
        last_name TEXT NOT NULL DEFAULT '',
        password TEXT NOT NULL,
        root_admin INTEGER NOT NULL DEFAULT 0,
        use_totp INTEGER NOT NULL DEFAULT 0,
        totp_secret TEXT,
        totp_last_step INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
      CREATE TABLE recovery_tokens (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        token_hash TEXT NOT NULL,
        created_at TEXT NOT NULL
      );
      CREATE TABLE sessions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        id_hash TEXT NOT NULL UNIQUE,
        user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        two_factor_ok INTEGER NOT NULL DEFAULT 0,
        ip TEXT NOT NULL DEFAULT '',
        created_at INTEGER NOT NULL,
        last_seen_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL
      );
      CREATE INDEX sessions_user ON sessions(user_id);
      CREATE TABLE locations (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        short TEXT NOT NULL UNIQUE,
        long TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
      CREATE TABLE nodes (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        uuid TEXT NOT NULL UNIQUE,
        name TEXT NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        location_id INTEGER NOT NULL REFERENCES locations(id),
        fqdn TEXT NOT NULL,
        scheme TEXT NOT NULL DEFAULT 'http',
        daemon_listen INTEGER NOT NULL DEFAULT 8480,
        public INTEGER NOT NULL DEFAULT 1,
        maintenance_mode INTEGER NOT NULL DEFAULT 0,
        memory INTEGER NOT NULL DEFAULT 0,
        memory_overallocate INTEGER NOT NULL DEFAULT 0,
        disk INTEGER NOT NULL DEFAULT 0,
        disk_overallocate INTEGER NOT NULL DEFAULT 0,
        token_id TEXT NOT NULL UNIQUE,
        token_hash TEXT NOT NULL,
        token_encrypted TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
      CREATE TABLE allocations (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        node_id INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
        ip TEXT NOT NULL,
        port INTEGER NOT NULL,
        ip_alias TEXT,
        notes TEXT,
        server_id INTEGER REFERENCES servers(id) ON DELETE SET NULL,
        UNIQUE (node_id, ip, port)
      );
      CREATE TABLE nests (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        uuid TEXT NOT NULL UNIQUE,
        author TEXT NOT NULL DEFAULT '',
        name TEXT NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
      CREATE TABLE eggs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        uuid TEXT NOT NULL UNIQUE,
        nest_id INTEGER NOT NULL REFERENCES nests(id),
        author TEXT NOT NULL DEFAULT '',
        name TEXT NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        docker_image TEXT NOT NULL,
        startup TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
      CREATE TABLE servers (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        uuid TEXT NOT NULL UNIQUE,
        identifier TEXT NOT NULL UNIQUE,
        name TEXT NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        owner_id INTEGER NOT NULL REFERENCES users(id),
        node_id INTEGER NOT NULL REFERENCES nodes(id),
        allocation_id INTEGER REFERENCES allocations(id),
        nest_id INTEGER NOT NULL REFERENCES nests(id),
        egg_id INTEGER NOT NULL REFERENCES eggs(id),
        memory INTEGER NOT NULL DEFAULT 0,
        swap INTEGER NOT NULL DEFAULT 0,
        disk INTEGER NOT NULL DEFAULT 0,
        io INTEGER NOT NULL DEFAULT 500,
        cpu INTEGER NOT NULL DEFAULT 0,
        threads TEXT,
        oom_disabled INTEGER NOT NULL DEFAULT 1,
        databases INTEGER NOT NULL DEFAULT 0,
        allocations INTEGER NOT NULL DEFAULT 0,
        backups INTEGER NOT NULL DEFAULT 0,
        startup TEXT NOT NULL DEFAULT '',
        image TEXT NOT NULL DEFAULT '',
        suspended INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
      CREATE TABLE subusers (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        server_id INTEGER NOT NULL REFERENCES servers(id) ON DELETE CASCADE,
        permissions TEXT NOT NULL DEFAULT '[]',
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        UNIQUE (user_id, server_id)
      );
      CREATE TABLE api_keys (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        key_type TEXT NOT NULL CHECK (key_type IN ('client', 'application')),
        identifier TEXT NOT NULL UNIQUE,
        token_hash TEXT NOT NULL,
        memo TEXT NOT NULL DEFAULT '',
        allowed_ips TEXT NOT NULL DEFAULT '[]',
        last_used_at TEXT,
        created_at TEXT NOT NULL
      );
      CREATE TABLE activity_logs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        event TEXT NOT NULL,
        ip TEXT NOT NULL DEFAULT '',
        description TEXT,
        actor_type TEXT,
        actor_id INTEGER,
        subject_type TEXT,
        subject_id INTEGER,
        properties TEXT NOT NULL DEFAULT '{}',
        timestamp TEXT NOT NULL
      );
      CREATE INDEX activity_subject ON activity_logs(subject_type, subject_id);
      CREATE INDEX activity_event ON activity_logs(event);
      CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    `,
  },
  {
    // A deleted node's agent is told its node is gone (spec/1 §7 ERR_NODE_NOT_FOUND), not that its
    // token is wrong: the token's lookup id and hash outlive the node (never the token itself).
    version: 2,
    name: 'deleted node tokens',
    up: `
      CREATE TABLE deleted_node_tokens (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        node_id INTEGER NOT NULL,
        node_name TEXT NOT NULL,
        token_id TEXT NOT NULL,
        token_hash TEXT NOT NULL,
        deleted_at TEXT NOT NULL
      );
      CREATE INDEX deleted_node_tokens_token ON deleted_node_tokens(token_id);
    `,
  },
  {
    // Allocations added before addresses were stored in one spelling: `0:0:0:0:0:0:0:1` becomes
    // `::1`. Where both spellings of one endpoint exist, the row a server uses is kept.
    version: 3,
    name: 'allocation addresses in one spelling',
    up: canonicalAllocationIps,
  },
  {
    // A billing system's own id of a user or server (Pterodactyl's external_id), looked up by the
    // system's module. NULL is none; SQLite's unique indexes let any number of rows be NULL.
    version: 4,
    name: 'external ids',
    up: `
      ALTER TABLE users ADD COLUMN external_id TEXT;
      CREATE UNIQUE INDEX users_external_id ON users(external_id);
      ALTER TABLE servers ADD COLUMN external_id TEXT;
      CREATE UNIQUE INDEX servers_external_id ON servers(external_id);
    `,
  },
];

interface AllocationIpRow {
  id: number;
  node_id: number;
  ip: string;
  port: number;
  server_id: number | null;
}

/**
 * Rewrites each allocation's address to canonicalIp's spelling. A row whose endpoint already
 * exists in that spelling is merged: the unassigned one of the two goes; two assigned rows (two
 * servers on one endpoint) are both left as they are, for the operator to sort out.
 */
function canonicalAllocationIps(db: DatabaseSync): void {
  const rows = db.prepare('SELECT id, node_id, ip, port, server_id FROM allocations').all() as unknown as AllocationIpRow[];
  const twin = db.prepare('SELECT id, node_id, ip, port, server_id FROM allocations WHERE node_id = ? AND ip = ? AND port = ?');
  const remove = db.prepare('DELETE FROM allocations WHERE id = ?');
  const rename = db.prepare('UPDATE allocations SET ip = ? WHERE id = ?');
  for (const row of rows) {
    const ip = canonicalIp(row.ip);
    if (ip === undefined || ip === row.ip) continue;
    const other = twin.get(row.node_id, ip, row.port) as unknown as AllocationIpRow | undefined;
    if (other !== undefined) {
      if (row.server_id === null) {
        remove.run(row.id);
        continue;
      }
      if (other.server_id !== null) continue;
      remove.run(other.id);
    }
    rename.run(ip, row.id);
  }
}

/**
 * The allocations migration 3 left in another spelling because a server uses each twin: an
 * endpoint (node, canonical address, port) and the ids of its rows. Runs when `panel serve`
 * starts, which warns about each until an operator moves one server.
 */
export function allocationSpellingTwins(db: DatabaseSync): { node_id: number; endpoint: string; allocation_ids: number[] }[] {
  const rows = db.prepare('SELECT id, node_id, ip, port, server_id FROM allocations').all() as unknown as AllocationIpRow[];
  const left = rows.filter((r) => canonicalIp(r.ip) !== undefined && canonicalIp(r.ip) !== r.ip);
  return left.map((r) => {
    const ip = canonicalIp(r.ip) as string;
    const ids = rows.filter((o) => o.node_id === r.node_id && o.port === r.port && canonicalIp(o.ip) === ip).map((o) => o.id);
    return { node_id: r.node_id, endpoint: `${ip.includes(':') ? `[${ip}]` : ip}:${r.port}`, allocation_ids: ids.sort((a, b) => a - b) };
  });
}

/**
 * The firewall alerts' tables (versions 400+): settings seeded with their defaults, the SMART
 * grant and owner choices per server, each node's pull cursor, the attack events synced from the
 * nodes with their acknowledgement, the mitigation in force per server, the offline incident of
 * each flapping node, and the alert outbox with one delivery gate per destination. Rows go with
 * their server or node through the foreign keys (the panel's SQLite runs with foreign_keys on).
 */
import type { Migration } from '../../../../src/lib/sqlite.ts';
import { encodeSettings, FIREWALL_DEFAULTS } from './settings.ts';

const seed = encodeSettings(FIREWALL_DEFAULTS).map(([k, v]) => `('${k}', '${v}')`).join(', ');

export const FIREWALL_MIGRATIONS: readonly Migration[] = [
  {
    version: 400,
    name: 'firewall alerts addon',
    up: `
      CREATE TABLE firewall_settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      INSERT INTO firewall_settings (key, value) VALUES ${seed};
      CREATE TABLE firewall_smart (
        server_id INTEGER PRIMARY KEY REFERENCES servers(id) ON DELETE CASCADE,
        granted INTEGER NOT NULL DEFAULT 0,
        granted_by INTEGER REFERENCES users(id) ON DELETE SET NULL,
        granted_at TEXT,
        enabled INTEGER NOT NULL DEFAULT 0,
        webhook_url TEXT NOT NULL DEFAULT '',
        webhook_style TEXT NOT NULL DEFAULT 'chat_a',
        updated_at TEXT NOT NULL
      );
      CREATE TABLE firewall_cursors (
        node_id INTEGER PRIMARY KEY REFERENCES nodes(id) ON DELETE CASCADE,
        stream TEXT NOT NULL,
        last_id INTEGER NOT NULL,
        synced_at TEXT NOT NULL
      );
      CREATE TABLE firewall_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        node_id INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
        stream TEXT NOT NULL,
        agent_id INTEGER NOT NULL,
        incident INTEGER NOT NULL,
        server_id INTEGER NOT NULL REFERENCES servers(id) ON DELETE CASCADE,
        type TEXT NOT NULL,
        level INTEGER NOT NULL,
        occurred_at TEXT NOT NULL,
        started_at TEXT NOT NULL,
        ended_at TEXT,
        pps REAL NOT NULL,
        bps REAL NOT NULL,
        peak_pps REAL NOT NULL,
        peak_bps REAL NOT NULL,
        baseline_pps REAL NOT NULL,
        baseline_bps REAL NOT NULL,
        ratio REAL NOT NULL,
        action TEXT NOT NULL,
        cap_mbps REAL,
        message TEXT NOT NULL,
        received_at TEXT NOT NULL,
        acknowledged_by INTEGER REFERENCES users(id) ON DELETE SET NULL,
        acknowledged_at TEXT,
        UNIQUE (node_id, stream, agent_id)
      );
      CREATE INDEX firewall_events_server ON firewall_events(server_id, id);
      CREATE INDEX firewall_events_incident ON firewall_events(node_id, stream, incident);
      CREATE TABLE firewall_mitigations (
        server_id INTEGER PRIMARY KEY REFERENCES servers(id) ON DELETE CASCADE,
        node_id INTEGER NOT NULL,
        stream TEXT NOT NULL,
        incident INTEGER NOT NULL,
        cap_mbps REAL,
        since TEXT NOT NULL
      );
      CREATE TABLE firewall_node_incidents (
        node_id INTEGER PRIMARY KEY REFERENCES nodes(id) ON DELETE CASCADE,
        started_at TEXT NOT NULL,
        offline INTEGER NOT NULL,
        offline_count INTEGER NOT NULL,
        offline_alerts INTEGER NOT NULL,
        online_since TEXT
      );
      CREATE TABLE firewall_outbox (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        destination TEXT NOT NULL,
        kind TEXT NOT NULL,
        server_id INTEGER,
        level INTEGER,
        notice TEXT NOT NULL,
        created_at TEXT NOT NULL
      );
      CREATE INDEX firewall_outbox_destination ON firewall_outbox(destination, id);
      CREATE TABLE firewall_outbox_gates (
        destination TEXT PRIMARY KEY,
        failures INTEGER NOT NULL,
        not_before TEXT NOT NULL
      );
    `,
  },
];

/**
 * The bandwidth addon's tables (spec/1 §2.8-2.9 and the panel's records of nodes, events and
 * usage). Settings are seeded with the spec's defaults; config_version starts at 0.
 */
import type { Migration } from '../../../../src/lib/sqlite.ts';
import { SETTING_DEFAULTS } from './settings.ts';

const seed = Object.entries(SETTING_DEFAULTS)
  .map(([k, v]) => `('${k}', '${String(typeof v === 'boolean' ? (v ? 1 : 0) : v)}')`)
  .join(', ');

export const BANDWIDTH_MIGRATIONS: readonly Migration[] = [
  {
    version: 100,
    name: 'bandwidth addon',
    up: `
      CREATE TABLE bandwidth_settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      INSERT INTO bandwidth_settings (key, value) VALUES ${seed}, ('config_version', '0');
      CREATE TABLE bandwidth_overrides (
        server_id INTEGER PRIMARY KEY REFERENCES servers(id) ON DELETE CASCADE,
        enabled INTEGER NOT NULL DEFAULT 1,
        rx_speed_mbps INTEGER NOT NULL DEFAULT 0,
        tx_speed_mbps INTEGER NOT NULL DEFAULT 0,
        rx_quota_day_gb INTEGER NOT NULL DEFAULT 0,
        rx_quota_week_gb INTEGER NOT NULL DEFAULT 0,
        rx_quota_month_gb INTEGER NOT NULL DEFAULT 0,
        tx_quota_day_gb INTEGER NOT NULL DEFAULT 0,
        tx_quota_week_gb INTEGER NOT NULL DEFAULT 0,
        tx_quota_month_gb INTEGER NOT NULL DEFAULT 0,
        exceed_action TEXT NOT NULL DEFAULT 'throttle',
        throttle_rx_mbps INTEGER NOT NULL DEFAULT 5,
        throttle_tx_mbps INTEGER NOT NULL DEFAULT 5
      );
      CREATE TABLE bandwidth_nodes (
        node_id INTEGER PRIMARY KEY REFERENCES nodes(id) ON DELETE CASCADE,
        api_url TEXT NOT NULL,
        version TEXT NOT NULL DEFAULT '',
        hostname TEXT NOT NULL DEFAULT '',
        registered_at TEXT NOT NULL,
        last_seen_at TEXT NOT NULL,
        health_failures INTEGER NOT NULL DEFAULT 0,
        online INTEGER NOT NULL DEFAULT 1,
        cached_stats TEXT NOT NULL DEFAULT '{}'
      );
      CREATE TABLE bandwidth_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        node_id INTEGER NOT NULL,
        server_id INTEGER REFERENCES servers(id) ON DELETE CASCADE,
        server_uuid TEXT NOT NULL,
        type TEXT NOT NULL,
        period TEXT,
        direction TEXT,
        message TEXT NOT NULL,
        occurred_at TEXT NOT NULL,
        received_at TEXT NOT NULL
      );
      CREATE INDEX bandwidth_events_received ON bandwidth_events(received_at);
      CREATE INDEX bandwidth_events_server ON bandwidth_events(server_id);
      CREATE TABLE bandwidth_hourly (
        hour INTEGER NOT NULL,
        server_id INTEGER NOT NULL REFERENCES servers(id) ON DELETE CASCADE,
        node_id INTEGER NOT NULL,
        rx_bytes INTEGER NOT NULL DEFAULT 0,
        tx_bytes INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (hour, server_id)
      ) WITHOUT ROWID;
      CREATE INDEX bandwidth_hourly_server ON bandwidth_hourly(server_id, hour);
      CREATE TABLE bandwidth_daily (
        day TEXT NOT NULL,
        server_id INTEGER NOT NULL REFERENCES servers(id) ON DELETE CASCADE,
        node_id INTEGER NOT NULL,
        rx_bytes INTEGER NOT NULL DEFAULT 0,
        tx_bytes INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (day, server_id)
      ) WITHOUT ROWID;
      CREATE INDEX bandwidth_daily_server ON bandwidth_daily(server_id, day);
      CREATE TABLE bandwidth_counters (
        server_id INTEGER PRIMARY KEY REFERENCES servers(id) ON DELETE CASCADE,
        rx_total INTEGER NOT NULL,
        tx_total INTEGER NOT NULL
      );
    `,
  },
  {
    // Delivery is at least once (spec/1 §4.2 rule 4, §6): a batch sent again after a lost answer
    // must not duplicate history. An event's identity is all it says; period and direction may be
    // NULL, which a plain unique index would treat as always distinct.
    version: 101,
    name: 'bandwidth events deduplicated',
    up: `
      DELETE FROM bandwidth_events WHERE id NOT IN (
        SELECT MIN(id) FROM bandwidth_events GROUP BY node_id, server_uuid, type, period, direction, occurred_at, message
      );
      CREATE UNIQUE INDEX bandwidth_events_identity ON bandwidth_events (node_id, server_uuid, type, IFNULL(period, ''), IFNULL(direction, ''), occurred_at, message);
    `,
  },
];

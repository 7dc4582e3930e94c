/**
 * The operations suite's tables (versions 300+): settings (a missing row reads as its default),
 * tags and their servers, templates with config revisions and per-admin favorites, recent
 * allocation picks, bulk jobs with one row per server, the suite's audit log (also the suite's
 * source of the activity feed) and node health snapshots. Rows of a server, tag, template, node
 * or user go with it through the foreign keys; bulk items keep the id of a deleted server.
 */
import type { Migration } from '../../../../src/lib/sqlite.ts';

export const OPS_MIGRATIONS: readonly Migration[] = [
  {
    version: 300,
    name: 'operations suite addon',
    up: `
      CREATE TABLE ops_settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      CREATE TABLE ops_tags (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL,
        slug TEXT NOT NULL UNIQUE,
        color TEXT NOT NULL,
        icon TEXT,
        is_default INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
      CREATE TABLE ops_server_tags (
        server_id INTEGER NOT NULL REFERENCES servers(id) ON DELETE CASCADE,
        tag_id INTEGER NOT NULL REFERENCES ops_tags(id) ON DELETE CASCADE,
        PRIMARY KEY (server_id, tag_id)
      );
      CREATE INDEX ops_server_tags_tag ON ops_server_tags(tag_id);
      CREATE TABLE ops_templates (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL,
        category TEXT NOT NULL,
        description TEXT,
        is_default INTEGER NOT NULL DEFAULT 0,
        config TEXT NOT NULL DEFAULT '{}',
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
      CREATE TABLE ops_template_revisions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        template_id INTEGER NOT NULL REFERENCES ops_templates(id) ON DELETE CASCADE,
        revision INTEGER NOT NULL,
        config TEXT NOT NULL,
        created_by INTEGER REFERENCES users(id) ON DELETE SET NULL,
        created_at TEXT NOT NULL,
        UNIQUE (template_id, revision)
      );
      CREATE TABLE ops_template_favorites (
        template_id INTEGER NOT NULL REFERENCES ops_templates(id) ON DELETE CASCADE,
        user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        PRIMARY KEY (template_id, user_id)
      );
      CREATE TABLE ops_allocation_recents (
        user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        allocation_id INTEGER NOT NULL REFERENCES allocations(id) ON DELETE CASCADE,
        used_at TEXT NOT NULL,
        PRIMARY KEY (user_id, allocation_id)
      );
      CREATE TABLE ops_bulk_jobs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        uuid TEXT NOT NULL UNIQUE,
        type TEXT NOT NULL,
        label TEXT NOT NULL,
        status TEXT NOT NULL,
        options TEXT NOT NULL DEFAULT '{}',
        actor_id INTEGER REFERENCES users(id) ON DELETE SET NULL,
        ip TEXT NOT NULL DEFAULT '',
        total INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        started_at TEXT,
        finished_at TEXT
      );
      CREATE TABLE ops_bulk_items (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        job_id INTEGER NOT NULL REFERENCES ops_bulk_jobs(id) ON DELETE CASCADE,
        server_id INTEGER NOT NULL,
        status TEXT NOT NULL,
        error TEXT
      );
      CREATE INDEX ops_bulk_items_job ON ops_bulk_items(job_id, id);
      CREATE TABLE ops_audit_log (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        action TEXT NOT NULL,
        actor_id INTEGER,
        server_id INTEGER,
        node_id INTEGER,
        payload TEXT NOT NULL DEFAULT '{}',
        ip TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL
      );
      CREATE INDEX ops_audit_action ON ops_audit_log(action);
      CREATE TABLE ops_node_health (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        node_id INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
        snapshot_at TEXT NOT NULL,
        health_score INTEGER NOT NULL,
        status TEXT NOT NULL,
        allocation_used_pct REAL NOT NULL,
        memory_used_pct REAL NOT NULL,
        allocations_total INTEGER NOT NULL,
        allocations_used INTEGER NOT NULL,
        memory_total INTEGER NOT NULL,
        memory_assigned INTEGER NOT NULL
      );
      CREATE INDEX ops_node_health_node ON ops_node_health(node_id, snapshot_at);
    `,
  },
];

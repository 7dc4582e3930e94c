/**
 * The operations suite's records: settings, tags, templates and revisions, recent allocation
 * picks, bulk jobs and items, the audit log, node health snapshots, and the read queries over the
 * core tables the suite needs in one statement (allocation pages, node loads, the unified activity
 * feed). A synchronous SQLite driver behind the asynchronous OpsStore, like the trash bin's; every
 * multi-row change is one method and one transaction.
 */
import type { SQLInputValue } from 'node:sqlite';
import type { Database } from '../../../../src/lib/sqlite.ts';
import { promisify, type Async, type Page } from '../../store/repository.ts';
import type { AllocationRow } from '../../store/records.ts';
import type { NodeLoad } from './health.ts';

export type TagRow = { id: number; name: string; slug: string; color: string; icon: string | null; is_default: number; created_at: string; updated_at: string };
export type TagValues = Pick<TagRow, 'name' | 'slug' | 'color' | 'icon' | 'is_default'>;
export type TemplateRow = { id: number; name: string; category: string; description: string | null; is_default: number; config: string; created_at: string; updated_at: string };
export type TemplateValues = Pick<TemplateRow, 'name' | 'category' | 'description' | 'is_default'>;
export type RevisionRow = { id: number; template_id: number; revision: number; config: string; created_by: number | null; created_at: string };
export type JobRow = {
  id: number;
  uuid: string;
  type: string;
  label: string;
  status: string;
  options: string;
  actor_id: number | null;
  ip: string;
  total: number;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
};
export type JobItemRow = { id: number; job_id: number; server_id: number; status: string; error: string | null };
export type AuditRow = { id: number; action: string; actor_id: number | null; server_id: number | null; node_id: number | null; payload: string; ip: string; created_at: string };
export type SnapshotRow = {
  id: number;
  node_id: number;
  snapshot_at: string;
  health_score: number;
  status: string;
  allocation_used_pct: number;
  memory_used_pct: number;
  allocations_total: number;
  allocations_used: number;
  memory_total: number;
  memory_assigned: number;
};
export type FeedRow = { id: number; source: string; event: string; server_id: number | null; node_id: number | null; actor_id: number | null; payload: string; created_at: string };

/** An allocation page's position: the last row of the previous page (pages sort by port, then id). */
export interface AllocationCursor {
  port: number;
  id: number;
}

const RECENTS_KEPT = 10;

export interface OpsStoreSync {
  settingRows(): Record<string, string>;
  saveSettings(rows: readonly [string, string][]): void;

  tags(): TagRow[];
  tag(id: number): TagRow | undefined;
  tagBySlug(slug: string): TagRow | undefined;
  insertTag(v: TagValues, at: string): TagRow;
  updateTag(id: number, v: TagValues, at: string): TagRow | undefined;
  removeTag(id: number): boolean;
  /** The tags of each server among `serverIds` (servers without tags are left out). */
  tagsOfServers(serverIds: readonly number[]): (TagRow & { server_id: number })[];
  /** Replaces a server's tags with `tagIds`. */
  setServerTags(serverId: number, tagIds: readonly number[]): void;
  /** Adds (or removes) `tagIds` on a server; returns how many links changed. */
  changeServerTags(serverId: number, tagIds: readonly number[], add: boolean): number;

  templates(): TemplateRow[];
  template(id: number): TemplateRow | undefined;
  /** Creates a template and its revision 1. */
  insertTemplate(v: TemplateValues, config: string, actorId: number | null, at: string): TemplateRow;
  /** Updates metadata (when given) and the config, appending the next revision. */
  saveTemplate(id: number, v: TemplateValues | undefined, config: string, actorId: number | null, at: string): TemplateRow | undefined;
  removeTemplate(id: number): boolean;
  revisions(templateId: number): RevisionRow[];
  /** Flips a user's favorite mark; returns the new state. */
  toggleFavorite(templateId: number, userId: number): boolean;
  favoriteIds(userId: number): number[];

  allocationPage(nodeId: number, o: { search: string; freeOnly: boolean; perPage: number; after?: AllocationCursor | undefined }): AllocationRow[];
  /** The nearest free allocation of a node above (or below) a port. */
  nearFree(nodeId: number, port: number, above: boolean): AllocationRow | undefined;
  randomFree(nodeId: number): AllocationRow | undefined;
  /** First free allocations of a node not among `exclude`, lowest port first. */
  firstFree(nodeId: number, exclude: ReadonlySet<number>): AllocationRow | undefined;
  addRecent(userId: number, allocationId: number, at: string): void;
  recents(userId: number): AllocationRow[];
  /** Every node's records in numbers (allocations, memory of its servers). */
  nodeLoads(): NodeLoad[];
  /** The id SQLite gives the next server (the naming pattern's {server_id}). */
  nextServerId(): number;
  /**
   * Re-points a server to a free allocation of another node in one transaction: its allocations
   * on the old node are released. False when the target node has no free allocation.
   */
  moveServer(serverId: number, targetNodeId: number, at: string): boolean;

  insertJob(job: Omit<JobRow, 'id'>, serverIds: readonly number[]): JobRow;
  job(uuid: string): JobRow | undefined;
  jobItems(jobId: number): JobItemRow[];
  setJob(id: number, values: Partial<Pick<JobRow, 'status' | 'started_at' | 'finished_at'>>): void;
  setItem(id: number, status: string, error: string | null): void;
  /** Jobs not finished (a restart resumes them). */
  unfinishedJobs(): JobRow[];

  audit(row: Omit<AuditRow, 'id'>): void;
  auditPage(o: { action?: string | undefined; actorId?: number | undefined; page: number; perPage: number }): Page<AuditRow>;
  /** The core activity log and the suite's audit log together, newest first. */
  feed(o: { serverId?: number | undefined; nodeId?: number | undefined; event?: string | undefined; page: number; perPage: number; label: string }): Page<FeedRow>;

  insertSnapshots(rows: readonly Omit<SnapshotRow, 'id'>[]): void;
  history(nodeId: number, limit: number): SnapshotRow[];
  latestSnapshots(): SnapshotRow[];
  pruneSnapshots(before: string): number;
}

export type OpsStore = Async<OpsStoreSync>;

/** The SQLite driver; runs once at panel start. */
export function createOpsStore(database: Database): OpsStore {
  return promisify(createSqliteOpsStore(database));
}

const like = (term: string): string => `%${term.replace(/[\\%_]/g, (m) => `\\${m}`)}%`;

function createSqliteOpsStore(database: Database): OpsStoreSync {
  const { db } = database;
  const q = (sql: string): ReturnType<typeof db.prepare> => db.prepare(sql);
  const setSetting = q('INSERT INTO ops_settings (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value');
  const tagById = q('SELECT * FROM ops_tags WHERE id = ?');
  const nextRevision = q('SELECT COALESCE(MAX(revision), 0) + 1 AS n FROM ops_template_revisions WHERE template_id = ?');
  const insertRevision = q('INSERT INTO ops_template_revisions (template_id, revision, config, created_by, created_at) VALUES (?, ?, ?, ?, ?)');
  const templateById = q('SELECT * FROM ops_templates WHERE id = ?');
  const free = 'server_id IS NULL';

  const addRevision = (templateId: number, config: string, actorId: number | null, at: string): void => {
    const n = (nextRevision.get(templateId) as { n: number }).n;
    insertRevision.run(templateId, n, config, actorId, at);
  };
  const page = <T>(from: string, args: SQLInputValue[], order: string, p: number, perPage: number, select = '*'): Page<T> => {
    const total = (db.prepare(`SELECT COUNT(*) AS n FROM ${from}`).get(...args) as { n: number }).n;
    const items = db.prepare(`SELECT ${select} FROM ${from} ORDER BY ${order} LIMIT ? OFFSET ?`).all(...args, perPage, (p - 1) * perPage) as T[];
    return { items, total, page: p, perPage };
  };

  return {
    settingRows: () => Object.fromEntries((q('SELECT key, value FROM ops_settings').all() as { key: string; value: string }[]).map((r) => [r.key, r.value])),
    saveSettings: (rows) => database.transaction(() => {
      for (const [k, v] of rows) setSetting.run(k, v);
    }),

    tags: () => q('SELECT * FROM ops_tags ORDER BY name COLLATE NOCASE, id').all() as TagRow[],
    tag: (id) => tagById.get(id) as TagRow | undefined,
    tagBySlug: (slug) => q('SELECT * FROM ops_tags WHERE slug = ?').get(slug) as TagRow | undefined,
    insertTag: (v, at) => q('INSERT INTO ops_tags (name, slug, color, icon, is_default, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING *').get(v.name, v.slug, v.color, v.icon, v.is_default, at, at) as TagRow,
    updateTag: (id, v, at) => q('UPDATE ops_tags SET name = ?, slug = ?, color = ?, icon = ?, is_default = ?, updated_at = ? WHERE id = ? RETURNING *').get(v.name, v.slug, v.color, v.icon, v.is_default, at, id) as TagRow | undefined,
    removeTag: (id) => Number(q('DELETE FROM ops_tags WHERE id = ?').run(id).changes) > 0,
    tagsOfServers: (ids) =>
      ids.length === 0
        ? []
        : (db.prepare(`SELECT t.*, st.server_id FROM ops_server_tags st JOIN ops_tags t ON t.id = st.tag_id WHERE st.server_id IN (${ids.map(() => '?').join(', ')}) ORDER BY st.server_id, t.name COLLATE NOCASE, t.id`).all(...ids) as (TagRow & { server_id: number })[]),
    setServerTags: (serverId, tagIds) => database.transaction(() => {
      q('DELETE FROM ops_server_tags WHERE server_id = ?').run(serverId);
      for (const t of tagIds) q('INSERT OR IGNORE INTO ops_server_tags (server_id, tag_id) VALUES (?, ?)').run(serverId, t);
    }),
    changeServerTags: (serverId, tagIds, add) => database.transaction(() => {
      const stmt = add ? q('INSERT OR IGNORE INTO ops_server_tags (server_id, tag_id) VALUES (?, ?)') : q('DELETE FROM ops_server_tags WHERE server_id = ? AND tag_id = ?');
      return tagIds.reduce((n, t) => n + Number(stmt.run(serverId, t).changes), 0);
    }),

    templates: () => q('SELECT * FROM ops_templates ORDER BY category COLLATE NOCASE, name COLLATE NOCASE, id').all() as TemplateRow[],
    template: (id) => templateById.get(id) as TemplateRow | undefined,
    insertTemplate: (v, config, actorId, at) => database.transaction(() => {
      const t = q('INSERT INTO ops_templates (name, category, description, is_default, config, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING *').get(v.name, v.category, v.description, v.is_default, config, at, at) as TemplateRow;
      addRevision(t.id, config, actorId, at);
      return t;
    }),
    saveTemplate: (id, v, config, actorId, at) => database.transaction(() => {
      if (templateById.get(id) === undefined) return undefined;
      if (v !== undefined) q('UPDATE ops_templates SET name = ?, category = ?, description = ?, is_default = ? WHERE id = ?').run(v.name, v.category, v.description, v.is_default, id);
      q('UPDATE ops_templates SET config = ?, updated_at = ? WHERE id = ?').run(config, at, id);
      addRevision(id, config, actorId, at);
      return templateById.get(id) as TemplateRow;
    }),
    removeTemplate: (id) => Number(q('DELETE FROM ops_templates WHERE id = ?').run(id).changes) > 0,
    revisions: (templateId) => q('SELECT * FROM ops_template_revisions WHERE template_id = ? ORDER BY revision DESC').all(templateId) as RevisionRow[],
    toggleFavorite: (templateId, userId) => database.transaction(() => {
      if (Number(q('DELETE FROM ops_template_favorites WHERE template_id = ? AND user_id = ?').run(templateId, userId).changes) > 0) return false;
      q('INSERT INTO ops_template_favorites (template_id, user_id) VALUES (?, ?)').run(templateId, userId);
      return true;
    }),
    favoriteIds: (userId) => (q('SELECT template_id FROM ops_template_favorites WHERE user_id = ? ORDER BY template_id').all(userId) as { template_id: number }[]).map((r) => r.template_id),

    allocationPage(nodeId, o) {
      const where = ['node_id = ?'];
      const args: SQLInputValue[] = [nodeId];
      if (o.freeOnly) where.push(free);
      if (o.search !== '') {
        where.push("(ip LIKE ? ESCAPE '\\' OR ip_alias LIKE ? ESCAPE '\\' OR notes LIKE ? ESCAPE '\\' OR CAST(port AS TEXT) LIKE ? ESCAPE '\\')");
        const term = like(o.search);
        args.push(term, term, term, term);
      }
      if (o.after !== undefined) {
        where.push('(port > ? OR (port = ? AND id > ?))');
        args.push(o.after.port, o.after.port, o.after.id);
      }
      return db.prepare(`SELECT * FROM allocations WHERE ${where.join(' AND ')} ORDER BY port, id LIMIT ?`).all(...args, o.perPage) as AllocationRow[];
    },
    nearFree: (nodeId, port, above) =>
      q(`SELECT * FROM allocations WHERE node_id = ? AND ${free} AND port ${above ? '>' : '<'} ? ORDER BY port ${above ? 'ASC' : 'DESC'}, id LIMIT 1`).get(nodeId, port) as AllocationRow | undefined,
    randomFree: (nodeId) => q(`SELECT * FROM allocations WHERE node_id = ? AND ${free} ORDER BY random() LIMIT 1`).get(nodeId) as AllocationRow | undefined,
    firstFree: (nodeId, exclude) => (q(`SELECT * FROM allocations WHERE node_id = ? AND ${free} ORDER BY port, id`).all(nodeId) as AllocationRow[]).find((a) => !exclude.has(a.id)),
    addRecent: (userId, allocationId, at) => database.transaction(() => {
      q('INSERT INTO ops_allocation_recents (user_id, allocation_id, used_at) VALUES (?, ?, ?) ON CONFLICT(user_id, allocation_id) DO UPDATE SET used_at = excluded.used_at').run(userId, allocationId, at);
      q('DELETE FROM ops_allocation_recents WHERE user_id = ? AND allocation_id NOT IN (SELECT allocation_id FROM ops_allocation_recents WHERE user_id = ? ORDER BY used_at DESC LIMIT ?)').run(userId, userId, RECENTS_KEPT);
    }),
    recents: (userId) => q('SELECT a.* FROM ops_allocation_recents r JOIN allocations a ON a.id = r.allocation_id WHERE r.user_id = ? ORDER BY r.used_at DESC').all(userId) as AllocationRow[],
    nodeLoads: () =>
      (
        q(`SELECT n.id AS node_id, n.name AS node_name, n.memory, n.maintenance_mode,
          (SELECT COUNT(*) FROM allocations a WHERE a.node_id = n.id) AS allocations_total,
          (SELECT COUNT(*) FROM allocations a WHERE a.node_id = n.id AND a.server_id IS NOT NULL) AS allocations_used,
          (SELECT COALESCE(SUM(s.memory), 0) FROM servers s WHERE s.node_id = n.id) AS memory_assigned
          FROM nodes n ORDER BY n.id`).all() as (Omit<NodeLoad, 'maintenance'> & { maintenance_mode: number })[]
      ).map(({ maintenance_mode, ...l }) => ({ ...l, maintenance: maintenance_mode === 1 })),
    nextServerId: () => ((q("SELECT seq FROM sqlite_sequence WHERE name = 'servers'").get() as { seq: number } | undefined)?.seq ?? 0) + 1,
    moveServer: (serverId, targetNodeId, at) => database.transaction(() => {
      const target = q(`SELECT id FROM allocations WHERE node_id = ? AND ${free} ORDER BY port, id LIMIT 1`).get(targetNodeId) as { id: number } | undefined;
      if (target === undefined) return false;
      q('UPDATE allocations SET server_id = NULL WHERE server_id = ?').run(serverId);
      q('UPDATE allocations SET server_id = ? WHERE id = ?').run(serverId, target.id);
      q('UPDATE servers SET node_id = ?, allocation_id = ?, updated_at = ? WHERE id = ?').run(targetNodeId, target.id, at, serverId);
      return true;
    }),

    insertJob: (job, serverIds) => database.transaction(() => {
      const row = q(`INSERT INTO ops_bulk_jobs (uuid, type, label, status, options, actor_id, ip, total, created_at, started_at, finished_at)
        VALUES (:uuid, :type, :label, :status, :options, :actor_id, :ip, :total, :created_at, :started_at, :finished_at) RETURNING *`).get({ ...job }) as JobRow;
      const item = q("INSERT INTO ops_bulk_items (job_id, server_id, status) VALUES (?, ?, 'pending')");
      for (const id of serverIds) item.run(row.id, id);
      return row;
    }),
    job: (uuid) => q('SELECT * FROM ops_bulk_jobs WHERE uuid = ?').get(uuid) as JobRow | undefined,
    jobItems: (jobId) => q('SELECT * FROM ops_bulk_items WHERE job_id = ? ORDER BY id').all(jobId) as JobItemRow[],
    setJob(id, values) {
      const entries = Object.entries(values).filter(([, v]) => v !== undefined);
      if (entries.length > 0) db.prepare(`UPDATE ops_bulk_jobs SET ${entries.map(([k]) => `${k} = ?`).join(', ')} WHERE id = ?`).run(...(entries.map(([, v]) => v) as SQLInputValue[]), id);
    },
    setItem: (id, status, error) => void q('UPDATE ops_bulk_items SET status = ?, error = ? WHERE id = ?').run(status, error, id),
    unfinishedJobs: () => q("SELECT * FROM ops_bulk_jobs WHERE status <> 'finished' ORDER BY id").all() as JobRow[],

    audit: (row) => void q('INSERT INTO ops_audit_log (action, actor_id, server_id, node_id, payload, ip, created_at) VALUES (:action, :actor_id, :server_id, :node_id, :payload, :ip, :created_at)').run({ ...row }),
    auditPage(o) {
      const where: string[] = [];
      const args: SQLInputValue[] = [];
      if (o.action !== undefined && o.action !== '') {
        where.push("action LIKE ? ESCAPE '\\'");
        args.push(like(o.action));
      }
      if (o.actorId !== undefined) {
        where.push('actor_id = ?');
        args.push(o.actorId);
      }
      return page<AuditRow>(`ops_audit_log${where.length > 0 ? ` WHERE ${where.join(' AND ')}` : ''}`, args, 'id DESC', o.page, o.perPage);
    },
    feed(o) {
      // Core entries: the server is the subject; the node is the subject or the subject server's node.
      const core = `SELECT a.id AS id, 'core' AS source, a.event AS event,
          CASE WHEN a.subject_type = 'server' THEN a.subject_id END AS server_id,
          CASE WHEN a.subject_type = 'node' THEN a.subject_id WHEN a.subject_type = 'server' THEN s.node_id END AS node_id,
          a.actor_id AS actor_id, a.properties AS payload, a.timestamp AS created_at
        FROM activity_logs a LEFT JOIN servers s ON a.subject_type = 'server' AND s.id = a.subject_id`;
      const own = 'SELECT id, ? AS source, action AS event, server_id, node_id, actor_id, payload, created_at FROM ops_audit_log';
      const where: string[] = [];
      const args: SQLInputValue[] = [o.label];
      if (o.serverId !== undefined) {
        where.push('server_id = ?');
        args.push(o.serverId);
      }
      if (o.nodeId !== undefined) {
        where.push('node_id = ?');
        args.push(o.nodeId);
      }
      if (o.event !== undefined && o.event !== '') {
        where.push("event LIKE ? ESCAPE '\\'");
        args.push(like(o.event));
      }
      return page<FeedRow>(`(${core} UNION ALL ${own})${where.length > 0 ? ` WHERE ${where.join(' AND ')}` : ''}`, args, 'created_at DESC, source, id DESC', o.page, o.perPage);
    },

    insertSnapshots: (rows) => database.transaction(() => {
      const stmt = q(`INSERT INTO ops_node_health (node_id, snapshot_at, health_score, status, allocation_used_pct, memory_used_pct, allocations_total, allocations_used, memory_total, memory_assigned)
        VALUES (:node_id, :snapshot_at, :health_score, :status, :allocation_used_pct, :memory_used_pct, :allocations_total, :allocations_used, :memory_total, :memory_assigned)`);
      for (const r of rows) stmt.run({ ...r });
    }),
    history: (nodeId, limit) => q('SELECT * FROM ops_node_health WHERE node_id = ? ORDER BY snapshot_at DESC, id DESC LIMIT ?').all(nodeId, limit) as SnapshotRow[],
    latestSnapshots: () => q('SELECT h.* FROM ops_node_health h WHERE h.id = (SELECT id FROM ops_node_health x WHERE x.node_id = h.node_id ORDER BY snapshot_at DESC, id DESC LIMIT 1) ORDER BY h.node_id').all() as SnapshotRow[],
    pruneSnapshots: (before) => Number(q('DELETE FROM ops_node_health WHERE snapshot_at < ?').run(before).changes),
  };
}

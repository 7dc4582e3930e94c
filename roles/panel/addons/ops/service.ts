/**
 * The operations suite's work that does not depend on HTTP: settings through a 300 s cache that
 * saves clear at once, tags (validation, slugs, server links, the default tags of new servers),
 * templates with revisions and favorites, the naming pattern, allocation picks, search, the audit
 * log, and node health (grading, snapshots every 10 minutes kept health_retention_days, node
 * recommendations). Used by the admin routes and the application API alike.
 */
import { AppError } from '../../../../src/core/app-error.ts';
import type { PanelContext } from '../../context.ts';
import { found, now } from '../../services/records.ts';
import { COUNT, createValidator, ID, trimInput, validationError } from '../../services/validation.ts';
import type { AllocationRow } from '../../store/records.ts';
import { gradeNode, recommendNodes, type NodeGrade, type NodeRecommendation } from './health.ts';
import { resolveName } from './naming.ts';
import { encodeSettings, OPS_DEFAULTS, parseSettings, validateSettingsUpdate, validateTagsVisibility, type OpsSettings, type SettingsUpdate } from './settings.ts';
import type { AuditRow, OpsStore, SnapshotRow, TagRow, TemplateRow } from './store.ts';

/** How long a settings read is reused (spec/2 §2.5, §8). */
export const SETTINGS_CACHE_MS = 300_000;
/** How often node health is snapshotted (spec/2 §6.3). */
export const HEALTH_INTERVAL_MS = 600_000;
/** Snapshots a node's health history returns (spec/2 §8). */
export const HISTORY = 48;
/** The suite's `source` label in the activity feed (spec/2 §4.3 leaves it open). */
export const SOURCE_LABEL = 'ops';

/** Who made a change, for the audit log. */
export interface Who {
  actorId: number | null;
  ip: string;
}

const TAG_PROPS = {
  name: { type: 'string', minLength: 1, maxLength: 60 },
  // alpha_dash of the reference: Unicode letters and digits, dashes and underscores (Ajv compiles patterns with the u flag).
  slug: { type: ['string', 'null'], maxLength: 60, pattern: '^[\\p{L}\\p{N}_-]*$', description: 'may only contain letters, digits, dashes and underscores' },
  color: { type: 'string', pattern: '^#[0-9a-fA-F]{6}$', description: 'must be a colour like #1d5fbf' },
  icon: { type: ['string', 'null'], maxLength: 40 },
  is_default: { type: 'boolean' },
};
type TagInput = { name: string; slug?: string | null; color: string; icon?: string | null; is_default?: boolean };
const validateTag = createValidator<TagInput>({ required: ['name', 'color'], properties: TAG_PROPS });
/** Most tag ids one list (a server's tags, a bulk job's, a template's) may carry. */
export const MAX_TAG_IDS = 100;
const TAG_IDS = { type: 'array', maxItems: MAX_TAG_IDS, items: ID };
const validateTagIds = createValidator<{ tag_ids: number[] }>({ required: ['tag_ids'], properties: { tag_ids: TAG_IDS } });

const CONFIG_PROPS = {
  cpu: COUNT,
  threads: { type: 'string', maxLength: 191, pattern: '^[0-9,-]*$', description: 'must list CPU cores like 0-1,3' },
  memory: COUNT,
  swap: { type: 'integer', minimum: -1 },
  disk: COUNT,
  io: { type: 'integer', minimum: 10, maximum: 1000 },
  database_limit: COUNT,
  allocation_limit: COUNT,
  backup_limit: COUNT,
  startup: { type: 'string', maxLength: 4000 },
  image: { type: 'string', maxLength: 255 },
  custom_image: { type: 'string', maxLength: 255 },
  nest_id: ID,
  egg_id: ID,
  oom_disabled: { type: 'boolean' },
  skip_scripts: { type: 'boolean' },
  tag_ids: TAG_IDS,
};
const TEMPLATE_PROPS = {
  name: { type: 'string', minLength: 1, maxLength: 100 },
  category: { type: 'string', minLength: 1, maxLength: 60 },
  description: { type: ['string', 'null'], maxLength: 500 },
  is_default: { type: 'boolean' },
  config: { type: 'object', additionalProperties: false, properties: CONFIG_PROPS },
};
type TemplateInput = { name: string; category: string; description?: string | null; is_default?: boolean; config?: Record<string, unknown> };
const validateTemplate = createValidator<TemplateInput>({ required: ['name', 'category'], properties: TEMPLATE_PROPS });
const validateRevision = createValidator<{ config: Record<string, unknown> }>({ required: ['config'], properties: { config: TEMPLATE_PROPS.config } });
const validateClone = createValidator<{ name?: string }>({ properties: { name: TEMPLATE_PROPS.name } });

const NAMING_PREVIEW = createValidator<Record<string, number | undefined>>({
  properties: Object.fromEntries(['owner_id', 'node_id', 'egg_id', 'memory', 'disk', 'cpu', 'index', 'batch_offset'].map((k) => [k, { type: 'integer', minimum: k === 'index' ? 1 : 0 }])),
});

/** Empty optional values ('' , null, []) are dropped from a template config (spec/2 §2.6). */
function stripEmpty(config: unknown): unknown {
  if (typeof config !== 'object' || config === null || Array.isArray(config)) return config;
  return Object.fromEntries(Object.entries(config).filter(([, v]) => v !== '' && v !== null && v !== undefined && !(Array.isArray(v) && v.length === 0)));
}

/** A slug from a name: accents dropped, lower case, runs of other characters as one dash. Pure. */
export function slugify(name: string): string {
  const s = name.normalize('NFKD').replace(/\p{M}+/gu, '').toLowerCase().replace(/[^a-z0-9_]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 60);
  return s === '' ? 'tag' : s;
}

export function tagAttributes(t: TagRow): Record<string, unknown> {
  return { id: t.id, name: t.name, slug: t.slug, color: t.color, icon: t.icon, is_default: t.is_default === 1, created_at: t.created_at, updated_at: t.updated_at };
}

export function allocationObject(a: AllocationRow): Record<string, unknown> {
  return { id: a.id, node_id: a.node_id, ip: a.ip, ip_alias: a.ip_alias, port: a.port, notes: a.notes, assigned: a.server_id !== null, server_id: a.server_id };
}

export function snapshotAttributes(s: Pick<SnapshotRow, 'snapshot_at' | 'health_score' | 'status' | 'allocation_used_pct' | 'memory_used_pct'>): Record<string, unknown> {
  return { snapshot_at: s.snapshot_at, health_score: s.health_score, status: s.status, allocation_used_pct: s.allocation_used_pct, memory_used_pct: s.memory_used_pct };
}

export interface OpsService {
  store: OpsStore;
  settings(): Promise<OpsSettings>;
  /** Validates and saves every key but tags_visible_to_users; writes the `settings.updated` audit entry. */
  saveSettings(input: unknown, who: Who): Promise<OpsSettings>;
  saveTagsVisibility(input: unknown, who: Who): Promise<boolean | null>;
  audit(who: Who, action: string, o?: { server_id?: number | null; node_id?: number | null; payload?: Record<string, unknown> }): Promise<void>;
  auditAttributes(row: AuditRow): Record<string, unknown>;

  createTag(input: unknown, who: Who): Promise<TagRow>;
  updateTag(id: number, input: unknown, who: Who): Promise<TagRow>;
  deleteTag(id: number, who: Who): Promise<void>;
  /** Validates `tag_ids` (array of existing tags); throws ERR_VALIDATION naming the field. */
  checkTagIds(ids: unknown, field: string): Promise<number[]>;
  syncServerTags(serverId: number, input: unknown, who: Who): Promise<void>;
  tagsByServers(ids: readonly number[]): Promise<Record<string, { id: number; name: string; color: string; icon: string | null }[]>>;

  templateAttributes(t: TemplateRow, favorites: ReadonlySet<number>): Promise<Record<string, unknown>>;
  createTemplate(input: unknown, who: Who): Promise<TemplateRow>;
  saveTemplate(id: number, input: unknown, who: Who): Promise<TemplateRow>;
  addRevision(id: number, input: unknown, who: Who): Promise<TemplateRow>;
  cloneTemplate(id: number, input: unknown, who: Who): Promise<TemplateRow>;
  deleteTemplate(id: number, who: Who): Promise<void>;

  /** The naming preview of spec/2 §4.3. */
  previewName(input: unknown): Promise<{ name: string; pattern: string }>;
  /** A pattern name for a server to be created (used by multi-create for nameless entries). */
  nameFor(v: { owner_id?: number; node_id?: number; egg_id?: number; memory?: number; disk?: number; cpu?: number; index: number; offset?: number }): Promise<string>;

  search(q: string): Promise<Record<string, Record<string, unknown>[]>>;

  /** Every node graded from the records now. */
  gradeNodes(): Promise<{ node_id: number; node_name: string; grade: NodeGrade }[]>;
  nodeHealth(nodeId: number): Promise<Record<string, unknown>>;
  recommendations(memoryMb: number): Promise<NodeRecommendation[]>;
  /** Writes one snapshot per node and prunes those past health_retention_days; returns how many were written. */
  snapshotHealth(at?: Date): Promise<number>;
  start(): void;
  stop(): Promise<void>;
}

/** Runs once per panel process. */
export function createOpsService(ctx: PanelContext, store: OpsStore): OpsService {
  let cache: { at: number; value: OpsSettings } | undefined;
  let timer: NodeJS.Timeout | undefined;

  const settings = async (): Promise<OpsSettings> => {
    if (cache !== undefined && Date.now() - cache.at < SETTINGS_CACHE_MS) return cache.value;
    try {
      cache = { at: Date.now(), value: parseSettings(await store.settingRows()) };
      return cache.value;
    } catch (err) {
      ctx.logger.error({ err }, 'could not read the operations settings; using the defaults');
      return { ...OPS_DEFAULTS };
    }
  };

  const audit: OpsService['audit'] = async (who, action, o = {}) => {
    try {
      await store.audit({ action, actor_id: who.actorId, server_id: o.server_id ?? null, node_id: o.node_id ?? null, payload: JSON.stringify(o.payload ?? {}), ip: who.ip, created_at: now() });
    } catch (err) {
      ctx.logger.error({ err, action }, 'could not write an operations audit entry');
    }
  };

  /**
   * A tag's values. A given slug must be free; a blank or null one is made from the name (`-2`,
   * `-3` … when taken). On an update (`current`), a `slug`, `icon` or `is_default` left out keeps
   * the stored value (§4.3: nullable and "sometimes" fields); an explicit null icon clears it.
   */
  const tagValues = async (input: unknown, current?: TagRow): Promise<Omit<TagRow, 'id' | 'created_at' | 'updated_at'>> => {
    const v = validateTag(trimInput(input, ['name', 'color'], ['slug', 'icon']));
    let slug = v.slug === undefined ? (current?.slug ?? '') : (v.slug ?? '');
    if (slug === current?.slug) {
      // Unchanged: already this tag's own.
    } else if (slug !== '') {
      const other = await store.tagBySlug(slug);
      if (other !== undefined && other.id !== current?.id) throw validationError([{ field: 'slug', rule: 'unique', detail: 'the slug has already been taken' }]);
    } else {
      const base = slugify(v.name);
      slug = base;
      for (let n = 2; ; n++) {
        const other = await store.tagBySlug(slug);
        if (other === undefined || other.id === current?.id) break;
        slug = `${base.slice(0, 55)}-${n}`;
      }
    }
    return {
      name: v.name,
      slug,
      color: v.color.toLowerCase(),
      icon: v.icon === undefined ? (current?.icon ?? null) : v.icon,
      is_default: v.is_default === undefined ? (current?.is_default ?? 0) : v.is_default ? 1 : 0,
    };
  };

  const checkTagIds = async (ids: unknown, field: string): Promise<number[]> => {
    let v: number[];
    try {
      v = validateTagIds({ tag_ids: ids }).tag_ids;
    } catch (err) {
      if (err instanceof AppError) {
        if (Array.isArray(ids) && ids.length > MAX_TAG_IDS) throw validationError([{ field, rule: 'max', detail: `the ${field} field may list at most ${MAX_TAG_IDS} tag ids` }]);
        throw validationError([{ field, rule: 'array', detail: `the ${field} field must be an array of tag ids` }]);
      }
      throw err;
    }
    const known = new Set((await store.tags()).map((t) => t.id));
    const missing = v.filter((id) => !known.has(id));
    if (missing.length > 0) throw validationError([{ field, rule: 'exists', detail: `the ${field} field names tags that do not exist: ${missing.join(', ')}` }]);
    return [...new Set(v)];
  };

  const templateInput = (input: unknown, validate: (i: unknown) => TemplateInput): TemplateInput => {
    if (typeof input !== 'object' || input === null || Array.isArray(input)) return validate(input ?? {});
    const raw = trimInput(input, ['name', 'category'], ['description']) as Record<string, unknown>;
    return validate({ ...raw, ...('config' in raw ? { config: stripEmpty(raw.config) } : {}) });
  };
  const configTags = async (config: Record<string, unknown> | undefined): Promise<void> => {
    if (config?.tag_ids !== undefined) await checkTagIds(config.tag_ids, 'config.tag_ids');
  };
  const templateValues = (v: TemplateInput): { name: string; category: string; description: string | null; is_default: number } => ({
    name: v.name,
    category: v.category,
    description: v.description ?? null,
    is_default: v.is_default === true ? 1 : 0,
  });

  const nameFor: OpsService['nameFor'] = async (v) => {
    const s = await settings();
    const [owner, node, egg] = await Promise.all([
      v.owner_id === undefined ? undefined : ctx.store.users.find(v.owner_id),
      v.node_id === undefined ? undefined : ctx.store.nodes.find(v.node_id),
      v.egg_id === undefined ? undefined : ctx.store.eggs.find(v.egg_id),
    ]);
    return resolveName(s.naming_pattern, {
      server_id: (await store.nextServerId()) + (v.offset ?? 0),
      username: owner?.username,
      memory: v.memory,
      disk: v.disk,
      cpu: v.cpu,
      egg: egg?.name,
      node: node?.name,
      index: v.index,
    });
  };

  const gradeNodes: OpsService['gradeNodes'] = async () => {
    const s = await settings();
    return (await store.nodeLoads()).map((l) => ({ node_id: l.node_id, node_name: l.node_name, grade: gradeNode(l, { warn: s.node_pressure_warn_pct, crit: s.node_pressure_crit_pct }) }));
  };

  const snapshotHealth: OpsService['snapshotHealth'] = async (at = new Date()) => {
    const s = await settings();
    const t = { warn: s.node_pressure_warn_pct, crit: s.node_pressure_crit_pct };
    const loads = await store.nodeLoads();
    const stamp = at.toISOString();
    await store.insertSnapshots(
      loads.map((l) => ({
        node_id: l.node_id,
        snapshot_at: stamp,
        ...gradeNode(l, t),
        allocations_total: l.allocations_total,
        allocations_used: l.allocations_used,
        memory_total: l.memory,
        memory_assigned: l.memory_assigned,
      })),
    );
    await store.pruneSnapshots(new Date(at.getTime() - s.health_retention_days * 86_400_000).toISOString());
    return loads.length;
  };

  return {
    store,
    settings,
    async saveSettings(input, who) {
      const v: SettingsUpdate = validateSettingsUpdate(trimInput(input, ['naming_pattern', 'upgrade_message']));
      await store.saveSettings(encodeSettings(v));
      cache = undefined;
      await audit(who, 'settings.updated', { payload: { ...v } });
      return settings();
    },
    async saveTagsVisibility(input, who) {
      const v = validateTagsVisibility(input);
      await store.saveSettings(encodeSettings(v));
      cache = undefined;
      await audit(who, 'settings.tags_visibility', { payload: { ...v } });
      return v.tags_visible_to_users;
    },
    audit,
    auditAttributes: (r) => ({ id: r.id, action: r.action, actor_id: r.actor_id, server_id: r.server_id, node_id: r.node_id, payload: JSON.parse(r.payload) as unknown, ip: r.ip, created_at: r.created_at }),

    async createTag(input, who) {
      const tag = await store.insertTag(await tagValues(input), now());
      await audit(who, 'tag.created', { payload: tagAttributes(tag) });
      return tag;
    },
    async updateTag(id, input, who) {
      const current = found(await store.tag(id), 'tag');
      const tag = found(await store.updateTag(id, await tagValues(input, current), now()), 'tag');
      await audit(who, 'tag.updated', { payload: tagAttributes(tag) });
      return tag;
    },
    async deleteTag(id, who) {
      const tag = found(await store.tag(id), 'tag');
      await store.removeTag(id);
      await audit(who, 'tag.deleted', { payload: { id, name: tag.name, slug: tag.slug } });
    },
    checkTagIds,
    async syncServerTags(serverId, input, who) {
      const server = found(await ctx.store.servers.find(serverId), 'server');
      const ids = await checkTagIds((typeof input === 'object' && input !== null ? (input as Record<string, unknown>) : {}).tag_ids, 'tag_ids');
      await store.setServerTags(serverId, ids);
      await audit(who, 'server.tags_synced', { server_id: serverId, node_id: server.node_id, payload: { tag_ids: ids } });
    },
    async tagsByServers(ids) {
      const out: Record<string, { id: number; name: string; color: string; icon: string | null }[]> = {};
      for (const id of ids) out[String(id)] = [];
      for (const t of await store.tagsOfServers(ids)) out[String(t.server_id)]?.push({ id: t.id, name: t.name, color: t.color, icon: t.icon });
      return out;
    },

    async templateAttributes(t, favorites) {
      const revisions = await store.revisions(t.id);
      return {
        id: t.id,
        name: t.name,
        category: t.category,
        description: t.description,
        is_default: t.is_default === 1,
        config: JSON.parse(t.config) as unknown,
        favorited: favorites.has(t.id),
        revision: revisions[0]?.revision ?? 0,
        revisions: revisions.map((r) => ({ revision: r.revision, created_by: r.created_by, created_at: r.created_at })),
        created_at: t.created_at,
        updated_at: t.updated_at,
      };
    },
    async createTemplate(input, who) {
      const v = templateInput(input, validateTemplate);
      await configTags(v.config);
      const t = await store.insertTemplate(templateValues(v), JSON.stringify(v.config ?? {}), who.actorId, now());
      await audit(who, 'template.created', { payload: { id: t.id, name: t.name } });
      return t;
    },
    async saveTemplate(id, input, who) {
      found(await store.template(id), 'template');
      const v = templateInput(input, validateTemplate);
      await configTags(v.config);
      const t = found(await store.saveTemplate(id, templateValues(v), JSON.stringify(v.config ?? {}), who.actorId, now()), 'template');
      await audit(who, 'template.saved', { payload: { id, name: t.name } });
      return t;
    },
    async addRevision(id, input, who) {
      found(await store.template(id), 'template');
      const v = templateInput(input, validateRevision as (i: unknown) => TemplateInput);
      await configTags(v.config);
      const t = found(await store.saveTemplate(id, undefined, JSON.stringify(v.config ?? {}), who.actorId, now()), 'template');
      await audit(who, 'template.revision', { payload: { id, name: t.name } });
      return t;
    },
    async cloneTemplate(id, input, who) {
      const source = found(await store.template(id), 'template');
      // A blank or null name takes the default, as `nullable` would.
      const raw = trimInput(input ?? {}, ['name']);
      const v = validateClone(typeof raw === 'object' && raw !== null && (raw as Record<string, unknown>).name === null ? { ...raw, name: undefined } : raw);
      // Cut by characters, as the 100-character limit counts them: a UTF-16 cut could split an emoji in two.
      const name = v.name ?? `${[...source.name].slice(0, 93).join('')} (copy)`;
      const t = await store.insertTemplate({ name, category: source.category, description: source.description, is_default: 0 }, source.config, who.actorId, now());
      await audit(who, 'template.cloned', { payload: { id: t.id, from: id, name } });
      return t;
    },
    async deleteTemplate(id, who) {
      const t = found(await store.template(id), 'template');
      await store.removeTemplate(id);
      await audit(who, 'template.deleted', { payload: { id, name: t.name } });
    },

    async previewName(input) {
      const v = NAMING_PREVIEW(input);
      return {
        name: await nameFor({ owner_id: v.owner_id, node_id: v.node_id, egg_id: v.egg_id, memory: v.memory, disk: v.disk, cpu: v.cpu, index: v.index ?? 1, offset: v.batch_offset ?? 0 }),
        pattern: (await settings()).naming_pattern,
      };
    },
    nameFor,

    async search(q) {
      const take = 10;
      const find = (columns: string[]): { perPage: number; search: { columns: string[]; term: string } } => ({ perPage: take, search: { columns, term: q } });
      const [servers, users, allocations, nodes, tags] = await Promise.all([
        ctx.store.servers.list(find(['name', 'uuid', 'identifier', 'description'])),
        ctx.store.users.list(find(['username', 'email', 'first_name', 'last_name'])),
        ctx.store.allocations.list(find(['ip', 'ip_alias', 'port', 'notes'])),
        ctx.store.nodes.list(find(['name', 'fqdn', 'description'])),
        store.tags(),
      ]);
      const lower = q.toLowerCase();
      return {
        servers: servers.items.map((s) => ({ id: s.id, uuid: s.uuid, identifier: s.identifier, name: s.name, node_id: s.node_id, owner_id: s.owner_id, suspended: s.suspended === 1 })),
        users: users.items.map((u) => ({ id: u.id, username: u.username, email: u.email, root_admin: u.root_admin === 1 })),
        allocations: allocations.items.map(allocationObject),
        nodes: nodes.items.map((n) => ({ id: n.id, name: n.name, fqdn: n.fqdn })),
        tags: tags.filter((t) => t.name.toLowerCase().includes(lower) || t.slug.toLowerCase().includes(lower)).slice(0, take).map(tagAttributes),
      };
    },

    gradeNodes,
    async nodeHealth(nodeId) {
      const node = found(await ctx.store.nodes.find(nodeId), 'node');
      const history = await store.history(nodeId, HISTORY);
      const live = (await gradeNodes()).find((g) => g.node_id === nodeId);
      // Before the first snapshot of a node (a node created since the last run), latest is graded now.
      const latest = history[0] !== undefined ? snapshotAttributes(history[0]) : live === undefined ? null : snapshotAttributes({ snapshot_at: now(), ...live.grade });
      return { node: { id: node.id, name: node.name, fqdn: node.fqdn, memory: node.memory, disk: node.disk }, latest, history: history.map(snapshotAttributes) };
    },
    async recommendations(memoryMb) {
      const s = await settings();
      return recommendNodes(await store.nodeLoads(), memoryMb, { warn: s.node_pressure_warn_pct, crit: s.node_pressure_crit_pct });
    },
    snapshotHealth,
    start() {
      const run = (): void => {
        snapshotHealth().catch((err: unknown) => ctx.logger.error({ err }, 'the node health snapshot failed'));
      };
      run();
      timer = setInterval(run, HEALTH_INTERVAL_MS);
      timer.unref();
    },
    stop() {
      if (timer !== undefined) clearInterval(timer);
      timer = undefined;
      return Promise.resolve();
    },
  };
}

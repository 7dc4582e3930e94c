/**
 * The operations suite's HTML pages (no scripts, like every panel page): the dashboard, settings,
 * tags, templates, multi-create and its results, node health and the audit log. The JSON
 * endpoints next to them serve page scripts and integrations.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { PanelContext } from '../../context.ts';
import type { Page } from '../../store/repository.ts';
import {
  actionButton,
  confirmButton,
  checkboxField,
  csrfToken,
  formOf,
  formSummary,
  html,
  inputField,
  pager,
  postForm,
  selectField,
  sendPage,
  textareaField,
  type FormState,
  type SafeHtml,
  rowsOrNone,
} from '../../web/index.ts';
import type { Handlers } from './handlers.ts';
import type { MultiCreateResult } from './multicreate.ts';
import { tagAttributes, type OpsService } from './service.ts';
import { SETTINGS_SCHEMA, type OpsSettings } from './settings.ts';
import type { AuditRow } from './store.ts';

const BASE = '/admin/ops';
const LINKS: [string, string, string][] = [
  ['Multi-create', `${BASE}/multicreate`, 'create up to 50 servers at once, named by the pattern'],
  ['Tags', `${BASE}/tags`, 'label servers; optionally shown to their owners'],
  ['Templates', `${BASE}/templates`, 'server configurations with revisions'],
  ['Node health', `${BASE}/health`, 'allocation and memory use per node, snapshots every 10 minutes'],
  ['Audit log', `${BASE}/audit`, 'every change made through the operations suite'],
  ['Settings', `${BASE}/settings`, 'naming pattern, page sizes, health levels, bulk move'],
];

const badge = (status: string): SafeHtml => html`<span class="badge ${status === 'healthy' ? 'green' : status === 'critical' ? 'red' : ''}">${status}</span>`;

/** `/admin/ops`: counts and links to every part. */
export async function dashboardPage(req: FastifyRequest, reply: FastifyReply, ctx: PanelContext, service: OpsService): Promise<FastifyReply> {
  const [tags, templates, grades, servers] = await Promise.all([service.store.tags(), service.store.templates(), service.gradeNodes(), ctx.store.servers.list({ perPage: 1 })]);
  const count = (s: string): number => grades.filter((g) => g.grade.status === s).length;
  const body = html`<h1>Operations</h1>
<div class="stats" id="ops-stats"><div class="stat"><b>${servers.total}</b>servers</div><div class="stat"><b>${tags.length}</b>tags</div><div class="stat"><b>${templates.length}</b>templates</div><div class="stat"><b>${count('healthy')}</b>healthy nodes</div><div class="stat"><b>${count('warning')}</b>nodes at warning</div><div class="stat"><b>${count('critical')}</b>critical nodes</div></div>
<div class="card"><h2>Tools</h2><table id="ops-links">${LINKS.map(([label, href, what]) => html`<tr><td><a href="${href}">${label}</a></td><td>${what}</td></tr>`)}</table>
<p class="help">Bulk operations, search, the allocation picker and the activity feed are JSON endpoints under <code>${BASE}</code> (and <code>/api/application/ops</code>); see docs/panel.md.</p></div>`;
  return sendPage(req, reply, { title: 'Operations', body });
}

const LABELS: Record<string, string> = {
  naming_pattern: 'Naming pattern',
  allocation_page_size: 'Allocation picker page size',
  metrics_retention_days: 'Metrics retention (days)',
  upgrade_cpu_threshold: 'Upgrade CPU threshold (%)',
  upgrade_ram_threshold: 'Upgrade RAM threshold (%)',
  upgrade_disk_threshold: 'Upgrade disk threshold (%)',
  upgrade_window_hours: 'Upgrade window (hours)',
  upgrade_cooldown_hours: 'Upgrade cooldown (hours)',
  upgrade_message: 'Upgrade message',
  health_crash_threshold: 'Crash threshold (restarts)',
  health_window_hours: 'Health window (hours)',
  health_retention_days: 'Health snapshot retention (days)',
  node_pressure_warn_pct: 'Node pressure warning (%)',
  node_pressure_crit_pct: 'Node pressure critical (%)',
};

/** `/admin/ops/settings`: the settings form (every key but tag visibility, which the tags page sets). */
export function settingsPage(req: FastifyRequest, reply: FastifyReply, s: OpsSettings, form?: FormState, status = 200): FastifyReply {
  const f = form ?? formOf({ ...Object.fromEntries(Object.entries(s).filter(([k]) => k !== 'tags_visible_to_users' && k !== 'bulk_move_enabled')), bulk_move_enabled: s.bulk_move_enabled ? 'on' : '' } as Record<string, string | number>);
  const field = (k: keyof typeof LABELS): SafeHtml => {
    const rule = SETTINGS_SCHEMA[k as keyof typeof SETTINGS_SCHEMA] as { type: string; minimum?: number; maximum?: number; maxLength?: number };
    return inputField(f, k, LABELS[k] ?? k, rule.type === 'integer' ? { type: 'number', help: `${rule.minimum ?? 0} to ${rule.maximum ?? 0}` } : { help: `up to ${rule.maxLength ?? 0} characters` });
  };
  const body = html`<h1>Operations settings</h1>${formSummary(f)}<div class="card">${postForm(
    `${BASE}/settings`,
    csrfToken(req, reply),
    html`<h2>Naming</h2>${field('naming_pattern')}<p class="help">Tokens: {server_id} {username} {ram} {disk} {cpu} {egg} {node} {index}. Other characters than letters, digits, spaces, - _ . : ( ) [ ] # @ are removed; names are cut to 191 characters.</p>
<div class="grid">${field('allocation_page_size')}${field('health_retention_days')}${field('node_pressure_warn_pct')}${field('node_pressure_crit_pct')}</div>
${checkboxField(f, 'bulk_move_enabled', 'Allow bulk move (re-points node and allocation records only; no server data moves)')}
<h2>Usage analytics and server health</h2><p class="help">Stored for compatibility with the operations suite's settings; this panel has no server daemon reporting CPU, memory, disk or restarts, so nothing reads them yet.</p>
<div class="grid">${field('metrics_retention_days')}${field('upgrade_cpu_threshold')}${field('upgrade_ram_threshold')}${field('upgrade_disk_threshold')}${field('upgrade_window_hours')}${field('upgrade_cooldown_hours')}${field('health_crash_threshold')}${field('health_window_hours')}</div>${field('upgrade_message')}
<div class="actions"><button type="submit">Save settings</button></div>`,
  )}</div>`;
  return sendPage(req, reply, { title: 'Operations settings', body, status });
}

/** `/admin/ops/tags`: the tags, a form to create one, one to edit each, and the visibility switch. */
export async function tagsPage(req: FastifyRequest, reply: FastifyReply, service: OpsService): Promise<FastifyReply> {
  const csrf = csrfToken(req, reply);
  const [tags, s] = await Promise.all([service.store.tags(), service.settings()]);
  const tagForm = (values: Record<string, string | number | null>, prefix: string): SafeHtml => {
    const f = formOf(values, prefix);
    return html`<div class="grid">${inputField(f, 'name', 'Name', { required: true })}${inputField(f, 'slug', 'Slug', { help: 'blank = from the name' })}${inputField(f, 'color', 'Colour', { help: '#rrggbb', required: true })}${inputField(
      f,
      'icon',
      'Icon',
    )}</div>${checkboxField(f, 'is_default', 'Default tag (given to new servers created without tags)')}`;
  };
  const body = html`<h1>Server tags</h1>
<div class="card"><h2>Visibility</h2>${postForm(
    `${BASE}/tags/settings`,
    csrf,
    html`${checkboxField(formOf({ tags_visible_to_users: s.tags_visible_to_users === true ? 'on' : '' }), 'tags_visible_to_users', 'Show server owners and subusers the tags of their servers (client API)')}<div class="actions"><button type="submit">Save</button></div>`,
  )}</div>
<div class="card"><h2>Tags</h2>${
    tags.length === 0
      ? html`<p>No tags yet.</p>`
      : html`<table id="ops-tags"><tr><th>Tag</th><th>Slug</th><th>Default</th><th></th></tr>${tags.map(
          (t) => html`<tr><td><span class="badge" style="background:${t.color}">&nbsp;</span> ${t.name}</td><td><code>${t.slug}</code></td><td>${t.is_default === 1 ? 'yes' : ''}</td><td>${confirmButton(`${BASE}/tags/${t.id}`, csrf, 'Delete', `Delete tag ${t.name}? It is removed from every server.`, html`<input type="hidden" name="_method" value="DELETE">`)}<details><summary>Edit</summary>${postForm(
            `${BASE}/tags/${t.id}`,
            csrf,
            html`<input type="hidden" name="_method" value="PUT">${tagForm({ ...tagAttributes(t), is_default: t.is_default === 1 ? 'on' : '' } as Record<string, string | number | null>, `t${t.id}-`)}<div class="actions"><button type="submit">Save tag</button></div>`,
          )}</details></td></tr>`,
        )}</table>`
  }</div>
<div class="card"><h2>New tag</h2>${postForm(`${BASE}/tags`, csrf, html`${tagForm({ color: '#1d5fbf' }, 'new-')}<div class="actions"><button type="submit">Create tag</button></div>`)}</div>`;
  return sendPage(req, reply, { title: 'Server tags', body });
}

/** `/admin/ops/templates`: the library, with a form to create, revise, clone and delete. */
export async function templatesPage(req: FastifyRequest, reply: FastifyReply, h: Handlers): Promise<FastifyReply> {
  const csrf = csrfToken(req, reply);
  const templates = await h.templateList(req);
  const fields = (f: FormState): SafeHtml =>
    html`<div class="grid">${inputField(f, 'name', 'Name', { required: true })}${inputField(f, 'category', 'Category', { required: true })}</div>${textareaField(f, 'description', 'Description')}${checkboxField(
      f,
      'is_default',
      'Default template',
    )}${textareaField(f, 'config', 'Configuration (JSON)', { help: 'Keys: cpu, threads, memory, swap, disk, io, database_limit, allocation_limit, backup_limit, startup, image, custom_image, nest_id, egg_id, oom_disabled, skip_scripts, tag_ids' })}`;
  const body = html`<h1>Templates</h1><div class="card"><h2>Library</h2>${
    templates.length === 0
      ? html`<p>No templates yet.</p>`
      : html`<table id="ops-templates"><tr><th>Name</th><th>Category</th><th>Revision</th><th></th></tr>${templates.map((t) => {
          const id = Number(t.id);
          const f = formOf({ name: String(t.name), category: String(t.category), description: (t.description as string | null) ?? '', is_default: t.is_default === true ? 'on' : '', config: JSON.stringify(t.config, null, 1) }, `t${id}-`);
          return html`<tr><td>${String(t.name)}${t.favorited === true ? ' ★' : ''}<div class="help">${(t.description as string | null) ?? ''}</div></td><td>${String(t.category)}</td><td>${String(t.revision)}</td><td>${actionButton(
            `${BASE}/templates/${id}/clone`,
            csrf,
            'Clone',
            'secondary',
          )}${confirmButton(`${BASE}/templates/${id}`, csrf, 'Delete', `Delete template ${String(t.name)} and its revisions?`, html`<input type="hidden" name="_method" value="DELETE">`)}<details><summary>Edit</summary>${postForm(
            `${BASE}/templates/${id}/save`,
            csrf,
            html`${fields(f)}<div class="actions"><button type="submit">Save as a new revision</button></div>`,
          )}</details></td></tr>`;
        })}</table>`
  }</div><div class="card"><h2>New template</h2>${postForm(`${BASE}/templates`, csrf, html`${fields(formOf({ category: 'General', config: '{}' }, 'new-'))}<div class="actions"><button type="submit">Create template</button></div>`)}</div>`;
  return sendPage(req, reply, { title: 'Templates', body });
}

/** `/admin/ops/multicreate`: one form for `count` alike servers. */
export async function multiCreatePage(req: FastifyRequest, reply: FastifyReply, ctx: PanelContext, service: OpsService, form: FormState, status = 200): Promise<FastifyReply> {
  const [users, nodes, eggs, s] = await Promise.all([ctx.store.users.all(), ctx.store.nodes.all(), ctx.store.eggs.all(), service.settings()]);
  const body = html`<h1>Multi-create</h1>${formSummary(form)}<div class="card">${postForm(
    `${BASE}/multicreate`,
    csrfToken(req, reply),
    html`<div class="grid">${inputField(form, 'count', 'How many servers', { type: 'number', help: '1 to 50' })}${inputField(form, 'name', 'Name', { help: `blank = the pattern ${s.naming_pattern}` })}${selectField(
      form,
      'owner_id',
      'Owner',
      users.map((u) => ({ value: u.id, label: u.username })),
      { empty: 'Choose a user' },
    )}${selectField(form, 'node_id', 'Node', nodes.map((n) => ({ value: n.id, label: n.name })), { empty: 'Choose a node', help: 'each server takes the next free allocation' })}${selectField(
      form,
      'egg_id',
      'Egg',
      eggs.map((e) => ({ value: e.id, label: e.name })),
      { empty: 'Choose an egg' },
    )}${inputField(form, 'memory', 'Memory (MiB)', { type: 'number' })}${inputField(form, 'swap', 'Swap (MiB)', { type: 'number' })}${inputField(form, 'disk', 'Disk (MiB)', { type: 'number' })}${inputField(
      form,
      'io',
      'Block IO weight',
      { type: 'number' },
    )}${inputField(form, 'cpu', 'CPU limit (%)', { type: 'number' })}</div><div class="actions"><button type="submit">Create servers</button></div>`,
  )}</div>`;
  return sendPage(req, reply, { title: 'Multi-create', body, status });
}

/** The outcome of the page's multi-create: one row per server. */
export function multiCreateResultPage(req: FastifyRequest, reply: FastifyReply, outcome: { results: MultiCreateResult[]; summary: { total: number; success: number; failed: number } }): FastifyReply {
  const body = html`<h1>Multi-create results</h1><p id="ops-multicreate-summary">${outcome.summary.success} of ${outcome.summary.total} created, ${outcome.summary.failed} failed.</p>
<table id="ops-multicreate-results"><tr><th>Name</th><th>Result</th></tr>${outcome.results.map(
    (r) => html`<tr><td>${r.success ? html`<a href="/admin/servers/${r.id}">${r.name}</a>` : r.name}</td><td>${r.success ? html`<span class="badge green">created</span>` : html`<span class="badge red">failed</span> ${r.error}`}</td></tr>`,
  )}</table><p><a href="${BASE}/multicreate">Create more</a></p>`;
  return sendPage(req, reply, { title: 'Multi-create results', body });
}

/** `/admin/ops/health`: every node graded now, with its latest snapshot time. */
export async function healthPage(req: FastifyRequest, reply: FastifyReply, service: OpsService): Promise<FastifyReply> {
  const [grades, latest, s] = await Promise.all([service.gradeNodes(), service.store.latestSnapshots(), service.settings()]);
  const snapAt = new Map(latest.map((l) => [l.node_id, l.snapshot_at]));
  const body = html`<h1>Node health</h1><p>From the panel's records: allocation use is assigned / total allocations, memory use is the servers' memory limits / the node's memory. Warning from ${s.node_pressure_warn_pct}%, critical from ${s.node_pressure_crit_pct}%. Snapshots every 10 minutes, kept ${s.health_retention_days} days.</p>
<table id="ops-health"><tr><th>Node</th><th>Status</th><th>Score</th><th>Allocations used</th><th>Memory assigned</th><th>Last snapshot</th></tr>${rowsOrNone(grades.map(
    (g) => html`<tr><td><a href="/admin/nodes/${g.node_id}">${g.node_name}</a></td><td>${badge(g.grade.status)}</td><td>${g.grade.health_score}</td><td>${g.grade.allocation_used_pct}%</td><td>${g.grade.memory_used_pct}%</td><td>${snapAt.get(g.node_id) ?? 'none yet'}</td></tr>`,
  ), 6, 'No nodes yet.')}</table>`;
  return sendPage(req, reply, { title: 'Node health', body });
}

/** `/admin/ops/audit`: 50 entries a page, filtered by action substring and actor. */
export async function auditPage(req: FastifyRequest, reply: FastifyReply, ctx: PanelContext, page: Page<AuditRow>, filters: { action: string; actorId: number | undefined }): Promise<FastifyReply> {
  const users = new Map((await ctx.store.users.all()).map((u) => [u.id, u.username]));
  const extra: Record<string, string> = {};
  if (filters.action !== '') extra.action = filters.action;
  if (filters.actorId !== undefined) extra.actor_id = String(filters.actorId);
  const body = html`<h1>Operations audit log</h1>
<form method="get" action="${BASE}/audit" class="actions"><input name="action" value="${filters.action}" aria-label="Action contains" placeholder="Action contains" style="max-width:16rem"><input name="actor_id" value="${filters.actorId ?? ''}" aria-label="Actor id" placeholder="Actor id" style="max-width:8rem"><button type="submit" class="secondary">Filter</button></form>
<table id="ops-audit"><tr><th>Time</th><th>Action</th><th>Actor</th><th>Server</th><th>Details</th></tr>${rowsOrNone(page.items.map(
    (r) => html`<tr><td>${r.created_at}</td><td><code>${r.action}</code></td><td>${r.actor_id === null ? '—' : (users.get(r.actor_id) ?? `#${r.actor_id}`)}</td><td>${r.server_id === null ? '—' : html`<a href="/admin/servers/${r.server_id}">#${r.server_id}</a>`}</td><td><code>${r.payload}</code></td></tr>`,
  ), 5, 'No audit entries found.')}</table>${pager(page, `${BASE}/audit`, extra)}`;
  return sendPage(req, reply, { title: 'Operations audit log', body });
}

/**
 * `/admin/servers`: list, create (owner, egg and a free allocation from selects, plus limits),
 * show and edit details and build limits, suspend/unsuspend (through the service, so the addons'
 * suspension hooks run) and delete.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { PanelContext } from '../context.ts';
import { found } from '../services/records.ts';
import { createServer, deleteServer, setSuspended, updateServerBuild, updateServerDetails } from '../services/servers.ts';
import type { ServerRow } from '../store/records.ts';
import { setFlash } from './flash.ts';
import {
  actionButton,
  confirmButton,
  failedForm,
  formBody,
  formOf,
  formSummary,
  inputField,
  inputOf,
  postForm,
  selectField,
  textareaField,
  type FormState,
  type FormValues,
  type SelectOption,
} from './forms.ts';
import { renderServerListBadges, renderServerSections } from './server-sections.ts';
import { html, type SafeHtml } from './html.ts';
import { adminAudit, csrfToken, idParam, pageParam, pager, refused, searchParam, seeOther, sendPage, rowsOrNone } from './respond.ts';
import { currentSession } from './web-auth.ts';

const LIMITS = ['memory', 'swap', 'disk', 'io', 'cpu', 'databases', 'allocations', 'backups'] as const;
const CREATE_INPUT = { textOrOmit: ['name', 'image', 'startup'], text: ['description', 'external_id'], int: ['owner_id', 'egg_id', 'allocation_id', ...LIMITS] } as const;
const DETAILS_INPUT = { textOrOmit: ['name'], text: ['description', 'external_id'], int: ['owner_id'] } as const;
const BUILD_INPUT = { int: ['allocation_id', ...LIMITS] } as const;
const DEFAULT_LIMITS = { memory: 1024, swap: 0, disk: 5120, io: 500, cpu: 100, databases: 0, allocations: 0, backups: 0 };

/** CPU threads: '' clears the pinning (null). */
function withThreads(input: Record<string, unknown>, values: FormValues): Record<string, unknown> {
  const t = values.threads;
  return t === undefined ? input : { ...input, threads: t.trim() === '' ? null : t.trim() };
}

function limitFields(form: FormState): SafeHtml {
  return html`<div class="grid">${inputField(form, 'memory', 'Memory (MiB)', { type: 'number', help: '0 = unlimited' })}${inputField(form, 'swap', 'Swap (MiB)', {
    type: 'number',
    help: '-1 = unlimited, 0 = none',
  })}${inputField(form, 'disk', 'Disk (MiB)', { type: 'number', help: '0 = unlimited' })}${inputField(form, 'io', 'Block IO weight', { type: 'number', help: '10 to 1000' })}${inputField(
    form,
    'cpu',
    'CPU limit (%)',
    { type: 'number', help: '100 = one core, 0 = unlimited' },
  )}${inputField(form, 'threads', 'CPU pinning', { placeholder: '0-1,3', help: 'Optional; blank = any core.' })}${inputField(form, 'databases', 'Database limit', { type: 'number' })}${inputField(
    form,
    'allocations',
    'Allocation limit',
    { type: 'number' },
  )}${inputField(form, 'backups', 'Backup limit', { type: 'number' })}</div>`;
}

function externalIdField(form: FormState): SafeHtml {
  return inputField(form, 'external_id', 'External ID', { help: "A billing system's id of the server; blank = none." });
}

function serverValues(s: ServerRow): FormState {
  return formOf({ name: s.name, description: s.description, external_id: s.external_id, owner_id: s.owner_id, allocation_id: s.allocation_id, threads: s.threads, ...Object.fromEntries(LIMITS.map((k) => [k, s[k]])) });
}

/** Registers the server pages on the admin scope; runs once at app build. */
export function registerAdminServers(admin: FastifyInstance, ctx: PanelContext): void {
  const userOptions = async (): Promise<SelectOption[]> => (await ctx.store.users.all()).map((u) => ({ value: u.id, label: `${u.username} <${u.email}>` }));

  const allocationOptions = async (filter: { node_id?: number } = {}, include?: number | null): Promise<SelectOption[]> => {
    const nodes = new Map((await ctx.store.nodes.all()).map((n) => [n.id, n.name]));
    const free = await ctx.store.allocations.all({ ...filter, server_id: null });
    const current = include === null || include === undefined ? undefined : await ctx.store.allocations.find(include);
    const list = current === undefined ? free : [current, ...free];
    return list.map((a) => ({ value: a.id, label: `${a.ip_alias ?? a.ip}:${a.port}`, group: nodes.get(a.node_id) ?? `node ${a.node_id}` }));
  };

  const newPage = async (req: FastifyRequest, reply: FastifyReply, form: FormState, status = 200): Promise<FastifyReply> => {
    const nests = new Map((await ctx.store.nests.all()).map((n) => [n.id, n.name]));
    const eggs = (await ctx.store.eggs.all()).map((e) => ({ value: e.id, label: e.name, group: nests.get(e.nest_id) ?? `nest ${e.nest_id}` }));
    const allocations = await allocationOptions();
    const body = html`<h1>New server</h1>${formSummary(form)}<div class="card">${postForm(
      '/admin/servers',
      csrfToken(req, reply),
      html`<h2>Core details</h2><div class="grid">${inputField(form, 'name', 'Name', { required: true })}${selectField(form, 'owner_id', 'Owner', await userOptions(), {
        required: true,
        empty: 'Choose a user',
      })}${selectField(form, 'egg_id', 'Egg', eggs, { required: true, empty: 'Choose an egg', help: eggs.length === 0 ? 'Create a nest and an egg first.' : undefined })}${selectField(
        form,
        'allocation_id',
        'Allocation',
        allocations,
        { required: true, empty: 'Choose a free allocation', help: allocations.length === 0 ? 'Add allocations to a node first.' : 'The node follows from the allocation.' },
      )}${externalIdField(form)}</div>${textareaField(form, 'description', 'Description')}
<h2>Resource limits</h2>${limitFields(form)}
<h2>Container</h2><div class="grid">${inputField(form, 'image', 'Docker image', { help: "Blank = the egg's image." })}${inputField(form, 'startup', 'Startup command', {
        help: "Blank = the egg's command.",
      })}</div><div class="actions"><button type="submit">Create server</button></div>`,
    )}</div>`;
    return sendPage(req, reply, { title: 'New server', body, status });
  };

  const serverPage = async (req: FastifyRequest, reply: FastifyReply, server: ServerRow, o: { details?: FormState; build?: FormState; status?: number } = {}): Promise<FastifyReply> => {
    const csrf = csrfToken(req, reply);
    const details = o.details ?? serverValues(server);
    const build = o.build ?? serverValues(server);
    const [owner, node, egg] = await Promise.all([ctx.store.users.find(server.owner_id), ctx.store.nodes.find(server.node_id), ctx.store.eggs.find(server.egg_id)]);
    const suspended = server.suspended === 1;
    const body = html`<h1>Server ${server.name} ${suspended ? html`<span class="badge red" id="server-status">suspended</span>` : html`<span class="badge green" id="server-status">active</span>`}</h1>
<p>Identifier <code>${server.identifier}</code> · UUID <code>${server.uuid}</code> · owner <a href="/admin/users/${server.owner_id}">${owner?.username ?? '?'}</a> · node <a href="/admin/nodes/${server.node_id}">${
      node?.name ?? '?'
    }</a> · egg <a href="/admin/eggs/${server.egg_id}">${egg?.name ?? '?'}</a></p>
<p>Image <code>${server.image}</code> · startup <code>${server.startup}</code></p>
<h2>Details</h2>${formSummary(details)}<div class="card">${postForm(
      `/admin/servers/${server.id}/details`,
      csrf,
      html`<div class="grid">${inputField(details, 'name', 'Name', { required: true })}${selectField(details, 'owner_id', 'Owner', await userOptions(), { required: true })}${externalIdField(details)}</div>${textareaField(
        details,
        'description',
        'Description',
      )}<div class="actions"><button type="submit">Save details</button></div>`,
    )}</div>
<h2>Build configuration</h2>${formSummary(build)}<div class="card">${postForm(
      `/admin/servers/${server.id}/build`,
      csrf,
      html`${selectField(build, 'allocation_id', 'Primary allocation', await allocationOptions({ node_id: server.node_id }, server.allocation_id))}${limitFields(build)}<div class="actions"><button type="submit">Save build</button></div>`,
    )}</div>${await renderServerSections(server, req, reply)}
<div class="card"><h2>Suspension</h2><p>${suspended ? 'The server is suspended: its users cannot use it.' : 'Suspending stops the server for its users until it is unsuspended.'}</p>${
      suspended ? actionButton(`/admin/servers/${server.id}/unsuspend`, csrf, 'Unsuspend server', 'secondary') : confirmButton(`/admin/servers/${server.id}/suspend`, csrf, 'Suspend server', `Suspend server ${server.name}? Its users cannot use it until it is unsuspended.`)
    }</div>
<div class="card"><h2>Delete</h2><p>Deletes the server record and releases its allocations.</p>${confirmButton(`/admin/servers/${server.id}/delete`, csrf, 'Delete server', `Delete server ${server.name}? Its record is removed and its allocations are released.`)}</div>`;
    return sendPage(req, reply, { title: `Server ${server.name}`, body, status: o.status });
  };

  admin.get('/admin/servers', async (req, reply) => {
    const q = searchParam(req);
    const page = await ctx.store.servers.list({ page: pageParam(req), search: { columns: ['name', 'identifier', 'uuid'], term: q } });
    const rows = await Promise.all(
      page.items.map(async (s) => ({
        s,
        owner: (await ctx.store.users.find(s.owner_id))?.username ?? '?',
        node: (await ctx.store.nodes.find(s.node_id))?.name ?? '?',
        allocation: s.allocation_id === null ? undefined : await ctx.store.allocations.find(s.allocation_id),
      })),
    );
    const badges = await renderServerListBadges(page.items);
    const body = html`<h1>Servers</h1>
<form method="get" action="/admin/servers" class="actions"><input type="search" name="q" value="${q}" aria-label="Search servers by name or identifier" placeholder="Search name or identifier" style="max-width:20rem"><button type="submit" class="secondary">Search</button><a class="button" href="/admin/servers/new">Create server</a></form>
<table id="servers"><thead><tr><th>Name</th><th>Identifier</th><th>Owner</th><th>Node</th><th>Connection</th><th>Status</th></tr></thead><tbody>${rowsOrNone(rows.map(
      ({ s, owner, node, allocation }) =>
        html`<tr><td><a href="/admin/servers/${s.id}">${s.name}</a></td><td><code>${s.identifier}</code></td><td>${owner}</td><td>${node}</td><td>${
          allocation === undefined ? '—' : `${allocation.ip_alias ?? allocation.ip}:${allocation.port}`
        }</td><td>${s.suspended === 1 ? html`<span class="badge red">suspended</span>` : html`<span class="badge green">active</span>`}${(badges.get(s.id) ?? []).map((b) => html` ${b}`)}</td></tr>`,
    ), 6, 'No servers found.')}</tbody></table>${pager(page, '/admin/servers', q === '' ? {} : { q })}`;
    return sendPage(req, reply, { title: 'Servers', body });
  });

  admin.get('/admin/servers/new', async (req, reply) => newPage(req, reply, formOf(DEFAULT_LIMITS)));

  admin.post('/admin/servers', async (req, reply) => {
    const values = formBody(req.body);
    try {
      const input = inputOf(values, CREATE_INPUT);
      if ((values.threads ?? '').trim() !== '') input.threads = (values.threads ?? '').trim();
      const server = await createServer(ctx, input);
      await adminAudit(ctx, req, 'admin:server.create', { type: 'server', id: server.id }, { name: server.name, owner: server.owner_id, node: server.node_id });
      setFlash(reply, 'success', `Server ${server.name} was created.`);
      return seeOther(reply, `/admin/servers/${server.id}`);
    } catch (err) {
      const failed = failedForm(values, err);
      if (failed === undefined) throw err;
      return newPage(req, reply, failed.form, failed.status);
    }
  });

  admin.get('/admin/servers/:id', async (req, reply) => serverPage(req, reply, found(await ctx.store.servers.find(idParam(req, 'server')), 'server')));

  admin.post('/admin/servers/:id/details', async (req, reply) => {
    const server = found(await ctx.store.servers.find(idParam(req, 'server')), 'server');
    const values = formBody(req.body);
    try {
      await updateServerDetails(ctx, server.id, inputOf(values, DETAILS_INPUT));
      await adminAudit(ctx, req, 'admin:server.update', { type: 'server', id: server.id });
      setFlash(reply, 'success', 'The details were saved.');
      return seeOther(reply, `/admin/servers/${server.id}`);
    } catch (err) {
      const failed = failedForm(values, err);
      if (failed === undefined) throw err;
      return serverPage(req, reply, server, { details: failed.form, status: failed.status });
    }
  });

  admin.post('/admin/servers/:id/build', async (req, reply) => {
    const server = found(await ctx.store.servers.find(idParam(req, 'server')), 'server');
    const values = formBody(req.body);
    try {
      const input = withThreads(inputOf(values, BUILD_INPUT), values);
      await updateServerBuild(ctx, server.id, input);
      await adminAudit(ctx, req, 'admin:server.build', { type: 'server', id: server.id }, { fields: Object.keys(input) });
      setFlash(reply, 'success', 'The build configuration was saved.');
      return seeOther(reply, `/admin/servers/${server.id}`);
    } catch (err) {
      const failed = failedForm(values, err);
      if (failed === undefined) throw err;
      return serverPage(req, reply, server, { build: failed.form, status: failed.status });
    }
  });

  for (const [action, suspended] of [
    ['suspend', true],
    ['unsuspend', false],
  ] as const) {
    admin.post(`/admin/servers/:id/${action}`, async (req, reply) => {
      const id = idParam(req, 'server');
      // The service writes server:suspended / server:unsuspended with this admin as the actor.
      await setSuspended(ctx, id, suspended, { type: 'user', id: currentSession(req).user.id }, req.ip);
      setFlash(reply, 'success', suspended ? 'The server is suspended.' : 'The server is unsuspended.');
      return seeOther(reply, `/admin/servers/${id}`);
    });
  }

  admin.post('/admin/servers/:id/delete', async (req, reply) => {
    const id = idParam(req, 'server');
    try {
      const server = found(await ctx.store.servers.find(id), 'server');
      await deleteServer(ctx, id);
      await adminAudit(ctx, req, 'admin:server.delete', { type: 'server', id }, { name: server.name, uuid: server.uuid });
    } catch (err) {
      return refused(reply, err, `/admin/servers/${id}`);
    }
    setFlash(reply, 'success', 'The server was deleted.');
    return seeOther(reply, '/admin/servers');
  });
}

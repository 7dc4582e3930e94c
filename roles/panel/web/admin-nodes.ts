/**
 * `/admin/nodes`: the machines servers run on. Creating a node (or resetting its token) shows the
 * pairing token once in that response, with a "copy it now" warning: only its hash and an
 * encrypted copy are kept, and it never travels through a redirect or a cookie.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { PanelContext } from '../context.ts';
import { createNode, deleteNode, resetNodeToken, updateNode } from '../services/infrastructure.ts';
import { found } from '../services/records.ts';
import type { NodeRow } from '../store/records.ts';
import { setFlash } from './flash.ts';
import { confirmButton, checkboxField, failedForm, formBody, formOf, formSummary, inputField, inputOf, postForm, selectField, textareaField, type FormState } from './forms.ts';
import { html, type SafeHtml } from './html.ts';
import type { Notice } from './layout.ts';
import { adminAudit, csrfToken, idParam, pageParam, pager, refused, seeOther, sendPage, rowsOrNone } from './respond.ts';

const INPUT = {
  textOrOmit: ['name', 'fqdn', 'scheme'],
  text: ['description'],
  int: ['location_id', 'daemon_listen', 'memory', 'memory_overallocate', 'disk', 'disk_overallocate'],
  bool: ['public', 'maintenance_mode'],
} as const;

const DEFAULTS = { scheme: 'http', daemon_listen: 8480, public: 'on', memory: 0, memory_overallocate: 0, disk: 0, disk_overallocate: 0 };

function nodeValues(n: NodeRow): FormState {
  return formOf({
    name: n.name,
    description: n.description,
    location_id: n.location_id,
    fqdn: n.fqdn,
    scheme: n.scheme,
    daemon_listen: n.daemon_listen,
    public: n.public === 1 ? 'on' : '',
    maintenance_mode: n.maintenance_mode === 1 ? 'on' : '',
    memory: n.memory,
    memory_overallocate: n.memory_overallocate,
    disk: n.disk,
    disk_overallocate: n.disk_overallocate,
  });
}

/** The notice that shows a pairing token this once. */
export function tokenNotice(token: string, what: string): Notice {
  return {
    kind: 'info',
    text: html`<strong>${what} Copy the pairing token now: it is not shown again.</strong> Write it to the node agent's token file (<code>panel.token_file</code>, default <code>/etc/bandwidth-node/token</code>).<div class="secret" id="pairing-token">${token}</div>`,
  };
}

/** Registers the node pages on the admin scope; runs once at app build. */
export function registerAdminNodes(admin: FastifyInstance, ctx: PanelContext): void {
  const fields = async (form: FormState, editing: boolean): Promise<SafeHtml> => {
    const locations = await ctx.store.locations.all();
    return html`<div class="grid">${inputField(form, 'name', 'Name', { required: true })}${selectField(
      form,
      'location_id',
      'Location',
      locations.map((l) => ({ value: l.id, label: `${l.short}${l.long === '' ? '' : ` — ${l.long}`}` })),
      { required: true, help: locations.length === 0 ? 'Create a location first.' : undefined },
    )}${inputField(form, 'fqdn', 'FQDN or IP address', { required: true, placeholder: 'node1.example.com' })}${selectField(form, 'scheme', 'Scheme', [
      { value: 'http', label: 'http' },
      { value: 'https', label: 'https' },
    ])}${inputField(form, 'daemon_listen', 'Agent port', { type: 'number' })}${inputField(form, 'memory', 'Memory (MiB)', { type: 'number' })}${inputField(
      form,
      'memory_overallocate',
      'Memory over-allocation (%)',
      { type: 'number', help: '-1 disables the check.' },
    )}${inputField(form, 'disk', 'Disk (MiB)', { type: 'number' })}${inputField(form, 'disk_overallocate', 'Disk over-allocation (%)', { type: 'number' })}</div>${textareaField(
      form,
      'description',
      'Description',
    )}${checkboxField(form, 'public', 'Public (used for automatic deployment)')}${editing ? checkboxField(form, 'maintenance_mode', 'Maintenance mode') : ''}`;
  };

  const newPage = async (req: FastifyRequest, reply: FastifyReply, form: FormState, status = 200): Promise<FastifyReply> =>
    sendPage(req, reply, {
      title: 'New node',
      status,
      body: html`<h1>New node</h1>${formSummary(form)}<div class="card">${postForm(
        '/admin/nodes',
        csrfToken(req, reply),
        html`${await fields(form, false)}<div class="actions"><button type="submit">Create node</button></div>`,
      )}</div>`,
    });

  const nodePage = async (req: FastifyRequest, reply: FastifyReply, node: NodeRow, form: FormState, o: { status?: number; notices?: Notice[] } = {}): Promise<FastifyReply> => {
    const csrf = csrfToken(req, reply);
    const allocations = (await ctx.store.allocations.list({ perPage: 1, filter: { node_id: node.id } })).total;
    const servers = (await ctx.store.servers.list({ perPage: 1, filter: { node_id: node.id } })).total;
    return sendPage(req, reply, {
      title: `Node ${node.name}`,
      status: o.status,
      notices: o.notices,
      body: html`<h1>Node ${node.name}</h1>
<p>UUID <code>${node.uuid}</code> · ${servers} server(s) · <a href="/admin/nodes/${node.id}/allocations">${allocations} allocation(s)</a></p>
${formSummary(form)}<div class="card"><h2>Settings</h2>${postForm(`/admin/nodes/${node.id}`, csrf, html`${await fields(form, true)}<div class="actions"><button type="submit">Save</button></div>`)}</div>
<div class="card"><h2>Pairing token</h2><p>Token id <code>${node.token_id}</code>. Resetting issues a new token; the old one stops working at once.</p>${confirmButton(
        `/admin/nodes/${node.id}/token`,
        csrf,
        'Reset pairing token',
        `Reset the pairing token of node ${node.name}? Its agent is refused until it has the new token and is restarted.`,
      )}</div>
<div class="card"><h2>Delete</h2><p>A node that still has servers cannot be deleted.</p>${confirmButton(`/admin/nodes/${node.id}/delete`, csrf, 'Delete node', `Delete node ${node.name} and its allocations?`)}</div>`,
    });
  };

  admin.get('/admin/nodes', async (req, reply) => {
    const page = await ctx.store.nodes.list({ page: pageParam(req) });
    const rows = await Promise.all(
      page.items.map(async (n) => ({
        n,
        location: (await ctx.store.locations.find(n.location_id))?.short ?? '?',
        servers: (await ctx.store.servers.list({ perPage: 1, filter: { node_id: n.id } })).total,
      })),
    );
    const body = html`<h1>Nodes</h1><p><a class="button" href="/admin/nodes/new">Create node</a></p>
<table><thead><tr><th>ID</th><th>Name</th><th>Location</th><th>FQDN</th><th>Memory</th><th>Disk</th><th>Servers</th><th></th></tr></thead><tbody>${rowsOrNone(rows.map(
      ({ n, location, servers }) =>
        html`<tr><td>${n.id}</td><td><a href="/admin/nodes/${n.id}">${n.name}</a>${n.maintenance_mode === 1 ? html` <span class="badge red">maintenance</span>` : ''}</td><td>${location}</td><td>${n.scheme}://${n.fqdn}:${n.daemon_listen}</td><td>${n.memory} MiB</td><td>${n.disk} MiB</td><td>${servers}</td><td><a href="/admin/nodes/${n.id}/allocations">allocations</a></td></tr>`,
    ), 8, 'No nodes yet.')}</tbody></table>${pager(page, '/admin/nodes')}`;
    return sendPage(req, reply, { title: 'Nodes', body });
  });

  admin.get('/admin/nodes/new', async (req, reply) => newPage(req, reply, formOf(DEFAULTS)));

  admin.post('/admin/nodes', async (req, reply) => {
    const values = formBody(req.body);
    try {
      const { node, token } = await createNode(ctx, inputOf(values, INPUT));
      await adminAudit(ctx, req, 'admin:node.create', { type: 'node', id: node.id }, { name: node.name });
      return await nodePage(req, reply, node, nodeValues(node), { status: 201, notices: [tokenNotice(token, `Node ${node.name} was created.`)] });
    } catch (err) {
      const failed = failedForm(values, err);
      if (failed === undefined) throw err;
      return newPage(req, reply, failed.form, failed.status);
    }
  });

  admin.get('/admin/nodes/:id', async (req, reply) => {
    const node = found(await ctx.store.nodes.find(idParam(req, 'node')), 'node');
    return nodePage(req, reply, node, nodeValues(node));
  });

  admin.post('/admin/nodes/:id', async (req, reply) => {
    const node = found(await ctx.store.nodes.find(idParam(req, 'node')), 'node');
    const values = formBody(req.body);
    try {
      const updated = await updateNode(ctx, node.id, inputOf(values, INPUT));
      await adminAudit(ctx, req, 'admin:node.update', { type: 'node', id: node.id }, { name: updated.name });
      setFlash(reply, 'success', `Node ${updated.name} was saved.`);
      return seeOther(reply, `/admin/nodes/${node.id}`);
    } catch (err) {
      const failed = failedForm(values, err);
      if (failed === undefined) throw err;
      return nodePage(req, reply, node, failed.form, { status: failed.status });
    }
  });

  admin.post('/admin/nodes/:id/token', async (req, reply) => {
    const { node, token } = await resetNodeToken(ctx, idParam(req, 'node'));
    await adminAudit(ctx, req, 'admin:node.token-reset', { type: 'node', id: node.id });
    return nodePage(req, reply, node, nodeValues(node), { notices: [tokenNotice(token, 'A new pairing token was issued; the old one no longer works.')] });
  });

  admin.post('/admin/nodes/:id/delete', async (req, reply) => {
    const id = idParam(req, 'node');
    try {
      await deleteNode(ctx, id);
      await adminAudit(ctx, req, 'admin:node.delete', { type: 'node', id });
    } catch (err) {
      return refused(reply, err, `/admin/nodes/${id}`);
    }
    setFlash(reply, 'success', 'The node was deleted.');
    return seeOther(reply, '/admin/nodes');
  });
}

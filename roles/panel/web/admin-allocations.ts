/**
 * `/admin/nodes/:id/allocations`: the ip:port pairs of a node that servers are given. Ports are
 * entered as a list of ports and ranges ("25565, 25570-25580"); only free allocations can be deleted.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { PanelContext } from '../context.ts';
import { createAllocations, deleteAllocation } from '../services/infrastructure.ts';
import { found } from '../services/records.ts';
import type { NodeRow } from '../store/records.ts';
import { setFlash } from './flash.ts';
import { confirmButton, failedForm, formBody, formOf, formSummary, inputField, postForm, type FormState } from './forms.ts';
import { html } from './html.ts';
import { adminAudit, csrfToken, idParam, pageParam, pager, refused, seeOther, sendPage, rowsOrNone } from './respond.ts';

/** "25565, 25570-25580 25590" -> ['25565', '25570-25580', '25590']. Pure. */
export function portList(text: string): string[] {
  return text
    .split(/[\s,]+/)
    .map((p) => p.trim())
    .filter((p) => p !== '');
}

/** Registers the allocation pages on the admin scope; runs once at app build. */
export function registerAdminAllocations(admin: FastifyInstance, ctx: PanelContext): void {
  const listPage = async (req: FastifyRequest, reply: FastifyReply, node: NodeRow, form: FormState, status = 200): Promise<FastifyReply> => {
    const csrf = csrfToken(req, reply);
    const page = await ctx.store.allocations.list({ page: pageParam(req), perPage: 100, filter: { node_id: node.id }, sort: 'port' });
    const rows = await Promise.all(page.items.map(async (a) => ({ a, server: a.server_id === null ? undefined : await ctx.store.servers.find(a.server_id) })));
    return sendPage(req, reply, {
      title: `Allocations of ${node.name}`,
      status,
      body: html`<h1>Allocations of <a href="/admin/nodes/${node.id}">${node.name}</a></h1>
<table><thead><tr><th>IP</th><th>Alias</th><th>Port</th><th>Server</th><th></th></tr></thead><tbody>${rowsOrNone(rows.map(
        ({ a, server }) =>
          html`<tr><td>${a.ip}</td><td>${a.ip_alias ?? ''}</td><td>${a.port}</td><td>${
            server === undefined ? html`<span class="badge">free</span>` : html`<a href="/admin/servers/${server.id}">${server.name}</a>`
          }</td><td>${server === undefined ? confirmButton(`/admin/nodes/${node.id}/allocations/${a.id}/delete`, csrf, 'Delete', `Delete allocation ${a.ip}:${a.port}?`) : ''}</td></tr>`,
      ), 5, 'No allocations on this node yet.')}</tbody></table>${pager(page, `/admin/nodes/${node.id}/allocations`)}
<h2>Add allocations</h2>${formSummary(form)}<div class="card">${postForm(
        `/admin/nodes/${node.id}/allocations`,
        csrf,
        html`<div class="grid">${inputField(form, 'ip', 'IP address', { required: true, placeholder: '192.0.2.10' })}${inputField(form, 'alias', 'IP alias', { help: 'Optional name shown instead of the IP.' })}${inputField(
          form,
          'ports',
          'Ports',
          { required: true, placeholder: '25565, 25570-25580', help: 'Ports and ranges, separated by commas or spaces (at most 1000 ports).' },
        )}</div><div class="actions"><button type="submit">Add</button></div>`,
      )}</div>`,
    });
  };

  admin.get('/admin/nodes/:id/allocations', async (req, reply) => {
    const node = found(await ctx.store.nodes.find(idParam(req, 'node')), 'node');
    return listPage(req, reply, node, formOf());
  });

  admin.post('/admin/nodes/:id/allocations', async (req, reply) => {
    const node = found(await ctx.store.nodes.find(idParam(req, 'node')), 'node');
    const values = formBody(req.body);
    try {
      const input: Record<string, unknown> = { ip: (values.ip ?? '').trim(), ports: portList(values.ports ?? '') };
      if ((values.alias ?? '').trim() !== '') input.alias = (values.alias ?? '').trim();
      const added = await createAllocations(ctx, node.id, input);
      await adminAudit(ctx, req, 'admin:allocation.create', { type: 'node', id: node.id }, { ip: input.ip, ports: input.ports, added: added.length });
      setFlash(reply, 'success', `${added.length} allocation(s) added.`);
      return seeOther(reply, `/admin/nodes/${node.id}/allocations`);
    } catch (err) {
      const failed = failedForm(values, err);
      if (failed === undefined) throw err;
      return listPage(req, reply, node, failed.form, failed.status);
    }
  });

  admin.post('/admin/nodes/:id/allocations/:allocation/delete', async (req, reply) => {
    const nodeId = idParam(req, 'node');
    const id = idParam(req, 'allocation', 'allocation');
    try {
      await deleteAllocation(ctx, nodeId, id);
      await adminAudit(ctx, req, 'admin:allocation.delete', { type: 'node', id: nodeId }, { allocation: id });
    } catch (err) {
      return refused(reply, err, `/admin/nodes/${nodeId}/allocations`);
    }
    setFlash(reply, 'success', 'The allocation was deleted.');
    return seeOther(reply, `/admin/nodes/${nodeId}/allocations`);
  });
}

/**
 * `/admin/locations`: the places nodes are grouped by; list with a create form, edit and delete
 * (refused while nodes remain in the location).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { PanelContext } from '../context.ts';
import { createLocation, deleteLocation, updateLocation } from '../services/infrastructure.ts';
import { found } from '../services/records.ts';
import type { LocationRow } from '../store/records.ts';
import { setFlash } from './flash.ts';
import { confirmButton, failedForm, formBody, formOf, formSummary, inputField, inputOf, postForm, type FormState } from './forms.ts';
import { html } from './html.ts';
import { adminAudit, csrfToken, idParam, pageParam, pager, refused, seeOther, sendPage, rowsOrNone } from './respond.ts';

const INPUT = { textOrOmit: ['short'], text: ['long'] } as const;

function fields(form: FormState): ReturnType<typeof html> {
  return html`${inputField(form, 'short', 'Short code', { required: true, placeholder: 'eu-west', help: 'Letters, digits, dots, dashes and underscores.' })}${inputField(form, 'long', 'Description')}`;
}

/** Registers the location pages on the admin scope; runs once at app build. */
export function registerAdminLocations(admin: FastifyInstance, ctx: PanelContext): void {
  const listPage = async (req: FastifyRequest, reply: FastifyReply, form: FormState, status = 200): Promise<FastifyReply> => {
    const page = await ctx.store.locations.list({ page: pageParam(req) });
    const rows = await Promise.all(page.items.map(async (l) => ({ l, nodes: (await ctx.store.nodes.list({ perPage: 1, filter: { location_id: l.id } })).total })));
    return sendPage(req, reply, {
      title: 'Locations',
      status,
      body: html`<h1>Locations</h1>
<table><thead><tr><th>ID</th><th>Short code</th><th>Description</th><th>Nodes</th></tr></thead><tbody>${rowsOrNone(rows.map(
        ({ l, nodes }) => html`<tr><td>${l.id}</td><td><a href="/admin/locations/${l.id}">${l.short}</a></td><td>${l.long}</td><td>${nodes}</td></tr>`,
      ), 4, 'No locations yet.')}</tbody></table>${pager(page, '/admin/locations')}
<h2>Create location</h2>${formSummary(form)}<div class="card">${postForm('/admin/locations', csrfToken(req, reply), html`${fields(form)}<div class="actions"><button type="submit">Create location</button></div>`)}</div>`,
    });
  };

  const editPage = (req: FastifyRequest, reply: FastifyReply, location: LocationRow, form: FormState, status = 200): FastifyReply => {
    const csrf = csrfToken(req, reply);
    return sendPage(req, reply, {
      title: `Location ${location.short}`,
      status,
      body: html`<h1>Location ${location.short}</h1>${formSummary(form)}<div class="card">${postForm(
        `/admin/locations/${location.id}`,
        csrf,
        html`${fields(form)}<div class="actions"><button type="submit">Save</button></div>`,
      )}</div><div class="card"><h2>Delete</h2><p>A location that still has nodes cannot be deleted.</p>${confirmButton(`/admin/locations/${location.id}/delete`, csrf, 'Delete location', `Delete location ${location.short}?`)}</div>`,
    });
  };

  admin.get('/admin/locations', async (req, reply) => listPage(req, reply, formOf()));

  admin.post('/admin/locations', async (req, reply) => {
    const values = formBody(req.body);
    try {
      const l = await createLocation(ctx, inputOf(values, INPUT));
      await adminAudit(ctx, req, 'admin:location.create', { type: 'location', id: l.id }, { short: l.short });
      setFlash(reply, 'success', `Location ${l.short} was created.`);
      return seeOther(reply, '/admin/locations');
    } catch (err) {
      const failed = failedForm(values, err);
      if (failed === undefined) throw err;
      return listPage(req, reply, failed.form, failed.status);
    }
  });

  admin.get('/admin/locations/:id', async (req, reply) => {
    const l = found(await ctx.store.locations.find(idParam(req, 'location')), 'location');
    return editPage(req, reply, l, formOf({ short: l.short, long: l.long }));
  });

  admin.post('/admin/locations/:id', async (req, reply) => {
    const l = found(await ctx.store.locations.find(idParam(req, 'location')), 'location');
    const values = formBody(req.body);
    try {
      const updated = await updateLocation(ctx, l.id, inputOf(values, INPUT));
      await adminAudit(ctx, req, 'admin:location.update', { type: 'location', id: l.id }, { short: updated.short });
      setFlash(reply, 'success', `Location ${updated.short} was saved.`);
      return seeOther(reply, `/admin/locations/${l.id}`);
    } catch (err) {
      const failed = failedForm(values, err);
      if (failed === undefined) throw err;
      return editPage(req, reply, l, failed.form, failed.status);
    }
  });

  admin.post('/admin/locations/:id/delete', async (req, reply) => {
    const id = idParam(req, 'location');
    try {
      await deleteLocation(ctx, id);
      await adminAudit(ctx, req, 'admin:location.delete', { type: 'location', id });
    } catch (err) {
      return refused(reply, err, `/admin/locations/${id}`);
    }
    setFlash(reply, 'success', 'The location was deleted.');
    return seeOther(reply, '/admin/locations');
  });
}

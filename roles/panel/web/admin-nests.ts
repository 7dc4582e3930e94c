/**
 * `/admin/nests` and `/admin/eggs/:id`: the catalogue of what servers run. A nest groups eggs; an
 * egg names the Docker image and startup command a new server copies. Deleting a nest deletes
 * its eggs; both are refused while servers use them.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { PanelContext } from '../context.ts';
import { createEgg, createNest, deleteEgg, deleteNest, updateEgg, updateNest } from '../services/catalog.ts';
import { found } from '../services/records.ts';
import type { EggRow, NestRow } from '../store/records.ts';
import { setFlash } from './flash.ts';
import { confirmButton, failedForm, formBody, formOf, formSummary, inputField, inputOf, postForm, textareaField, type FormState } from './forms.ts';
import { html, type SafeHtml } from './html.ts';
import { adminAudit, csrfToken, idParam, refused, seeOther, sendPage, rowsOrNone } from './respond.ts';

const NEST_INPUT = { textOrOmit: ['name'], text: ['description', 'author'] } as const;
const EGG_INPUT = { textOrOmit: ['name', 'docker_image', 'startup'], text: ['description', 'author'] } as const;

function nestFields(form: FormState): SafeHtml {
  return html`<div class="grid">${inputField(form, 'name', 'Name', { required: true })}${inputField(form, 'author', 'Author', { placeholder: 'you@example.com' })}</div>${textareaField(form, 'description', 'Description')}`;
}

function eggFields(form: FormState): SafeHtml {
  return html`<div class="grid">${inputField(form, 'name', 'Name', { required: true })}${inputField(form, 'docker_image', 'Docker image', {
    required: true,
    placeholder: 'ghcr.io/example/java:17',
  })}${inputField(form, 'author', 'Author')}</div>${inputField(form, 'startup', 'Startup command', { required: true, placeholder: 'java -Xmx{{SERVER_MEMORY}}M -jar server.jar' })}${textareaField(
    form,
    'description',
    'Description',
  )}`;
}

/** Registers the nest and egg pages on the admin scope; runs once at app build. */
export function registerAdminNests(admin: FastifyInstance, ctx: PanelContext): void {
  const listPage = async (req: FastifyRequest, reply: FastifyReply, form: FormState, status = 200): Promise<FastifyReply> => {
    const nests = await ctx.store.nests.all();
    const rows = await Promise.all(nests.map(async (n) => ({ n, eggs: (await ctx.store.eggs.list({ perPage: 1, filter: { nest_id: n.id } })).total })));
    return sendPage(req, reply, {
      title: 'Nests',
      status,
      body: html`<h1>Nests</h1>
<table><thead><tr><th>ID</th><th>Name</th><th>Description</th><th>Eggs</th></tr></thead><tbody>${rowsOrNone(rows.map(
        ({ n, eggs }) => html`<tr><td>${n.id}</td><td><a href="/admin/nests/${n.id}">${n.name}</a></td><td>${n.description}</td><td>${eggs}</td></tr>`,
      ), 4, 'No nests yet.')}</tbody></table>
<h2>Create nest</h2>${formSummary(form)}<div class="card">${postForm('/admin/nests', csrfToken(req, reply), html`${nestFields(form)}<div class="actions"><button type="submit">Create nest</button></div>`)}</div>`,
    });
  };

  const nestPage = async (req: FastifyRequest, reply: FastifyReply, nest: NestRow, o: { nestForm?: FormState; eggForm?: FormState; status?: number } = {}): Promise<FastifyReply> => {
    const csrf = csrfToken(req, reply);
    const nestForm = o.nestForm ?? formOf({ name: nest.name, description: nest.description, author: nest.author });
    const eggForm = o.eggForm ?? formOf({}, 'egg-');
    const eggs = await ctx.store.eggs.all({ nest_id: nest.id });
    return sendPage(req, reply, {
      title: `Nest ${nest.name}`,
      status: o.status,
      body: html`<h1>Nest ${nest.name}</h1>
<h2>Eggs</h2><table><thead><tr><th>ID</th><th>Name</th><th>Docker image</th></tr></thead><tbody>${rowsOrNone(eggs.map(
        (e) => html`<tr><td>${e.id}</td><td><a href="/admin/eggs/${e.id}">${e.name}</a></td><td><code>${e.docker_image}</code></td></tr>`,
      ), 3, 'No eggs in this nest yet.')}</tbody></table>
<h2>Create egg</h2>${formSummary(eggForm)}<div class="card">${postForm(`/admin/nests/${nest.id}/eggs`, csrf, html`${eggFields(eggForm)}<div class="actions"><button type="submit">Create egg</button></div>`)}</div>
<h2>Nest settings</h2>${formSummary(nestForm)}<div class="card">${postForm(`/admin/nests/${nest.id}`, csrf, html`${nestFields(nestForm)}<div class="actions"><button type="submit">Save</button></div>`)}</div>
<div class="card"><h2>Delete</h2><p>Deletes the nest and its eggs; refused while servers use it.</p>${confirmButton(`/admin/nests/${nest.id}/delete`, csrf, 'Delete nest', `Delete nest ${nest.name} and its eggs?`)}</div>`,
    });
  };

  const eggPage = async (req: FastifyRequest, reply: FastifyReply, egg: EggRow, form: FormState, status = 200): Promise<FastifyReply> => {
    const csrf = csrfToken(req, reply);
    const nest = await ctx.store.nests.find(egg.nest_id);
    return sendPage(req, reply, {
      title: `Egg ${egg.name}`,
      status,
      body: html`<h1>Egg ${egg.name}</h1><p>Nest <a href="/admin/nests/${egg.nest_id}">${nest?.name ?? '?'}</a> · UUID <code>${egg.uuid}</code></p>
${formSummary(form)}<div class="card">${postForm(`/admin/eggs/${egg.id}`, csrf, html`${eggFields(form)}<div class="actions"><button type="submit">Save</button></div>`)}</div>
<div class="card"><h2>Delete</h2><p>Refused while servers use this egg.</p>${confirmButton(`/admin/eggs/${egg.id}/delete`, csrf, 'Delete egg', `Delete egg ${egg.name}?`)}</div>`,
    });
  };

  admin.get('/admin/nests', async (req, reply) => listPage(req, reply, formOf()));

  admin.post('/admin/nests', async (req, reply) => {
    const values = formBody(req.body);
    try {
      const nest = await createNest(ctx, inputOf(values, NEST_INPUT));
      await adminAudit(ctx, req, 'admin:nest.create', { type: 'nest', id: nest.id }, { name: nest.name });
      setFlash(reply, 'success', `Nest ${nest.name} was created.`);
      return seeOther(reply, `/admin/nests/${nest.id}`);
    } catch (err) {
      const failed = failedForm(values, err);
      if (failed === undefined) throw err;
      return listPage(req, reply, failed.form, failed.status);
    }
  });

  admin.get('/admin/nests/:id', async (req, reply) => nestPage(req, reply, found(await ctx.store.nests.find(idParam(req, 'nest')), 'nest')));

  admin.post('/admin/nests/:id', async (req, reply) => {
    const nest = found(await ctx.store.nests.find(idParam(req, 'nest')), 'nest');
    const values = formBody(req.body);
    try {
      const updated = await updateNest(ctx, nest.id, inputOf(values, NEST_INPUT));
      await adminAudit(ctx, req, 'admin:nest.update', { type: 'nest', id: nest.id }, { name: updated.name });
      setFlash(reply, 'success', `Nest ${updated.name} was saved.`);
      return seeOther(reply, `/admin/nests/${nest.id}`);
    } catch (err) {
      const failed = failedForm(values, err);
      if (failed === undefined) throw err;
      return nestPage(req, reply, nest, { nestForm: failed.form, status: failed.status });
    }
  });

  admin.post('/admin/nests/:id/delete', async (req, reply) => {
    const id = idParam(req, 'nest');
    try {
      await deleteNest(ctx, id);
      await adminAudit(ctx, req, 'admin:nest.delete', { type: 'nest', id });
    } catch (err) {
      return refused(reply, err, `/admin/nests/${id}`);
    }
    setFlash(reply, 'success', 'The nest and its eggs were deleted.');
    return seeOther(reply, '/admin/nests');
  });

  admin.post('/admin/nests/:id/eggs', async (req, reply) => {
    const nest = found(await ctx.store.nests.find(idParam(req, 'nest')), 'nest');
    const values = formBody(req.body);
    try {
      const egg = await createEgg(ctx, { ...inputOf(values, EGG_INPUT), nest_id: nest.id });
      await adminAudit(ctx, req, 'admin:egg.create', { type: 'egg', id: egg.id }, { name: egg.name, nest: nest.id });
      setFlash(reply, 'success', `Egg ${egg.name} was created.`);
      return seeOther(reply, `/admin/nests/${nest.id}`);
    } catch (err) {
      const failed = failedForm(values, err);
      if (failed === undefined) throw err;
      return nestPage(req, reply, nest, { eggForm: { ...failed.form, idPrefix: 'egg-' }, status: failed.status });
    }
  });

  admin.get('/admin/eggs/:id', async (req, reply) => {
    const egg = found(await ctx.store.eggs.find(idParam(req, 'egg')), 'egg');
    return eggPage(req, reply, egg, formOf({ name: egg.name, docker_image: egg.docker_image, startup: egg.startup, author: egg.author, description: egg.description }));
  });

  admin.post('/admin/eggs/:id', async (req, reply) => {
    const egg = found(await ctx.store.eggs.find(idParam(req, 'egg')), 'egg');
    const values = formBody(req.body);
    try {
      const updated = await updateEgg(ctx, egg.id, inputOf(values, EGG_INPUT));
      await adminAudit(ctx, req, 'admin:egg.update', { type: 'egg', id: egg.id }, { name: updated.name });
      setFlash(reply, 'success', `Egg ${updated.name} was saved.`);
      return seeOther(reply, `/admin/eggs/${egg.id}`);
    } catch (err) {
      const failed = failedForm(values, err);
      if (failed === undefined) throw err;
      return eggPage(req, reply, egg, failed.form, failed.status);
    }
  });

  admin.post('/admin/eggs/:id/delete', async (req, reply) => {
    const egg = found(await ctx.store.eggs.find(idParam(req, 'egg')), 'egg');
    try {
      await deleteEgg(ctx, egg.id);
      await adminAudit(ctx, req, 'admin:egg.delete', { type: 'egg', id: egg.id }, { name: egg.name });
    } catch (err) {
      return refused(reply, err, `/admin/eggs/${egg.id}`);
    }
    setFlash(reply, 'success', 'The egg was deleted.');
    return seeOther(reply, `/admin/nests/${egg.nest_id}`);
  });
}

/**
 * The operations suite's admin session routes (spec/2 §4.3) in the admin web scope (session, 2FA,
 * root admin, CSRF: forms carry `_csrf`, scripts send `x-csrf-token`). Pages answer HTML; data
 * endpoints answer JSON, and their errors are the API error envelope for JSON clients. HTML forms
 * cannot send PUT or DELETE, so `POST /admin/ops/tags/{tag}` and `POST /admin/ops/templates/{template}`
 * with `_method=PUT|DELETE` stand for them; form problems come back as a notice on the page.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, isAppError } from '../../../../src/core/app-error.ts';
import type { PanelContext } from '../../context.ts';
import { apiErrors } from '../../http/api-format.ts';
import { found, notFound } from '../../services/records.ts';
import { createValidator, ID, problemsOf } from '../../services/validation.ts';
import { failedForm, formBody, formOf, inputOf, pageParam, seeOther, setFlash, wantsHtml, type FormState } from '../../web/index.ts';
import type { BulkRunner } from './bulk.ts';
import { bulkSync, BULK_TYPES, POWER_ACTIONS } from './bulk.ts';
import { bodyOf, boolQuery, intQuery, isJson, jsonObject, pathId, singleQuery, TAG_FORM, textQuery, whoOf, type Handlers } from './handlers.ts';
import { multiCreate } from './multicreate.ts';
import { auditPage, dashboardPage, healthPage, multiCreatePage, multiCreateResultPage, settingsPage, tagsPage, templatesPage } from './pages.ts';
import { allocationObject, SOURCE_LABEL, type OpsService } from './service.ts';
import { INT_KEYS, TEXT_KEYS } from './settings.ts';

const BASE = '/admin/ops';
const AUDIT_PER_PAGE = 50;
const TEMPLATE_FORM = { textOrOmit: ['name', 'category'], text: ['description'], bool: ['is_default'] } as const;
const validateRecent = createValidator<{ allocation_id: number }>({ required: ['allocation_id'], properties: { allocation_id: ID } });

/** A form's `config` textarea as an object; 422 on `config` when it is not a JSON object. */
function configOf(text: string | undefined): unknown {
  if (text === undefined || text.trim() === '') return {};
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new AppError('ERR_VALIDATION', 'the config field must be a JSON object', { status: 422, cause: { problems: [{ field: 'config', rule: 'json', detail: 'the config field must be a JSON object' }] } });
  }
}

/** Registers the routes on an admin scope (requireAdmin in its preHandler); runs once at app build. */
export function registerOpsAdmin(admin: FastifyInstance, ctx: PanelContext, service: OpsService, bulk: BulkRunner, h: Handlers): void {
  // JSON clients get the API error envelope; pages and forms fall through to the panel's error page.
  admin.setErrorHandler((err: Error & { statusCode?: number; code?: string }, req, reply) => {
    if (wantsHtml(req)) throw err;
    const status = err.statusCode ?? 500;
    const e = isAppError(err)
      ? err
      : err.code?.startsWith('FST_CSRF') === true
        ? new AppError('ERR_CSRF', 'the CSRF token is missing or does not match this session', { status: 403 })
        : status < 500
          ? new AppError('ERR_REQUEST', err.message, { status })
          : err;
    const out = apiErrors(e);
    if (out.status >= 500) ctx.logger.error({ err, url: req.url }, 'request failed');
    return reply.code(out.status).type('application/json').send(out.body);
  });

  /**
   * Runs a form action: clients that read JSON (no text/html in Accept, whatever their body) get
   * errors thrown (the envelope, 404 for an unknown id), browsers a notice on `back`.
   */
  const formAction = async (req: FastifyRequest, reply: FastifyReply, back: string, run: () => Promise<string>): Promise<FastifyReply> => {
    try {
      const message = await run();
      if (wantsHtml(req)) setFlash(reply, 'success', message);
      return seeOther(reply, back);
    } catch (err) {
      if (!wantsHtml(req) || !isAppError(err) || err.status >= 500) throw err;
      setFlash(reply, 'error', (err.code === 'ERR_VALIDATION' ? problemsOf(err).map((p) => p.detail) : [err.message]).join('; '));
      return seeOther(reply, back);
    }
  };

  admin.get(BASE, (req, reply) => dashboardPage(req, reply, ctx, service));

  // Settings (§2.5).
  admin.get(`${BASE}/settings`, async (req, reply) => settingsPage(req, reply, await service.settings()));
  admin.post(`${BASE}/settings`, async (req, reply) => {
    const values = formBody(req.body);
    try {
      await service.saveSettings(isJson(req) ? jsonObject(req.body) : inputOf(values, { int: INT_KEYS, textOrOmit: TEXT_KEYS, bool: ['bulk_move_enabled'] }), whoOf(req));
      if (wantsHtml(req)) setFlash(reply, 'success', 'Operations settings saved.');
      return seeOther(reply, `${BASE}/settings`);
    } catch (err) {
      const failed = isJson(req) || !wantsHtml(req) ? undefined : failedForm(values, err);
      if (failed === undefined) throw err;
      return settingsPage(req, reply, await service.settings(), failed.form, failed.status);
    }
  });

  // Naming pattern.
  admin.get(`${BASE}/naming/pattern`, async () => ({ pattern: (await service.settings()).naming_pattern }));
  admin.post(`${BASE}/naming/preview`, async (req) => service.previewName(bodyOf(req, { int: ['owner_id', 'node_id', 'egg_id', 'memory', 'disk', 'cpu', 'index', 'batch_offset'] })));

  // Tags (§2.6, §4.3).
  admin.get(`${BASE}/tags`, async (req, reply) => tagsPage(req, reply, service));
  admin.get(`${BASE}/tags/list`, () => h.tagList());
  admin.post(`${BASE}/tags/settings`, (req, reply) =>
    formAction(req, reply, `${BASE}/tags`, async () => {
      const v = isJson(req) ? jsonObject(req.body) : inputOf(formBody(req.body), { bool: ['tags_visible_to_users'] });
      const visible = await service.saveTagsVisibility(v, whoOf(req));
      return visible === true ? 'Server owners now see their server tags.' : 'Tags are hidden from server owners.';
    }),
  );
  admin.post(`${BASE}/tags`, (req, reply) =>
    formAction(req, reply, `${BASE}/tags`, async () => `Tag ${(await service.createTag(bodyOf(req, TAG_FORM), whoOf(req))).name} created.`),
  );
  const updateTag = (req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> =>
    formAction(req, reply, `${BASE}/tags`, async () => `Tag ${(await service.updateTag(pathId(req, 'tag', 'tag'), bodyOf(req, TAG_FORM), whoOf(req))).name} saved.`);
  const deleteTag = (req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> =>
    formAction(req, reply, `${BASE}/tags`, async () => {
      await service.deleteTag(pathId(req, 'tag', 'tag'), whoOf(req));
      return 'Tag deleted.';
    });
  admin.put(`${BASE}/tags/:tag`, updateTag);
  admin.delete(`${BASE}/tags/:tag`, deleteTag);
  admin.post(`${BASE}/tags/:tag`, (req, reply) => {
    const method = formBody(req.body)._method?.toUpperCase();
    if (method === 'PUT') return updateTag(req, reply);
    if (method === 'DELETE') return deleteTag(req, reply);
    throw new AppError('ERR_METHOD', 'this form needs _method PUT or DELETE', { status: 405 });
  });
  admin.get(`${BASE}/tags/by-servers`, async (req) => {
    // `ids[]=1` or a repeated `ids` is not the comma list this route takes: refused, not ignored.
    const text = (singleQuery(req, 'ids') ?? '').trim();
    const ids = text === '' ? [] : text.split(',').map((s) => s.trim());
    if (ids.length > 500 || ids.some((s) => !/^[1-9]\d{0,15}$/.test(s))) {
      throw new AppError('ERR_VALIDATION', 'the ids field must list up to 500 server ids separated by commas (ids=1,2,3)', { status: 422, cause: { field: 'ids' } });
    }
    return service.tagsByServers([...new Set(ids.map(Number))]);
  });
  admin.post(`${BASE}/tags/server/:serverId`, async (req) => {
    await service.syncServerTags(pathId(req, 'serverId', 'server'), req.body, whoOf(req));
    return { success: true };
  });

  // Templates (§2.6, §4.3).
  const templateBody = (req: FastifyRequest): Record<string, unknown> => {
    if (isJson(req)) return bodyOf(req, {});
    const values = formBody(req.body);
    return { ...inputOf(values, TEMPLATE_FORM), ...(values.config !== undefined ? { config: configOf(values.config) } : {}) };
  };
  admin.get(`${BASE}/templates`, (req, reply) => templatesPage(req, reply, h));
  admin.get(`${BASE}/templates/options`, (req) => h.templateList(req));
  admin.post(`${BASE}/templates`, (req, reply) =>
    formAction(req, reply, `${BASE}/templates`, async () => `Template ${(await service.createTemplate(templateBody(req), whoOf(req))).name} created.`),
  );
  admin.post(`${BASE}/templates/:template/save`, (req, reply) =>
    formAction(req, reply, `${BASE}/templates`, async () => `Template ${(await service.saveTemplate(pathId(req, 'template', 'template'), templateBody(req), whoOf(req))).name} saved as a new revision.`),
  );
  admin.post(`${BASE}/templates/:template/revision`, (req, reply) =>
    formAction(req, reply, `${BASE}/templates`, async () => `A revision of ${(await service.addRevision(pathId(req, 'template', 'template'), templateBody(req), whoOf(req))).name} was saved.`),
  );
  admin.post(`${BASE}/templates/:template/clone`, (req, reply) =>
    formAction(req, reply, `${BASE}/templates`, async () => `Cloned as ${(await service.cloneTemplate(pathId(req, 'template', 'template'), bodyOf(req, { textOrOmit: ['name'] }), whoOf(req))).name}.`),
  );
  const deleteTemplate = (req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> =>
    formAction(req, reply, `${BASE}/templates`, async () => {
      await service.deleteTemplate(pathId(req, 'template', 'template'), whoOf(req));
      return 'Template deleted.';
    });
  admin.delete(`${BASE}/templates/:template`, deleteTemplate);
  admin.post(`${BASE}/templates/:template`, (req, reply) => {
    if (formBody(req.body)._method?.toUpperCase() === 'DELETE') return deleteTemplate(req, reply);
    throw new AppError('ERR_METHOD', 'this form needs _method DELETE', { status: 405 });
  });
  admin.post(`${BASE}/templates/:template/favorite`, async (req) => {
    const id = pathId(req, 'template', 'template');
    found(await service.store.template(id), 'template');
    const userId = whoOf(req).actorId ?? 0;
    return { favorited: await service.store.toggleFavorite(id, userId) };
  });

  // Multi-create (§4.3).
  admin.get(`${BASE}/multicreate`, async (req, reply) => {
    if ((await ctx.store.nodes.list({ perPage: 1 })).total === 0) {
      setFlash(reply, 'info', 'Create a node with allocations before creating servers.');
      return seeOther(reply, '/admin/nodes/new');
    }
    return multiCreatePage(req, reply, ctx, service, formOf({ count: 1, memory: 1024, swap: 0, disk: 5120, io: 500, cpu: 100 }));
  });
  admin.post(`${BASE}/multicreate`, async (req, reply) => {
    if (isJson(req)) return multiCreate(ctx, service, req.body, whoOf(req));
    // The page's form: `count` servers alike, named by the pattern unless a name is given.
    const values = formBody(req.body);
    const base = inputOf(values, { textOrOmit: ['name'], int: ['count', 'owner_id', 'node_id', 'egg_id', 'memory', 'swap', 'disk', 'io', 'cpu'] });
    const { count, ...entry } = base;
    const n = typeof count === 'number' && count >= 1 && count <= 50 ? count : 0;
    if (n === 0) {
      const form: FormState = { ...formOf(values), errors: { count: ['the count field must be between 1 and 50'] }, summary: ['the count field must be between 1 and 50'] };
      return multiCreatePage(req, reply, ctx, service, form, 422);
    }
    const outcome = await multiCreate(ctx, service, { servers: Array.from({ length: n }, () => ({ ...entry })) }, whoOf(req));
    return multiCreateResultPage(req, reply, outcome);
  });
  admin.get(`${BASE}/servers/filter-meta`, async () => {
    const [tags, nests, eggs, nodes, locations] = await Promise.all([service.store.tags(), ctx.store.nests.all(), ctx.store.eggs.all(), ctx.store.nodes.all(), ctx.store.locations.all()]);
    return {
      tags: tags.map((t) => ({ id: t.id, name: t.name, color: t.color, icon: t.icon })),
      types: nests.map((n) => ({ id: n.id, name: n.name })),
      eggs: eggs.map((e) => ({ id: e.id, name: e.name, nest_id: e.nest_id })),
      nodes: nodes.map((n) => ({ id: n.id, name: n.name, location_id: n.location_id })),
      locations: locations.map((l) => ({ id: l.id, short: l.short, long: l.long })),
    };
  });

  // Allocation picker (§4.3).
  admin.get(`${BASE}/allocations/recents`, async (req) => ({ data: (await service.store.recents(whoOf(req).actorId ?? 0)).map(allocationObject) }));
  admin.post(`${BASE}/allocations/recents`, async (req) => {
    const v = validateRecent(bodyOf(req, { int: ['allocation_id'] }));
    found(await ctx.store.allocations.find(v.allocation_id), 'allocation');
    await service.store.addRecent(whoOf(req).actorId ?? 0, v.allocation_id, new Date().toISOString());
    return { success: true };
  });
  const nodeOf = async (req: FastifyRequest): Promise<number> => found(await ctx.store.nodes.find(pathId(req, 'node', 'node')), 'node').id;
  admin.get(`${BASE}/allocations/:node`, async (req) => {
    const nodeId = await nodeOf(req);
    const perPage = intQuery(req, 'per_page', 10, 200, (await service.settings()).allocation_page_size);
    const search = textQuery(req, 'search', 60);
    const freeOnly = boolQuery(req, 'free_only', false);
    const cursorText = textQuery(req, 'cursor', 200);
    let after: { port: number; id: number } | undefined;
    if (cursorText !== '') {
      const m = /^(\d{1,5}):(\d{1,15})$/.exec(Buffer.from(cursorText, 'base64url').toString('utf8'));
      if (m === null) throw new AppError('ERR_VALIDATION', 'the cursor field is not a cursor this endpoint gave', { status: 422, cause: { field: 'cursor' } });
      after = { port: Number(m[1]), id: Number(m[2]) };
    }
    const rows = await service.store.allocationPage(nodeId, { search, freeOnly, perPage: perPage + 1, after });
    const page = rows.slice(0, perPage);
    const last = page[page.length - 1];
    return { data: page.map(allocationObject), meta: { per_page: perPage, next_cursor: rows.length > perPage && last !== undefined ? Buffer.from(`${last.port}:${last.id}`).toString('base64url') : null } };
  });
  for (const [path, above] of [['next', true], ['prev', false]] as const) {
    admin.get(`${BASE}/allocations/:node/${path}`, async (req) => {
      const nodeId = await nodeOf(req);
      const port = intQuery(req, 'current_port', 0, 65536, above ? 0 : 65536);
      const a = await service.store.nearFree(nodeId, port, above);
      return { allocation: a === undefined ? null : allocationObject(a) };
    });
  }
  admin.get(`${BASE}/allocations/:node/random`, async (req) => {
    const a = await service.store.randomFree(await nodeOf(req));
    return { allocation: a === undefined ? null : allocationObject(a) };
  });

  // Bulk operations (§4.3, §3.2).
  admin.post(`${BASE}/bulk`, async (req, reply) => reply.code(202).send(await h.bulkDispatch(req)));
  admin.post(`${BASE}/bulk/preflight`, async (req) => {
    try {
      await bulk.check(req.body);
      return { valid: true };
    } catch (err) {
      if (!isAppError(err) || err.status >= 500) throw err;
      return { valid: false, error: err.message };
    }
  });
  admin.get(`${BASE}/bulk/meta`, async () => {
    const [nodes, tags, s] = await Promise.all([service.store.nodeLoads(), service.store.tags(), service.settings()]);
    return {
      nodes: nodes.map((n) => ({ id: n.node_id, name: n.node_name, free_allocations: n.allocations_total - n.allocations_used, allocations: n.allocations_total })),
      tags: tags.map((t) => ({ id: t.id, name: t.name, color: t.color, icon: t.icon })),
      types: BULK_TYPES,
      power_actions: POWER_ACTIONS,
      transfer_strategies: [{ key: 'records', label: 'Re-point the node and allocation records (no server data moves)', enabled: s.bulk_move_enabled }],
      modes: { current: bulkSync() ? 'sync' : 'queue', available: ['queue', 'sync'] },
    };
  });
  admin.get(`${BASE}/bulk/:uuid`, (req) => h.bulkShow(req));

  // Search, activity, audit (§4.3, §8).
  admin.get(`${BASE}/search`, (req) => h.search(req));
  admin.get(`${BASE}/activity`, async (req) => {
    const perPage = intQuery(req, 'per_page', 10, 100, 25);
    const p = await service.store.feed({
      serverId: intQuery(req, 'server_id', 1, Number.MAX_SAFE_INTEGER),
      nodeId: intQuery(req, 'node_id', 1, Number.MAX_SAFE_INTEGER),
      event: textQuery(req, 'event', 80),
      page: pageParam(req),
      perPage,
      label: SOURCE_LABEL,
    });
    return {
      data: p.items.map((r) => ({ id: r.id, source: r.source, event: r.event, server_id: r.server_id, node_id: r.node_id, actor_id: r.actor_id, payload: JSON.parse(r.payload) as unknown, created_at: r.created_at })),
      meta: { pagination: { total: p.total, count: p.items.length, per_page: p.perPage, current_page: p.page, total_pages: Math.max(1, Math.ceil(p.total / p.perPage)) } },
    };
  });
  admin.get(`${BASE}/audit`, async (req, reply) => {
    const action = textQuery(req, 'action', 80);
    const actorId = intQuery(req, 'actor_id', 1, Number.MAX_SAFE_INTEGER);
    const page = await service.store.auditPage({ action, actorId, page: pageParam(req), perPage: AUDIT_PER_PAGE });
    return auditPage(req, reply, ctx, page, { action, actorId });
  });

  // Node health (§2.6 snapshots, §4.3).
  admin.get(`${BASE}/health`, (req, reply) => healthPage(req, reply, service));
  admin.get(`${BASE}/health/nodes/:node`, (req) => h.nodeHealth(req));
  admin.get(`${BASE}/health/node-recommendations`, (req) => h.nodeRecommendations(req));

  // Any other path or method under /admin/ops (the analytics and server health that are not built,
  // a typo): a JSON client gets the 404 envelope as for an unknown id, a browser the panel's 404 page.
  admin.all(`${BASE}/*`, (req, reply) => {
    if (wantsHtml(req)) return reply.callNotFound();
    throw notFound('route');
  });
}

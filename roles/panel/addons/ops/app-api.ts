/**
 * The operations application API (spec/2 §4.4) at `/api/application/ops`: the admin routes'
 * payloads, validation and JSON answers for integrations, behind an application key whose owner
 * is a root admin now. A key of a user who lost root admin answers 403 with the plain-text
 * message of §7.3 on every route (the core application API answers such a key 401). Changes
 * answer the record (201 on create) or 204, not the admin pages' redirects; GET /settings answers
 * the settings as an HTML view, as §4.4 notes.
 */
import type { FastifyInstance } from 'fastify';
import { AppError } from '../../../../src/core/app-error.ts';
import type { PanelContext } from '../../context.ts';
import { authenticateKey } from '../../services/api-keys.ts';
import { html, layout, SECURITY_HEADERS } from '../../web/index.ts';
import { jsonObject, pathId, whoOf, type Handlers } from './handlers.ts';
import { tagAttributes, type OpsService } from './service.ts';

export const ROOT_ADMIN_REQUIRED = 'Root administrator access is required to use the operations API.';

/** Registers the routes on the `/api/application/ops` scope; runs once at app build. */
export function registerOpsApplicationApi(api: FastifyInstance, ctx: PanelContext, service: OpsService, h: Handlers): void {
  api.decorateRequest('apiUser', undefined);
  api.decorateRequest('apiKey', undefined);
  // onRequest, before the body is parsed: a request without a valid key, or with the key of a
  // user who lost root admin, is answered 401/403 even when its body is malformed JSON.
  api.addHook('onRequest', async (req, reply) => {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    const found = m?.[1] === undefined ? undefined : await authenticateKey(ctx, 'application', m[1], req.ip, { anyOwner: true });
    if (found === undefined) throw new AppError('ERR_UNAUTHORIZED', 'unauthenticated: a valid API key is required', { status: 401 });
    if (found.user.root_admin !== 1) return reply.code(403).type('text/plain; charset=utf-8').send(ROOT_ADMIN_REQUIRED);
    req.apiUser = found.user;
    req.apiKey = found.key;
    return undefined;
  });

  api.get('/tags', () => h.tagList());
  api.post('/tags', async (req, reply) => reply.code(201).send(tagAttributes(await service.createTag(jsonObject(req.body), whoOf(req)))));
  api.put('/tags/:tag', async (req) => tagAttributes(await service.updateTag(pathId(req, 'tag', 'tag'), jsonObject(req.body), whoOf(req))));
  api.delete('/tags/:tag', async (req, reply) => {
    await service.deleteTag(pathId(req, 'tag', 'tag'), whoOf(req));
    return reply.code(204).send();
  });
  api.get('/templates', (req) => h.templateList(req));
  api.post('/templates', async (req, reply) => reply.code(201).send(await h.templateOne(req, (await service.createTemplate(jsonObject(req.body), whoOf(req))).id)));
  api.post('/bulk', async (req, reply) => reply.code(202).send(await h.bulkDispatch(req)));
  api.get('/bulk/:uuid', (req) => h.bulkShow(req));
  api.get('/search', (req) => h.search(req));
  api.get('/health/nodes/:node', (req) => h.nodeHealth(req));
  api.get('/health/node-recommendations', (req) => h.nodeRecommendations(req));
  api.get('/settings', async (_req, reply) => {
    const s = await service.settings();
    const body = html`<h1>Operations settings</h1><table id="ops-settings">${Object.entries(s).map(([k, v]) => html`<tr><th>${k}</th><td>${v === null ? 'not set' : String(v)}</td></tr>`)}</table>`;
    return reply.headers(SECURITY_HEADERS).type('text/html; charset=utf-8').send(layout({ title: 'Operations settings', body }));
  });
}

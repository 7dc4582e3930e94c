/**
 * The panel's HTTP server: one Fastify instance for the client API (/api/client), the application
 * API (/api/application), the admin web pages (everything else) and, through addons, their own
 * routes. Errors are mapped in one place: the API error envelope under /api/, an HTML page
 * elsewhere.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { AppError, isAppError } from '../../../src/core/app-error.ts';
import { acceptEmptyJson, closeAnsweredConnectionsWhenClosing } from '../../../src/lib/http-api.ts';
import type { RunningAddon } from '../addons/addon.ts';
import type { PanelContext } from '../context.ts';
import { registerWebRoutes, renderErrorPage } from '../web/index.ts';
import { apiErrors } from './api-format.ts';
import { registerApplicationApi } from './application-api.ts';
import { BODY_LIMIT, registerClientApi } from './client-api.ts';

/** Translates Fastify's own errors (bad JSON, too large, ...) to AppErrors. */
function normalize(err: Error & { code?: string; statusCode?: number }): unknown {
  if (isAppError(err)) return err;
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new AppError('ERR_TOO_LARGE', `the request body is larger than ${BODY_LIMIT} bytes`, { status: 413 });
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new AppError('ERR_MEDIA_TYPE', 'unsupported request content type', { status: 415 });
  }
  if (err instanceof SyntaxError || err.statusCode === 400) return new AppError('ERR_BAD_REQUEST', 'the request is malformed', { status: 400 });
  if (err.statusCode === 403 && err.code?.startsWith('FST_CSRF') === true) return new AppError('ERR_CSRF', 'the form expired or did not come from this panel; reload the page and try again', { status: 403 });
  return err;
}

/** Builds the app with every route registered (the addons' too); the caller listens and closes it. */
export async function createPanelApp(ctx: PanelContext, addons: readonly RunningAddon[] = []): Promise<FastifyInstance> {
  // Behind trusted proxies the client is the rightmost X-Forwarded-For entry no proxy added (req.ip).
  const trustProxy = ctx.config.trusted_proxies.length > 0 ? [...ctx.config.trusted_proxies] : false;
  const app = Fastify({ bodyLimit: BODY_LIMIT, logger: false, return503OnClosing: true, trustProxy });
  acceptEmptyJson(app);
  closeAnsweredConnectionsWhenClosing(app);
  app.setErrorHandler((raw: Error & { code?: string; statusCode?: number }, req, reply) => {
    const err = normalize(raw);
    const { status, body } = apiErrors(err);
    if (!isAppError(err) || status >= 500) ctx.logger.error({ err: raw, url: req.url, method: req.method, status }, 'request failed');
    if (req.url.startsWith('/api/')) return reply.code(status).type('application/json').send(body);
    return reply.code(status).type('text/html; charset=utf-8').send(renderErrorPage(status, body.errors[0]?.detail ?? 'error'));
  });
  app.setNotFoundHandler((req, reply) => {
    const err = new AppError('ERR_NOT_FOUND', `no route ${req.method} ${req.url.split('?')[0] ?? ''}`, { status: 404 });
    if (req.url.startsWith('/api/')) return reply.code(404).type('application/json').send(apiErrors(err).body);
    return reply.code(404).type('text/html; charset=utf-8').send(renderErrorPage(404, 'page not found'));
  });
  await app.register(async (api) => registerApplicationApi(api, ctx), { prefix: '/api/application' });
  await app.register(async (api) => registerClientApi(api, ctx, addons), { prefix: '/api/client' });
  for (const addon of addons) await addon.routes?.(app);
  await app.register(async (web) => registerWebRoutes(web, ctx));
  return app;
}

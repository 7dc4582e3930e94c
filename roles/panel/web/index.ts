/**
 * The panel's web side (everything outside /api): sign-in, account and the server-rendered admin
 * pages. The cookie, form-body and CSRF plugins are registered inside this scope only (the APIs
 * use bearer keys, never cookies). Every request of the scope loads its session first; every
 * state-changing request (any method but GET/HEAD/OPTIONS) must carry the CSRF token (hidden
 * `_csrf` field, or the `x-csrf-token` header for addon scripts) bound to that session.
 *
 * Addons extend the web with `registerNavEntry` (navigation) and `registerWebExtension` (routes
 * in this scope, behind `requireAdmin`), rendering their pages with `sendPage`/`layout` and `html`.
 */
import fastifyCookie from '@fastify/cookie';
import fastifyCsrf from '@fastify/csrf-protection';
import fastifyFormbody from '@fastify/formbody';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { PanelContext } from '../context.ts';
import { registerAccountRoutes } from './account-routes.ts';
import { registerAdminAllocations } from './admin-allocations.ts';
import { registerAdminApiKeys } from './admin-api-keys.ts';
import { registerAdminLocations } from './admin-locations.ts';
import { registerAdminNests } from './admin-nests.ts';
import { registerAdminNodes } from './admin-nodes.ts';
import { registerAdminOverview } from './admin-overview.ts';
import { registerAdminServers } from './admin-servers.ts';
import { registerAdminUsers } from './admin-users.ts';
import { registerAuthRoutes } from './auth-routes.ts';
import { createLoginThrottle, type LoginThrottle } from './login-throttle.ts';
import { registerCoreNav } from './nav.ts';
import { csrfUserInfo } from './respond.ts';
import { loadWebSession, requireAdmin } from './web-auth.ts';

export { html, raw, escapeHtml, SafeHtml } from './html.ts';
export { layout, renderErrorPage, notices, type LayoutOptions, type Notice } from './layout.ts';
export { registerNavEntry, navSections, type NavEntry } from './nav.ts';
export { requireAdmin, requireLogin, currentSession, webSessionOf, loadWebSession, wantsHtml } from './web-auth.ts';
export { sendPage, csrfToken, adminAudit, idParam, pageParam, pager, rowsOrNone, seeOther, refused, type PageOptions } from './respond.ts';
export { setFlash } from './flash.ts';
export { registerServerSection, registerServerListBadges, type ServerSection, type ServerListBadges } from './server-sections.ts';
export * from './forms.ts';

/** The CSRF secret cookie (double-submit: the token in the form must match it and the session). */
export const CSRF_COOKIE = 'hostkit_csrf';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Pages may load scripts and styles from the panel itself (addon charts), images from data: URLs
 * (the 2FA QR code), and never run inline script or sit in a frame. Every page of the web scope
 * gets them; a page served elsewhere (the operations API's HTML settings view) sets them itself.
 */
export const SECURITY_HEADERS = {
  'content-security-policy': "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
  'cache-control': 'no-store',
};

/** Routes an addon adds to the web scope (cookies, forms, CSRF and sessions available). */
export type WebExtension = (web: FastifyInstance, ctx: PanelContext) => Promise<void> | void;

const extensions = new Map<string, WebExtension>();

/**
 * Registers an addon's web routes under a name (registering the same name again replaces them);
 * call before the app is built. Admin routes put `requireAdmin(ctx)` in their preHandler.
 */
export function registerWebExtension(name: string, extension: WebExtension): void {
  extensions.set(name, extension);
}

export interface WebOptions {
  /** The login throttle (tests pass their own clock); one per app by default. */
  throttle?: LoginThrottle;
}

/** Registers the web plugins, hooks and routes on the app's web scope; runs once at app build. */
export async function registerWebRoutes(app: FastifyInstance, ctx: PanelContext, opts: WebOptions = {}): Promise<void> {
  const secure = ctx.config.base_url.startsWith('https:');
  // parseOptions are also the defaults of every cookie set here: none goes out without Secure under an https base_url.
  await app.register(fastifyCookie, { secret: ctx.appKey.derive('cookie'), parseOptions: { secure } });
  await app.register(fastifyFormbody);
  await app.register(fastifyCsrf, {
    sessionPlugin: '@fastify/cookie',
    cookieKey: CSRF_COOKIE,
    cookieOpts: { path: '/', httpOnly: true, sameSite: 'lax', secure, signed: true },
    getUserInfo: csrfUserInfo,
    getToken: (req: FastifyRequest) => {
      const field = (req.body as Record<string, unknown> | undefined)?._csrf;
      const header = req.headers['x-csrf-token'];
      return typeof field === 'string' ? field : typeof header === 'string' ? header : undefined;
    },
    csrfOpts: { hmacKey: ctx.appKey.derive('csrf') },
  });

  app.addHook('onSend', async (_req, reply) => {
    for (const [k, v] of Object.entries(SECURITY_HEADERS)) if (!reply.hasHeader(k)) reply.header(k, v);
  });
  // The session first (the CSRF token is bound to it), then the CSRF check of unsafe methods.
  // A logout without a live session changes nothing, so it passes (an expired session's logout
  // button would otherwise answer "form expired").
  app.addHook('preHandler', (req, reply, done) => {
    loadWebSession(ctx, req).then(
      (s) => (SAFE_METHODS.has(req.method) || (s === undefined && req.url === '/auth/logout') ? done() : app.csrfProtection(req, reply, done)),
      (err: Error) => done(err),
    );
  });

  registerCoreNav();
  const throttle = opts.throttle ?? createLoginThrottle();
  registerAuthRoutes(app, ctx, throttle);
  registerAccountRoutes(app, ctx, throttle);
  await app.register(async (admin) => {
    admin.addHook('preHandler', requireAdmin(ctx));
    registerAdminOverview(admin, ctx);
    registerAdminUsers(admin, ctx);
    registerAdminLocations(admin, ctx);
    registerAdminNodes(admin, ctx);
    registerAdminAllocations(admin, ctx);
    registerAdminNests(admin, ctx);
    registerAdminServers(admin, ctx);
    registerAdminApiKeys(admin, ctx);
  });
  for (const extension of extensions.values()) await extension(app, ctx);
}

/**
 * Who is asking: the session of a web request (loaded once per request from the session cookie)
 * and the guards routes put in front of their handlers. `requireAdmin` is the one gate of every
 * admin page and admin JSON endpoint (core and addons): signed in, second factor passed, root
 * admin with two-factor authentication enabled.
 */
import type { FastifyReply, FastifyRequest, preHandlerAsyncHookHandler } from 'fastify';
import { AppError } from '../../../src/core/app-error.ts';
import type { PanelContext } from '../context.ts';
import { apiErrors } from '../http/api-format.ts';
import { resolveSession, SESSION_COOKIE, sessionComplete, type WebSession } from './sessions.ts';

const sessions = new WeakMap<FastifyRequest, WebSession | null>();

/** The path admins without 2FA are sent to; the page shows why. */
export const TWO_FACTOR_REQUIRED_PATH = '/account/two-factor?required=admin';

function cookieValue(req: FastifyRequest): string | undefined {
  // req.cookies exists inside the web scope; a route outside it (an addon's) reads the header,
  // which is enough for the one cookie whose value is plain hex.
  const parsed = (req as { cookies?: Record<string, string | undefined> }).cookies;
  if (parsed !== undefined) return parsed[SESSION_COOKIE];
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [name, value] = part.split('=', 2).map((s) => s.trim());
    if (name === SESSION_COOKIE) return value;
  }
  return undefined;
}

/** Loads (once per request) the request's live session; runs before every web route. */
export async function loadWebSession(ctx: PanelContext, req: FastifyRequest): Promise<WebSession | undefined> {
  const cached = sessions.get(req);
  if (cached !== undefined) return cached ?? undefined;
  const s = await resolveSession(ctx, cookieValue(req));
  sessions.set(req, s ?? null);
  return s;
}

/** The session loaded for this request (undefined before loading or when signed out). */
export function webSessionOf(req: FastifyRequest): WebSession | undefined {
  return sessions.get(req) ?? undefined;
}

/** Replaces the request's session after login, checkpoint or logout, so the rest of the request sees it. */
export function setWebSession(req: FastifyRequest, s: WebSession | undefined): void {
  sessions.set(req, s ?? null);
}

/** The session of a guarded route; throws 401 if a route forgot its guard. */
export function currentSession(req: FastifyRequest): WebSession {
  const s = webSessionOf(req);
  if (s === undefined) throw new AppError('ERR_UNAUTHORIZED', 'you must be signed in', { status: 401 });
  return s;
}

/** Whether the client reads HTML (a browser) rather than JSON (an addon page's fetch). */
/** Whether the client is a browser page (text/html in Accept); other clients get the API envelope. */
export function wantsHtml(req: FastifyRequest): boolean {
  return (req.headers.accept ?? '').includes('text/html');
}

async function deny(req: FastifyRequest, reply: FastifyReply, err: AppError, redirectTo?: string): Promise<FastifyReply> {
  if (wantsHtml(req) && redirectTo !== undefined) return reply.redirect(redirectTo, 303);
  if (wantsHtml(req)) throw err;
  const { status, body } = apiErrors(err);
  return reply.code(status).type('application/json').send(body);
}

/** Signed in with the second factor passed; otherwise redirected to the login or checkpoint page. */
export function requireLogin(ctx: PanelContext): preHandlerAsyncHookHandler {
  return async function requireLoginGuard(req, reply) {
    const s = await loadWebSession(ctx, req);
    if (s === undefined) return deny(req, reply, new AppError('ERR_UNAUTHORIZED', 'you must be signed in', { status: 401 }), '/auth/login');
    if (!sessionComplete(s)) return deny(req, reply, new AppError('ERR_UNAUTHORIZED', 'the two-factor checkpoint is not passed', { status: 401 }), '/auth/login/checkpoint');
    return undefined;
  };
}

const adminGuards = new WeakMap<PanelContext, preHandlerAsyncHookHandler>();

/**
 * The admin gate (cached per context): signed out -> /auth/login; checkpoint pending ->
 * /auth/login/checkpoint; not a root admin -> 403; root admin without 2FA -> /account/two-factor
 * with the reason. JSON clients get the API error envelope (401/403) instead of redirects.
 */
export function requireAdmin(ctx: PanelContext): preHandlerAsyncHookHandler {
  let guard = adminGuards.get(ctx);
  if (guard === undefined) {
    const login = requireLogin(ctx);
    guard = async function requireAdminGuard(req, reply) {
      const sent = await login.call(this, req, reply);
      if (sent !== undefined || reply.sent) return sent;
      const { user } = currentSession(req);
      if (user.root_admin !== 1) return deny(req, reply, new AppError('ERR_FORBIDDEN', 'this page is for administrators only', { status: 403 }));
      if (user.use_totp !== 1) {
        return deny(req, reply, new AppError('ERR_2FA_REQUIRED', 'administrators must enable two-factor authentication', { status: 403 }), TWO_FACTOR_REQUIRED_PATH);
      }
      return undefined;
    };
    adminGuards.set(ctx, guard);
  }
  return guard;
}

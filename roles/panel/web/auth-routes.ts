/**
 * Signing in and out: `/auth/login` (username or email + password, throttled), the two-factor
 * checkpoint `/auth/login/checkpoint` (TOTP code or recovery code) before the session counts, and
 * `POST /auth/logout`. Writes `auth:success`, `auth:fail` and `auth:checkpoint` activity entries.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { hashPassword, verifyPassword } from '../auth/secrets.ts';
import { verifySecondFactor } from '../auth/two-factor.ts';
import type { PanelContext } from '../context.ts';
import type { UserRow } from '../store/records.ts';
import { setFlash } from './flash.ts';
import { formBody, formOf, inputField, postForm, type FormState } from './forms.ts';
import { html } from './html.ts';
import type { Notice } from './layout.ts';
import type { LoginThrottle } from './login-throttle.ts';
import { csrfToken, seeOther, sendPage } from './respond.ts';
import { createSession, destroySession, SESSION_COOKIE, sessionComplete, sessionCookieOptions } from './sessions.ts';
import { loadWebSession, setWebSession } from './web-auth.ts';

const BAD_CREDENTIALS = 'These credentials do not match our records.';

// Unknown usernames still cost one scrypt, so response time does not reveal which usernames exist.
let dummyHash: Promise<string> | undefined;

async function findLoginUser(ctx: PanelContext, login: string): Promise<UserRow | undefined> {
  if (login === '') return undefined;
  return login.includes('@') ? ctx.store.users.findBy({ email: login.toLowerCase() }) : ctx.store.users.findBy({ username: login });
}

function loginPage(req: FastifyRequest, reply: FastifyReply, form: FormState, status = 200, notices: Notice[] = []): FastifyReply {
  const body = html`<div class="narrow card"><h1>Sign in</h1>${postForm(
    '/auth/login',
    csrfToken(req, reply),
    html`${inputField(form, 'username', 'Username or email', { required: true, autocomplete: 'username' })}${inputField(form, 'password', 'Password', {
      type: 'password',
      required: true,
      blank: true,
      autocomplete: 'current-password',
    })}<div class="actions"><button type="submit">Sign in</button></div>`,
  )}</div>`;
  return sendPage(req, reply, { title: 'Sign in', body, status, notices });
}

function checkpointPage(req: FastifyRequest, reply: FastifyReply, status = 200, notices: Notice[] = []): FastifyReply {
  const body = html`<div class="narrow card"><h1>Two-factor authentication</h1><p>Enter the 6-digit code from your authenticator app, or one of your recovery codes.</p>${postForm(
    '/auth/login/checkpoint',
    csrfToken(req, reply),
    html`${inputField(formOf(), 'code', 'Code', { required: true, autocomplete: 'one-time-code' })}<div class="actions"><button type="submit">Continue</button></div>`,
  )}</div>`;
  return sendPage(req, reply, { title: 'Two-factor authentication', body, status, notices });
}

export function tooMany(reply: FastifyReply, seconds: number): Notice {
  reply.header('retry-after', String(seconds));
  return { kind: 'error', text: `Too many failed attempts. Try again in ${Math.ceil(seconds / 60)} minute(s).` };
}

/** Registers the sign-in routes on the web scope; runs once at app build. */
export function registerAuthRoutes(web: FastifyInstance, ctx: PanelContext, throttle: LoginThrottle): void {
  const startSession = async (req: FastifyRequest, reply: FastifyReply, user: UserRow, twoFactorOk: boolean): Promise<void> => {
    const { id, row } = await createSession(ctx, user, { twoFactorOk, ip: req.ip });
    reply.setCookie(SESSION_COOKIE, id, sessionCookieOptions(ctx));
    setWebSession(req, { row, user });
  };

  web.get('/', async (req, reply) => {
    const s = await loadWebSession(ctx, req);
    if (s === undefined) return seeOther(reply, '/auth/login');
    if (!sessionComplete(s)) return seeOther(reply, '/auth/login/checkpoint');
    return seeOther(reply, s.user.root_admin === 1 ? '/admin' : '/account');
  });

  web.get('/auth/login', async (req, reply) => {
    const s = await loadWebSession(ctx, req);
    if (s !== undefined) return seeOther(reply, sessionComplete(s) ? '/' : '/auth/login/checkpoint');
    return loginPage(req, reply, formOf());
  });

  web.post('/auth/login', async (req, reply) => {
    const values = formBody(req.body);
    const login = (values.username ?? '').trim();
    const form = formOf({ username: login });
    // A login that names a user counts against that user whichever identifier is typed (username
    // or email), so the 5 failures are per account and address; unknown logins count on their own.
    const user = await findLoginUser(ctx, login);
    // An unknown name is kept only as long as a username or email can be (191): the throttle
    // holds its keys for 15 minutes, and megabyte names would fill memory 10,000 at a time.
    const key = user === undefined ? `login|name:${login.toLowerCase().slice(0, 191)}|${req.ip}` : `login|user:${user.id}|${req.ip}`;
    const wait = throttle.take(key);
    if (wait > 0) return loginPage(req, reply, form, 429, [tooMany(reply, wait)]);

    dummyHash ??= hashPassword('hostkit-timing-equaliser');
    const ok = await verifyPassword(values.password ?? '', user?.password ?? (await dummyHash));
    if (user === undefined || !ok) {
      await ctx.activity.log({ event: 'auth:fail', actor: user === undefined ? undefined : { type: 'user', id: user.id }, properties: { username: login.slice(0, 191) }, ip: req.ip });
      return loginPage(req, reply, form, 401, [{ kind: 'error', text: BAD_CREDENTIALS }]);
    }
    throttle.reset(key);
    const old = await loadWebSession(ctx, req);
    if (old !== undefined) await destroySession(ctx, old.row);
    if (user.use_totp === 1) {
      await startSession(req, reply, user, false);
      await ctx.activity.log({ event: 'auth:checkpoint', actor: { type: 'user', id: user.id }, ip: req.ip });
      return seeOther(reply, '/auth/login/checkpoint');
    }
    await startSession(req, reply, user, true);
    await ctx.activity.log({ event: 'auth:success', actor: { type: 'user', id: user.id }, ip: req.ip });
    return seeOther(reply, '/');
  });

  web.get('/auth/login/checkpoint', async (req, reply) => {
    const s = await loadWebSession(ctx, req);
    if (s === undefined) return seeOther(reply, '/auth/login');
    if (sessionComplete(s)) return seeOther(reply, '/');
    return checkpointPage(req, reply);
  });

  web.post('/auth/login/checkpoint', async (req, reply) => {
    const s = await loadWebSession(ctx, req);
    if (s === undefined) {
      setFlash(reply, 'error', 'The sign-in expired; sign in again.');
      return seeOther(reply, '/auth/login');
    }
    if (sessionComplete(s)) return seeOther(reply, '/');
    const key = `checkpoint|${s.user.id}|${req.ip}`;
    const wait = throttle.take(key);
    if (wait > 0) return checkpointPage(req, reply, 429, [tooMany(reply, wait)]);
    if (!(await verifySecondFactor(ctx, s.user, formBody(req.body).code ?? ''))) {
      await ctx.activity.log({ event: 'auth:fail', actor: { type: 'user', id: s.user.id }, properties: { reason: 'two-factor' }, ip: req.ip });
      return checkpointPage(req, reply, 401, [{ kind: 'error', text: 'The two-factor code is not valid.' }]);
    }
    throttle.reset(key);
    await destroySession(ctx, s.row);
    await startSession(req, reply, s.user, true);
    await ctx.activity.log({ event: 'auth:success', actor: { type: 'user', id: s.user.id }, properties: { two_factor: true }, ip: req.ip });
    return seeOther(reply, '/');
  });

  web.post('/auth/logout', async (req, reply) => {
    const s = await loadWebSession(ctx, req);
    if (s !== undefined) await destroySession(ctx, s.row);
    setWebSession(req, undefined);
    reply.clearCookie(SESSION_COOKIE, sessionCookieOptions(ctx));
    setFlash(reply, 'info', 'You have been signed out.');
    return seeOther(reply, '/auth/login');
  });
}

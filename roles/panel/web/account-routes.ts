/**
 * The signed-in user's own account: `/account` and `/account/two-factor`, where TOTP is enrolled
 * (QR code and secret text, confirmed with a code; the ten recovery codes shown once) and turned
 * off again with the password (throttled like a sign-in). Root admins are sent here until they
 * enable it.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isAppError } from '../../../src/core/app-error.ts';
import { currentEnrolment, disableTwoFactor, enableTwoFactor } from '../auth/two-factor.ts';
import type { PanelContext } from '../context.ts';
import { endOtherSessions } from '../services/users.ts';
import { tooMany } from './auth-routes.ts';
import { setFlash } from './flash.ts';
import { formBody, formOf, inputField, postForm } from './forms.ts';
import { html } from './html.ts';
import type { Notice } from './layout.ts';
import type { LoginThrottle } from './login-throttle.ts';
import { csrfToken, seeOther, sendPage } from './respond.ts';
import { markTwoFactorPassed } from './sessions.ts';
import { currentSession, requireLogin } from './web-auth.ts';

/** Registers the account pages on the web scope; runs once at app build. */
export function registerAccountRoutes(web: FastifyInstance, ctx: PanelContext, throttle: LoginThrottle): void {
  const guard = { preHandler: requireLogin(ctx) };

  const twoFactorPage = async (req: FastifyRequest, reply: FastifyReply, status = 200, notices: Notice[] = []): Promise<FastifyReply> => {
    const user = (await ctx.store.users.find(currentSession(req).user.id)) ?? currentSession(req).user;
    const csrf = csrfToken(req, reply);
    const required = (req.query as Record<string, unknown>).required === 'admin' && user.use_totp !== 1;
    const all: Notice[] = [...(required ? [{ kind: 'error' as const, text: 'Administrators must enable two-factor authentication before using the admin pages.' }] : []), ...notices];
    if (user.use_totp === 1) {
      const body = html`<h1>Two-factor authentication</h1><div class="card"><p><span class="badge green">enabled</span> Your account asks for a code from your authenticator app at every sign-in.</p>
<h2>Disable</h2>${postForm(
        '/account/two-factor/disable',
        csrf,
        html`${inputField(formOf(), 'password', 'Current password', { type: 'password', required: true, blank: true, autocomplete: 'current-password' })}<div class="actions"><button type="submit" class="danger">Disable two-factor authentication</button></div>`,
      )}</div>`;
      return sendPage(req, reply, { title: 'Two-factor authentication', body, status, notices: all });
    }
    const e = await currentEnrolment(ctx, user);
    const body = html`<h1>Two-factor authentication</h1><div class="card">
<p>Scan this QR code with an authenticator app (or type the secret in), then enter the 6-digit code it shows.</p>
<p><img src="${e.qr}" alt="QR code of the two-factor secret" width="200" height="200"></p>
<p>Secret: <code class="secret" id="totp-secret">${e.secret}</code></p>
${postForm(
  '/account/two-factor/enable',
  csrf,
  html`${inputField(formOf(), 'code', 'Code from the app', { required: true, autocomplete: 'one-time-code' })}<div class="actions"><button type="submit">Enable two-factor authentication</button></div>`,
)}</div>`;
    return sendPage(req, reply, { title: 'Two-factor authentication', body, status, notices: all });
  };

  web.get('/account', guard, async (req, reply) => {
    const { user } = currentSession(req);
    const body = html`<h1>Account</h1><div class="card"><p><strong>${user.username}</strong> · ${user.email}</p>
<p>Two-factor authentication: ${user.use_totp === 1 ? html`<span class="badge green">enabled</span>` : html`<span class="badge red">disabled</span>`} · <a href="/account/two-factor">manage</a></p>
${user.root_admin === 1 ? html`<p><a href="/admin">Go to the admin area</a></p>` : ''}</div>`;
    return sendPage(req, reply, { title: 'Account', body });
  });

  web.get('/account/two-factor', guard, async (req, reply) => twoFactorPage(req, reply));

  web.post('/account/two-factor/enable', guard, async (req, reply) => {
    const s = currentSession(req);
    const user = (await ctx.store.users.find(s.user.id)) ?? s.user;
    let codes: string[];
    try {
      codes = await enableTwoFactor(ctx, user, (formBody(req.body).code ?? '').trim());
    } catch (err) {
      if (!isAppError(err) || err.status >= 500) throw err;
      return twoFactorPage(req, reply, 422, [{ kind: 'error', text: err.message }]);
    }
    await markTwoFactorPassed(ctx, s.row);
    // Sessions started before enrolment count as complete (no second factor was asked) and would
    // stay signed in without one: only the enrolling session, which just proved a code, stays.
    await endOtherSessions(ctx, user.id, s.row.id);
    await ctx.activity.log({ event: 'user:two-factor.create', actor: { type: 'user', id: user.id }, ip: req.ip });
    const body = html`<h1>Two-factor authentication enabled</h1><div class="card">
<div class="notice info" role="status">Store these recovery codes somewhere safe now: each one signs you in once without your app, and they are not shown again.</div>
<ul class="codes" id="recovery-codes">${codes.map((c) => html`<li>${c}</li>`)}</ul>
<p><a class="button" href="/">Continue</a></p></div>`;
    return sendPage(req, reply, { title: 'Two-factor authentication enabled', body });
  });

  web.post('/account/two-factor/disable', guard, async (req, reply) => {
    const s = currentSession(req);
    const user = (await ctx.store.users.find(s.user.id)) ?? s.user;
    // The password check counts like a sign-in: a stolen session cookie must not become a way to
    // guess the password and switch two-factor off.
    const key = `password|user:${user.id}|${req.ip}`;
    const wait = throttle.take(key);
    if (wait > 0) return twoFactorPage(req, reply, 429, [tooMany(reply, wait)]);
    try {
      await disableTwoFactor(ctx, user, formBody(req.body).password ?? '');
    } catch (err) {
      if (!isAppError(err) || err.status >= 500) throw err;
      return twoFactorPage(req, reply, 422, [{ kind: 'error', text: err.message }]);
    }
    throttle.reset(key);
    await ctx.activity.log({ event: 'user:two-factor.delete', actor: { type: 'user', id: user.id }, ip: req.ip });
    setFlash(reply, 'success', 'Two-factor authentication is disabled.');
    return seeOther(reply, '/account/two-factor');
  });
}

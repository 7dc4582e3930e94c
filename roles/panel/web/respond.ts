/**
 * Answering web requests: a page in the layout with the signed-in user, a fresh CSRF token and
 * the pending flash notice; the CSRF binding to the session; route ids; pagination links; and
 * the admin activity entries. Core pages and addons use these so every page behaves the same.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError, isAppError } from '../../../src/core/app-error.ts';
import type { PanelContext } from '../context.ts';
import { MAX_PAGE, type Page } from '../store/repository.ts';
import { setFlash, takeFlash } from './flash.ts';
import { html, type SafeHtml } from './html.ts';
import { layout, type Notice } from './layout.ts';
import { sessionComplete } from './sessions.ts';
import { webSessionOf } from './web-auth.ts';

/**
 * What a CSRF token is bound to: the session id's hash, so a token from another session (or a
 * tossed cookie) does not verify; 'anonymous' before login. Called synchronously by the CSRF plugin.
 */
export function csrfUserInfo(req: FastifyRequest): string {
  return webSessionOf(req)?.row.id_hash ?? 'anonymous';
}

// Without a readable secret cookie (lost, or another panel's on the same host) the plugin makes a
// new secret at every call and the browser keeps only the last one, so the forms of a page that
// asked twice (its own form, the layout's sign-out) held a token that could never verify.
const pageTokens = new WeakMap<FastifyRequest, { userInfo: string; token: string }>();

/** A CSRF token for the forms of the page being rendered (sets the secret cookie on first use); one per request and session. */
export function csrfToken(req: FastifyRequest, reply: FastifyReply): string {
  const userInfo = csrfUserInfo(req);
  const issued = pageTokens.get(req);
  if (issued?.userInfo === userInfo) return issued.token;
  const token = reply.generateCsrf({ userInfo });
  pageTokens.set(req, { userInfo, token });
  return token;
}

export interface PageOptions {
  title: string;
  body: SafeHtml;
  status?: number;
  notices?: readonly Notice[];
}

/** Sends a page in the layout; runs at the end of every page handler. */
export function sendPage(req: FastifyRequest, reply: FastifyReply, o: PageOptions): FastifyReply {
  const s = webSessionOf(req);
  const complete = s !== undefined && sessionComplete(s);
  const page = layout({
    title: o.title,
    body: o.body,
    path: req.url.split('?')[0] ?? '',
    user: complete ? s.user : undefined,
    csrf: complete ? csrfToken(req, reply) : undefined,
    notices: [...takeFlash(req, reply), ...(o.notices ?? [])],
  });
  return reply.code(o.status ?? 200).type('text/html; charset=utf-8').send(page);
}

/** A positive integer route parameter, or 404 naming the record. */
export function idParam(req: FastifyRequest, what: string, key = 'id'): number {
  const v = (req.params as Record<string, string | undefined>)[key] ?? '';
  if (!/^[1-9]\d{0,15}$/.test(v)) throw new AppError('ERR_NOT_FOUND', `the requested ${what} was not found`, { status: 404 });
  return Number(v);
}

/** ?page=N (1 when missing or malformed, clamped to MAX_PAGE so the store's offset stays an integer). */
export function pageParam(req: FastifyRequest): number {
  const p = Number((req.query as Record<string, string | undefined>).page ?? '1');
  return Number.isInteger(p) && p >= 1 ? Math.min(p, MAX_PAGE) : 1;
}

/** ?q= search text, trimmed. */
export function searchParam(req: FastifyRequest): string {
  const q = (req.query as Record<string, unknown>).q;
  return typeof q === 'string' ? q.trim().slice(0, 100) : '';
}

/** A table's rows, or when there are none one row across its `columns` that says so. */
export function rowsOrNone(rows: SafeHtml[], columns: number, none: string): SafeHtml | SafeHtml[] {
  return rows.length > 0 ? rows : html`<tr><td colspan="${columns}" class="none">${none}</td></tr>`;
}

/** Previous/next links under a list. */
export function pager(page: Page<unknown>, base: string, extra: Record<string, string> = {}): SafeHtml {
  const pages = Math.max(1, Math.ceil(page.total / page.perPage));
  if (pages <= 1) return html``;
  const link = (n: number): string => `${base}?${new URLSearchParams({ ...extra, page: String(n) }).toString()}`;
  return html`<div class="pager">${page.page > 1 ? html`<a href="${link(page.page - 1)}">&larr; Previous</a>` : ''}<span>Page ${page.page} of ${pages}</span>${
    page.page < pages ? html`<a href="${link(page.page + 1)}">Next &rarr;</a>` : ''
  }</div>`;
}

/**
 * Writes an `admin:*` activity entry for a change made in the admin pages or through the
 * application API (the same event names and properties for the same action); the actor is the
 * signed-in admin or the API key's user (`req.apiUser`, set by http/api-auth.ts).
 */
export async function adminAudit(ctx: PanelContext, req: FastifyRequest, event: string, subject?: { type: string; id: number }, properties: Record<string, unknown> = {}): Promise<void> {
  const user = webSessionOf(req)?.user ?? req.apiUser;
  await ctx.activity.log({ event, actor: user === undefined ? undefined : { type: 'user', id: user.id }, subject, properties, ip: req.ip });
}

/** Redirect after a successful POST (303: the browser follows with GET). */
export function seeOther(reply: FastifyReply, url: string): FastifyReply {
  return reply.redirect(url, 303);
}

/**
 * After a refused one-button action (delete, revoke): a client error (409 still in use, 404)
 * becomes a flash notice on the page the admin came from; anything else is rethrown.
 */
export function refused(reply: FastifyReply, err: unknown, back: string): FastifyReply {
  if (!isAppError(err) || err.status >= 500) throw err;
  setFlash(reply, 'error', err.message);
  return seeOther(reply, back);
}

/**
 * Web sessions: a random 32-byte id in an HttpOnly, SameSite=Lax cookie (Secure when base_url is
 * https); the table keeps only its SHA-256, so a leaked database cannot be replayed as cookies.
 * A session lasts at most 12 hours and ends after 2 hours without a request; a session waiting
 * at the two-factor checkpoint lasts 5 minutes. Every login and every passed checkpoint issues a
 * new id (no session fixation). Times are Unix milliseconds.
 */
import type { CookieSerializeOptions } from '@fastify/cookie';
import type { PanelContext } from '../context.ts';
import { randomHex, sha256 } from '../auth/secrets.ts';
import type { SessionRow, UserRow } from '../store/records.ts';

export const SESSION_COOKIE = 'hostkit_session';
export const SESSION_LIFETIME_MS = 12 * 3600_000;
export const SESSION_IDLE_MS = 2 * 3600_000;
export const CHECKPOINT_LIFETIME_MS = 5 * 60_000;
/** last_seen_at is written at most this often, so page views do not all write to the database. */
const TOUCH_EVERY_MS = 60_000;

export interface WebSession {
  row: SessionRow;
  user: UserRow;
}

/** The session cookie's attributes for this panel (Secure follows the base URL's scheme). */
export function sessionCookieOptions(ctx: PanelContext): CookieSerializeOptions {
  return { path: '/', httpOnly: true, sameSite: 'lax', secure: ctx.config.base_url.startsWith('https:') };
}

function alive(row: SessionRow, now: number): boolean {
  return row.expires_at > now && now - row.last_seen_at < SESSION_IDLE_MS;
}

/**
 * Starts a session after a correct password: complete when the user has no second factor,
 * otherwise waiting at the checkpoint. Removes the user's dead sessions on the way (the table
 * is pruned per user at login rather than by a timer). Returns the cookie value.
 */
export async function createSession(ctx: PanelContext, user: UserRow, opts: { twoFactorOk: boolean; ip: string }, now = Date.now()): Promise<{ id: string; row: SessionRow }> {
  for (const old of await ctx.store.sessions.all({ user_id: user.id })) if (!alive(old, now)) await ctx.store.sessions.remove(old.id);
  const id = randomHex(32);
  const row = await ctx.store.sessions.insert({
    id_hash: sha256(id),
    user_id: user.id,
    two_factor_ok: opts.twoFactorOk ? 1 : 0,
    ip: opts.ip,
    created_at: now,
    last_seen_at: now,
    expires_at: now + (opts.twoFactorOk ? SESSION_LIFETIME_MS : CHECKPOINT_LIFETIME_MS),
  });
  return { id, row };
}

/** The live session of a cookie value, or undefined; a dead one is deleted. Runs once per web request. */
export async function resolveSession(ctx: PanelContext, id: string | undefined, now = Date.now()): Promise<WebSession | undefined> {
  if (id === undefined || !/^[0-9a-f]{64}$/.test(id)) return undefined;
  const row = await ctx.store.sessions.findBy({ id_hash: sha256(id) });
  if (row === undefined) return undefined;
  if (!alive(row, now)) {
    await ctx.store.sessions.remove(row.id);
    return undefined;
  }
  const user = await ctx.store.users.find(row.user_id);
  if (user === undefined) return undefined;
  if (now - row.last_seen_at >= TOUCH_EVERY_MS) return { row: (await ctx.store.sessions.update(row.id, { last_seen_at: now })) ?? row, user };
  return { row, user };
}

/** True when the session may act as its user: the second factor is passed or the user has none. */
export function sessionComplete(s: WebSession): boolean {
  return s.row.two_factor_ok === 1 || s.user.use_totp !== 1;
}

/** Ends a session (logout, or the pending session replaced after the checkpoint). */
export async function destroySession(ctx: PanelContext, row: SessionRow): Promise<void> {
  await ctx.store.sessions.remove(row.id);
}

/** Marks the session as having passed a second factor (enabling 2FA proves one too). */
export async function markTwoFactorPassed(ctx: PanelContext, row: SessionRow): Promise<void> {
  await ctx.store.sessions.update(row.id, { two_factor_ok: 1 });
}

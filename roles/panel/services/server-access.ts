/**
 * Who may do what on a server through the client API: the owner and root admins hold every
 * permission, a subuser holds its listed ones, anyone else gets 404 (not 403), so the existence of
 * another user's server is not revealed. A suspended server answers 409 to everything but its
 * view (requireActiveServer). Subuser management lives here too: a subuser can only hand out
 * permissions it holds itself.
 */
import { AppError } from '../../../src/core/app-error.ts';
import type { PanelContext } from '../context.ts';
import type { ServerRow, SubuserRow, UserRow } from '../store/records.ts';
import { created, found, notFound, now } from './records.ts';
import { createValidator, EMAIL, validationError } from './validation.ts';

export interface ServerAccess {
  server: ServerRow;
  isOwner: boolean;
  /** '*' for the owner and root admins. */
  permissions: ReadonlySet<string>;
}

const ALL: ReadonlySet<string> = new Set(['*']);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Finds a server by UUID or 8-character identifier. */
export async function serverByRef(ctx: PanelContext, ref: string): Promise<ServerRow | undefined> {
  if (UUID.test(ref)) return ctx.store.servers.findBy({ uuid: ref });
  if (/^[0-9a-f]{8}$/.test(ref)) return ctx.store.servers.findBy({ identifier: ref });
  return undefined;
}

/** The user's access to a server, or ERR_NOT_FOUND when they have none. */
export async function accessServer(ctx: PanelContext, user: UserRow, ref: string): Promise<ServerAccess> {
  const server = await serverByRef(ctx, ref);
  if (server === undefined) throw notFound('server');
  if (server.owner_id === user.id) return { server, isOwner: true, permissions: ALL };
  if (user.root_admin === 1) return { server, isOwner: false, permissions: ALL };
  const sub = await ctx.store.subusers.findBy({ server_id: server.id, user_id: user.id });
  if (sub === undefined) throw notFound('server');
  return { server, isOwner: false, permissions: new Set(JSON.parse(sub.permissions) as string[]) };
}

/** Pterodactyl's words for a suspended server (its ServerStateConflictException). */
export const SUSPENDED_DETAIL = 'This server is currently suspended and the functionality requested is unavailable.';

/**
 * Throws 409 ServerStateConflictException when the server is suspended. Every client API route of
 * a server calls it except the server view, for owners, subusers and root admins alike (as
 * Pterodactyl's AuthenticateServerAccess does), so nothing changes while a server is suspended.
 */
export function requireActiveServer(server: ServerRow): void {
  if (server.suspended === 1) throw new AppError('ServerStateConflictException', SUSPENDED_DETAIL, { status: 409 });
}

/** Throws 403 unless the access holds every named permission. */
export function requirePermission(access: ServerAccess, ...permissions: string[]): void {
  if (access.permissions.has('*')) return;
  const missing = permissions.filter((p) => !access.permissions.has(p));
  if (missing.length > 0) throw new AppError('ERR_FORBIDDEN', `this action needs the ${missing.join(', ')} permission`, { status: 403 });
}

/** True when the access holds the permission (for listing what a page or reply may show). */
export function hasPermission(access: ServerAccess, permission: string): boolean {
  return access.permissions.has('*') || access.permissions.has(permission);
}

/** Every server the user owns or is a subuser of (root admins: only their own, as Pterodactyl's default). */
export async function accessibleServers(ctx: PanelContext, user: UserRow): Promise<ServerRow[]> {
  const owned = await ctx.store.servers.all({ owner_id: user.id });
  const subs = await ctx.store.subusers.all({ user_id: user.id });
  const shared = await Promise.all(subs.map((s) => ctx.store.servers.find(s.server_id)));
  return [...owned, ...shared.filter((s): s is ServerRow => s !== undefined)];
}

const validateSubuser = createValidator<{ email: string; permissions: string[] }>({
  required: ['email', 'permissions'],
  properties: { email: EMAIL, permissions: { type: 'array', maxItems: 200, items: { type: 'string', maxLength: 100 } } },
});
const validatePermissions = createValidator<{ permissions: string[] }>({
  required: ['permissions'],
  properties: { permissions: { type: 'array', maxItems: 200, items: { type: 'string', maxLength: 100 } } },
});

/**
 * The stored form of a permission list: unknown names are a 422, and names the granting `actor`
 * does not hold itself are a 403 naming them (a subuser cannot hand out more than it has; the
 * owner and root admins hold everything), as in Pterodactyl's SubuserRequest.
 */
function checkPermissions(ctx: PanelContext, actor: ServerAccess, permissions: string[]): string {
  const unknown = permissions.filter((p) => !ctx.permissions.has(p));
  if (unknown.length > 0) throw validationError([{ field: 'permissions', rule: 'in', detail: `unknown permissions: ${unknown.join(', ')}` }]);
  const unique = [...new Set(permissions)].sort();
  const notHeld = unique.filter((p) => !hasPermission(actor, p));
  if (notHeld.length > 0) {
    throw new AppError('ERR_FORBIDDEN', `cannot assign permissions to a subuser that your account does not actively possess: ${notHeld.join(', ')}`, { status: 403 });
  }
  return JSON.stringify(unique);
}

/**
 * Adds an existing user (by email) as a subuser on the actor's server; the owner cannot be their
 * own subuser, and the actor can only grant permissions it holds.
 */
export async function addSubuser(ctx: PanelContext, actor: ServerAccess, input: unknown): Promise<SubuserRow> {
  const server = actor.server;
  const v = validateSubuser(input);
  const user = await ctx.store.users.findBy({ email: v.email.toLowerCase() });
  if (user === undefined) throw validationError([{ field: 'email', rule: 'exists', detail: 'no user has this email address' }]);
  if (user.id === server.owner_id) throw validationError([{ field: 'email', rule: 'not_owner', detail: 'the server owner cannot be added as a subuser' }]);
  if ((await ctx.store.subusers.findBy({ server_id: server.id, user_id: user.id })) !== undefined) throw validationError([{ field: 'email', rule: 'unique', detail: 'this user is already a subuser of the server' }]);
  return ctx.store.subusers.insert({ user_id: user.id, server_id: server.id, permissions: checkPermissions(ctx, actor, v.permissions), ...created() });
}

/** The subuser row of a user (by UUID) on a server, or ERR_NOT_FOUND. */
export async function subuserOf(ctx: PanelContext, server: ServerRow, userUuid: string): Promise<{ sub: SubuserRow; user: UserRow }> {
  const user = found(await ctx.store.users.findBy({ uuid: userUuid }), 'subuser');
  const sub = found(await ctx.store.subusers.findBy({ server_id: server.id, user_id: user.id }), 'subuser');
  return { sub, user };
}

/** Replaces a subuser's permissions; the actor can only grant permissions it holds. */
export async function updateSubuser(ctx: PanelContext, actor: ServerAccess, sub: SubuserRow, input: unknown): Promise<SubuserRow> {
  const v = validatePermissions(input);
  return found(await ctx.store.subusers.update(sub.id, { permissions: checkPermissions(ctx, actor, v.permissions), updated_at: now() }), 'subuser');
}

export function subuserAttributes(sub: SubuserRow, user: UserRow): Record<string, unknown> {
  return { uuid: user.uuid, username: user.username, email: user.email, '2fa_enabled': user.use_totp === 1, created_at: sub.created_at, permissions: JSON.parse(sub.permissions) as unknown };
}

/** Application API attributes of a subuser row (Pterodactyl's application SubuserTransformer), for a server's `subusers` include. */
export function applicationSubuserAttributes(sub: SubuserRow): Record<string, unknown> {
  return { id: sub.id, user_id: sub.user_id, server_id: sub.server_id, permissions: JSON.parse(sub.permissions) as unknown, created_at: sub.created_at, updated_at: sub.updated_at };
}

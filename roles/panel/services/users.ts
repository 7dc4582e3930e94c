/**
 * Users: create, update and delete with validation and scrypt hashing, and their API attributes.
 * A user who still owns servers cannot be deleted (like Pterodactyl), so no server is orphaned,
 * and an admin can neither delete their own account nor drop their own admin flag (the admin
 * pages and the application API share the rule through `actorId`).
 */
import { randomUUID } from 'node:crypto';
import { AppError } from '../../../src/core/app-error.ts';
import { hashPassword } from '../auth/secrets.ts';
import type { PanelContext } from '../context.ts';
import type { UserRow } from '../store/records.ts';
import { created, found, now, takenProblems, toColumns } from './records.ts';
import { createValidator, EMAIL, EXTERNAL_ID, FLAG, USERNAME, validationError } from './validation.ts';

const PASSWORD = { type: 'string', minLength: 8, maxLength: 256 };
const NAME_PART = { type: 'string', maxLength: 191 };

export interface UserInput {
  username: string;
  email: string;
  first_name?: string;
  last_name?: string;
  password: string;
  root_admin?: boolean;
  external_id?: string | null;
}

const validateCreate = createValidator<UserInput>({
  required: ['username', 'email', 'password'],
  properties: { username: USERNAME, email: EMAIL, first_name: NAME_PART, last_name: NAME_PART, password: PASSWORD, root_admin: FLAG, external_id: EXTERNAL_ID },
});
const validateUpdate = createValidator<Partial<UserInput>>({
  properties: { username: USERNAME, email: EMAIL, first_name: NAME_PART, last_name: NAME_PART, password: PASSWORD, root_admin: FLAG, external_id: EXTERNAL_ID },
});

/**
 * Throws one ERR_VALIDATION naming each of the username, the email and the external_id that
 * another user (not `selfId`) has.
 */
async function refuseTaken(ctx: PanelContext, v: Partial<UserInput>, selfId?: number): Promise<void> {
  const taken = [
    ...(await takenProblems(ctx.store.users, 'username', v.username, selfId)),
    ...(await takenProblems(ctx.store.users, 'email', v.email?.toLowerCase(), selfId)),
    ...(await takenProblems(ctx.store.users, 'external_id', v.external_id, selfId)),
  ];
  if (taken.length > 0) throw validationError(taken);
}

/** Creates a user; throws ERR_VALIDATION for bad input or a taken username/email. */
export async function createUser(ctx: PanelContext, input: unknown): Promise<UserRow> {
  const v = validateCreate(input);
  await refuseTaken(ctx, v);
  return ctx.store.users.insert({
    ...toColumns({ ...v, password: undefined }),
    uuid: randomUUID(),
    email: v.email.toLowerCase(),
    password: await hashPassword(v.password),
    root_admin: v.root_admin === true ? 1 : 0,
    ...created(),
  } as Partial<UserRow>);
}

/**
 * Mails a new user their account details (never the password); runs after an admin or the API
 * created the account. A send failure is logged: the account exists either way.
 */
export async function sendWelcomeMail(ctx: PanelContext, user: UserRow): Promise<void> {
  try {
    await ctx.mailer.send({
      to: user.email,
      subject: 'Your hosting panel account',
      text: `Hello ${user.username},\n\nan account was created for you on ${ctx.config.base_url}.\nUsername: ${user.username}\nEmail: ${user.email}\n\nSign in at ${ctx.config.base_url}/auth/login with the password your administrator gave you.\n`,
    });
    ctx.logger.info({ user: user.username }, 'welcome mail sent to %s', user.email);
  } catch (err) {
    ctx.logger.warn({ err, user: user.username }, 'could not send the welcome mail to %s', user.email);
  }
}

/** Who makes a change: the signed-in admin or the application key's user (none for the CLI). */
export interface UserChangeActor {
  actorId?: number | undefined;
  /** The acting web session (by row id), kept when a password change ends the user's other sessions. */
  keepSessionId?: number | undefined;
}

/**
 * Updates the given fields (a new password is hashed). An actor cannot remove their own
 * root_admin flag: 422 on `root_admin`, so the panel never locks out the admin using it.
 * A new password ends every web session of the user but `by.keepSessionId` (a suspected leak is
 * the usual reason for the change), whoever changes it: admin page, application API or CLI.
 */
export async function updateUser(ctx: PanelContext, id: number, input: unknown, by: UserChangeActor = {}): Promise<UserRow> {
  const v = validateUpdate(input);
  found(await ctx.store.users.find(id), 'user');
  await refuseTaken(ctx, v, id);
  if (by.actorId === id && v.root_admin === false) throw validationError([{ field: 'root_admin', rule: 'self', detail: 'you cannot remove your own administrator rights' }]);
  const values: Partial<UserRow> = { ...toColumns({ ...v, password: undefined }), updated_at: now() } as Partial<UserRow>;
  if (v.email !== undefined) values.email = v.email.toLowerCase();
  if (v.password !== undefined) values.password = await hashPassword(v.password);
  const updated = found(await ctx.store.users.update(id, values), 'user');
  if (v.password !== undefined) await endOtherSessions(ctx, id, by.keepSessionId);
  return updated;
}

/**
 * Ends every web session of the user but `keepSessionId` (the one acting): after a password
 * change, and when the user turns two-factor on (their other sessions never passed a second factor).
 */
export async function endOtherSessions(ctx: PanelContext, userId: number, keepSessionId?: number): Promise<void> {
  for (const s of await ctx.store.sessions.all({ user_id: userId })) if (s.id !== keepSessionId) await ctx.store.sessions.remove(s.id);
}

/**
 * The activity properties of a user update (`admin:user.update`, from the admin pages and the
 * API alike): the changed field names and whether the password changed, never the password.
 */
export function userUpdateProperties(input: unknown): { fields: string[]; password_changed: boolean } {
  const v = validateUpdate(input);
  const fields = Object.keys(v).filter((k) => v[k as keyof UserInput] !== undefined);
  return { fields: fields.filter((k) => k !== 'password'), password_changed: fields.includes('password') };
}

/**
 * Deletes a user who owns no servers; their keys, sessions and subuser rows go with them. The
 * actor cannot delete their own account (409).
 */
export async function deleteUser(ctx: PanelContext, id: number, by: UserChangeActor = {}): Promise<void> {
  found(await ctx.store.users.find(id), 'user');
  if (by.actorId === id) throw new AppError('ERR_DELETE_SELF', 'You cannot delete your own account.', { status: 409 });
  if ((await ctx.store.servers.findBy({ owner_id: id })) !== undefined) {
    throw new AppError('ERR_USER_HAS_SERVERS', 'cannot delete a user that still owns servers: delete or transfer them first', { status: 409 });
  }
  await ctx.store.users.remove(id);
}

/** Pterodactyl-style attributes; never the password hash or TOTP secret. */
export function userAttributes(u: UserRow): Record<string, unknown> {
  return {
    id: u.id,
    external_id: u.external_id,
    uuid: u.uuid,
    username: u.username,
    email: u.email,
    first_name: u.first_name,
    last_name: u.last_name,
    root_admin: u.root_admin === 1,
    '2fa': u.use_totp === 1,
    created_at: u.created_at,
    updated_at: u.updated_at,
  };
}

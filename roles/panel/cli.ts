/**
 * The panel's management commands (`hostkit panel user|node|key create`, `user list|password|disable-2fa`,
 * `mail test`): they open
 * the same store as the running panel (SQLite allows the second writer to wait its turn), print
 * for people or JSON with --json, and show a secret (password, pairing token, API key) once.
 */
import { join } from 'node:path';
import { AppError } from '../../src/core/app-error.ts';
import { printLine as print, table } from '../../src/lib/cli-format.ts';
import { busyMessage, isDatabaseBusy } from '../../src/lib/sqlite.ts';
import { randomAlnum } from './auth/secrets.ts';
import { clearTwoFactor } from './auth/two-factor.ts';
import { openPanel } from './panel.ts';
import { apiKeyAttributes, createApiKey, type KeyType } from './services/api-keys.ts';
import { createNode, nodeAttributes } from './services/infrastructure.ts';
import { createUser, updateUser, userAttributes } from './services/users.ts';
import type { PanelContext } from './context.ts';
import type { UserRow } from './store/records.ts';
import { DATABASE_FILE } from './store/store.ts';

/**
 * Runs `fn` with an open panel and closes it whatever happens; returns what `fn` returns. A write
 * that met another process's lock past the busy timeout fails saying so, naming the database file.
 */
export async function withPanel<T>(configPath: string, fn: (ctx: PanelContext) => Promise<T>): Promise<T> {
  const panel = await openPanel(configPath, { quiet: true });
  try {
    return await fn(panel.ctx);
  } catch (err) {
    if (!isDatabaseBusy(err)) throw err;
    throw new AppError('ERR_DATABASE_BUSY', busyMessage(join(panel.ctx.config.data_dir, DATABASE_FILE)), { cause: err });
  } finally {
    await panel.close();
  }
}

export interface UserCreateOptions {
  config: string;
  username: string;
  email: string;
  password?: string;
  admin?: boolean;
  firstName?: string;
  lastName?: string;
  json?: boolean;
}

/** `user create`: without --password a random one is generated and printed once. */
export async function userCreateCommand(o: UserCreateOptions): Promise<void> {
  const password = o.password ?? randomAlnum(20);
  const user = await withPanel(o.config, async (ctx) => {
    const u = await createUser(ctx, { username: o.username, email: o.email, password, root_admin: o.admin === true, first_name: o.firstName ?? '', last_name: o.lastName ?? '' });
    await ctx.activity.log({ event: 'admin:user.create', subject: { type: 'user', id: u.id }, properties: { via: 'cli' } });
    return u;
  });
  if (o.json === true) return print(JSON.stringify({ object: 'user', attributes: userAttributes(user), ...(o.password === undefined ? { meta: { password } } : {}) }, null, 2));
  print(`created ${user.root_admin === 1 ? 'administrator' : 'user'} ${user.username} <${user.email}> (id ${user.id})`);
  if (o.password === undefined) print(`password: ${password}\n(shown once: note it now)`);
}

/** `user list`: every user, administrators marked, for finding the one to act on. */
export async function userListCommand(o: { config: string; json?: boolean }): Promise<void> {
  const users = await withPanel(o.config, async (ctx) => ctx.store.users.all());
  if (o.json === true) return print(JSON.stringify({ object: 'list', data: users.map((u) => ({ object: 'user', attributes: userAttributes(u) })) }, null, 2));
  if (users.length === 0) return print('no users yet: create the first administrator with hostkit panel user create --admin');
  print(table([['ID', 'USERNAME', 'EMAIL', 'ADMIN', '2FA'], ...users.map((u) => [String(u.id), u.username, u.email, u.root_admin === 1 ? 'yes' : 'no', u.use_totp === 1 ? 'on' : 'off'])]));
}

/**
 * `user password`: sets a user's password (a random one printed once without --password) and
 * ends their web sessions, as every password change does; recorded in the activity log.
 */
export async function userPasswordCommand(o: { config: string; user: string; password?: string }): Promise<void> {
  const password = o.password ?? randomAlnum(20);
  const user = await withPanel(o.config, async (ctx) => {
    const u = await updateUser(ctx, (await findUser(ctx, o.user)).id, { password });
    await ctx.activity.log({ event: 'admin:user.update', subject: { type: 'user', id: u.id }, properties: { fields: [], password_changed: true, via: 'cli' } });
    return u;
  });
  print(`password of ${user.username} changed; their web sessions are ended`);
  if (o.password === undefined) print(`password: ${password}\n(shown once: note it now)`);
}

/** `user disable-2fa`: for a user locked out without their authenticator and recovery codes. */
export async function userDisableTwoFactorCommand(o: { config: string; user: string }): Promise<void> {
  const user = await withPanel(o.config, async (ctx) => {
    const u = await findUser(ctx, o.user);
    if (u.use_totp !== 1) return { ...u, changed: false };
    await clearTwoFactor(ctx, u.id);
    await ctx.activity.log({ event: 'admin:user.two-factor.delete', subject: { type: 'user', id: u.id }, properties: { via: 'cli' } });
    return { ...u, changed: true };
  });
  print(user.changed ? `two-factor authentication of ${user.username} is off; they sign in with their password alone until they set it up again` : `two-factor authentication of ${user.username} was already off`);
}

export interface NodeCreateOptions {
  config: string;
  name: string;
  fqdn: string;
  location?: string;
  scheme?: string;
  port?: string;
  json?: boolean;
}

/** `node create`: prints the node and its pairing token, which is not shown again. */
export async function nodeCreateCommand(o: NodeCreateOptions): Promise<void> {
  const { node, token } = await withPanel(o.config, async (ctx) => {
    const created = await createNode(ctx, {
      name: o.name,
      fqdn: o.fqdn,
      ...(o.location !== undefined ? { location_id: intOption('--location', o.location) } : {}),
      ...(o.scheme !== undefined ? { scheme: o.scheme } : {}),
      ...(o.port !== undefined ? { daemon_listen: portOption(o.port) } : {}),
    });
    await ctx.activity.log({ event: 'admin:node.create', subject: { type: 'node', id: created.node.id }, properties: { via: 'cli' } });
    return created;
  });
  if (o.json === true) return print(JSON.stringify({ object: 'node', attributes: nodeAttributes(node), meta: { pairing_token: token } }, null, 2));
  print(`created node ${node.name} (id ${node.id}, ${node.scheme}://${node.fqdn}:${node.daemon_listen})`);
  print(`pairing token: ${token}\n(shown once: write it to the node's token file, mode 0600)`);
}

function intOption(flag: string, value: string): number {
  if (!/^\d+$/.test(value)) throw new AppError('ERR_USAGE', `${flag} must be a whole number (got ${JSON.stringify(value)})`);
  return Number(value);
}

function portOption(value: string): number {
  const port = intOption('--port', value);
  if (port < 1 || port > 65535) throw new AppError('ERR_USAGE', `--port must be between 1 and 65535 (got ${value})`);
  return port;
}

/** A user by id, username or email. */
async function findUser(ctx: PanelContext, ref: string): Promise<UserRow> {
  const user = /^\d+$/.test(ref)
    ? await ctx.store.users.find(Number(ref))
    : ((await ctx.store.users.findBy({ username: ref })) ?? (await ctx.store.users.findBy({ email: ref.toLowerCase() })));
  if (user === undefined) throw new AppError('ERR_NOT_FOUND', `no user ${JSON.stringify(ref)} (give an id, username or email)`);
  return user;
}

export interface KeyCreateOptions {
  config: string;
  user: string;
  type: string;
  memo?: string;
  json?: boolean;
}

/** `key create`: prints the full key once. */
export async function keyCreateCommand(o: KeyCreateOptions): Promise<void> {
  if (o.type !== 'client' && o.type !== 'application') throw new AppError('ERR_USAGE', `--type must be client or application (got ${JSON.stringify(o.type)})`);
  const type: KeyType = o.type;
  const { key, token } = await withPanel(o.config, async (ctx) => createApiKey(ctx, (await findUser(ctx, o.user)).id, type, o.memo !== undefined ? { memo: o.memo } : {}));
  if (o.json === true) return print(JSON.stringify({ object: 'api_key', attributes: apiKeyAttributes(key), meta: { secret_token: token } }, null, 2));
  print(`created ${type} API key ${key.identifier}`);
  print(`key: ${token}\n(shown once: use it as "Authorization: Bearer <key>")`);
}

/** `mail test`: sends one mail through the configured SMTP server; exit 1 with its answer on failure. */
export async function mailTestCommand(o: { config: string; to: string }): Promise<void> {
  await withPanel(o.config, async (ctx) => {
    await ctx.mailer.send({ to: o.to, subject: 'hostkit panel mail test', text: `This is a test mail from the panel at ${ctx.config.base_url}.\n` });
  });
  print(`mail sent to ${o.to}`);
}

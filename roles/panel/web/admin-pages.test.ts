/**
 * Admin pages through inject with a signed-in root admin (2FA enabled directly in the store):
 * servers, allocations, API keys, conflicts shown as notices, sessions' idle expiry, addon
 * extensions and navigation.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import Fastify, { type FastifyInstance, type LightMyRequestResponse } from 'fastify';
import { createPanelApp } from '../http/app.ts';
import { createAllocations, createLocation, createNode } from '../services/infrastructure.ts';
import { createEgg, createNest } from '../services/catalog.ts';
import { createUser } from '../services/users.ts';
import type { UserRow } from '../store/records.ts';
import { createTestContext } from '../test-context.ts';
import { html } from './html.ts';
import { registerNavEntry, registerWebExtension, requireAdmin, sendPage } from './index.ts';
import { createSession, resolveSession, SESSION_COOKIE, SESSION_IDLE_MS } from './sessions.ts';

type Ctx = ReturnType<typeof createTestContext>;
let ctx: Ctx;
let app: FastifyInstance;
let admin: UserRow;
let cookies: Record<string, string> = {};
let csrf = '';

async function send(method: 'GET' | 'POST', url: string, form?: Record<string, string>, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  const payload = method === 'GET' ? undefined : new URLSearchParams({ _csrf: csrf, ...form }).toString();
  const res = await app.inject({
    method,
    url,
    payload,
    headers: {
      accept: 'text/html',
      cookie: Object.entries(cookies)
        .map(([k, v]) => `${k}=${v}`)
        .join('; '),
      ...(payload === undefined ? {} : { 'content-type': 'application/x-www-form-urlencoded' }),
      ...headers,
    },
  });
  for (const c of res.cookies as { name: string; value: string }[]) cookies[c.name] = c.value;
  const m = /name="_csrf" value="([^"]+)"/.exec(res.body);
  if (m?.[1] !== undefined) csrf = m[1];
  return res;
}

before(async () => {
  registerNavEntry({ section: 'Addons', label: 'Trash bin', href: '/admin/trash', order: 500 });
  registerWebExtension('test-addon', (web, c) => {
    web.get('/admin/trash', { preHandler: requireAdmin(c) }, async (req, reply) => sendPage(req, reply, { title: 'Trash', body: html`<h1>Trash bin ${'<ok>'}</h1>` }));
    web.get('/admin/trash.json', { preHandler: requireAdmin(c) }, async () => ({ items: [] }));
  });
  ctx = createTestContext();
  app = await createPanelApp(ctx);
  admin = await createUser(ctx, { username: 'root', email: 'root@example.com', password: 'root-password', root_admin: true });
  await ctx.store.users.update(admin.id, { use_totp: 1 });
  admin = (await ctx.store.users.find(admin.id)) ?? admin;
  const { id } = await createSession(ctx, admin, { twoFactorOk: true, ip: '127.0.0.1' });
  cookies = { [SESSION_COOKIE]: id };
});
after(async () => {
  await app.close();
  ctx.store.close();
});

test('an addon page and its nav entry use the layout and the admin gate; its JSON route answers JSON', async () => {
  const page = await send('GET', '/admin/trash');
  assert.equal(page.statusCode, 200);
  assert.match(page.body, /Trash bin &lt;ok&gt;/);
  assert.match(page.body, /<h4>Addons<\/h4><a href="\/admin\/trash" class="active">Trash bin<\/a>/);
  assert.deepEqual(JSON.parse((await send('GET', '/admin/trash.json', undefined, { accept: 'application/json' })).body), { items: [] });
  const anonymous = await app.inject({ method: 'GET', url: '/admin/trash.json', headers: { accept: 'application/json' } });
  assert.equal(anonymous.statusCode, 401);
});

test('servers: create from the selects, validation 422, suspend through the service, delete', async () => {
  const location = await createLocation(ctx, { short: 'loc' });
  const { node } = await createNode(ctx, { name: 'n', fqdn: 'n.example.com', location_id: location.id });
  const [a1, a2] = await createAllocations(ctx, node.id, { ip: '10.0.0.1', ports: ['25565-25566'] });
  const nest = await createNest(ctx, { name: 'Games' });
  const egg = await createEgg(ctx, { nest_id: nest.id, name: 'Vanilla', docker_image: 'example/vanilla:1', startup: 'run' });
  assert.ok(a1 !== undefined && a2 !== undefined);

  const form = await send('GET', '/admin/servers/new');
  assert.match(form.body, /<optgroup label="n"><option value="\d+">10\.0\.0\.1:25565<\/option>/);
  const bad = await send('POST', '/admin/servers', { name: 'web', owner_id: String(admin.id), egg_id: String(egg.id), allocation_id: String(a1.id), io: '5', memory: 'lots' });
  assert.equal(bad.statusCode, 422);
  assert.match(bad.body, /the io field must be at least 10/);
  assert.match(bad.body, /the memory field must be an integer/);
  assert.match(bad.body, /value="lots"/);

  const ok = await send('POST', '/admin/servers', { name: 'web', owner_id: String(admin.id), egg_id: String(egg.id), allocation_id: String(a1.id), memory: '512', threads: '0-1' });
  assert.equal(ok.statusCode, 303);
  const server = await ctx.store.servers.findBy({ name: 'web' });
  assert.ok(server !== undefined);
  assert.equal(server.threads, '0-1');
  assert.equal(server.image, 'example/vanilla:1');
  assert.equal((await ctx.store.allocations.find(a1.id))?.server_id, server.id);

  let hooked: boolean | undefined;
  ctx.hooks.serverSuspension.push((_s, suspended) => {
    hooked = suspended;
  });
  assert.equal((await send('POST', `/admin/servers/${server.id}/suspend`)).statusCode, 303);
  assert.equal(hooked, true);
  assert.equal((await ctx.store.servers.find(server.id))?.suspended, 1);
  assert.match((await send('GET', '/admin/servers')).body, /web[\s\S]*suspended/);

  // Build: move to the other free allocation; threads cleared.
  await send('GET', `/admin/servers/${server.id}`);
  const build = await send('POST', `/admin/servers/${server.id}/build`, { allocation_id: String(a2.id), memory: '1024', swap: '0', disk: '0', io: '500', cpu: '0', threads: '', databases: '0', allocations: '0', backups: '0' });
  assert.equal(build.statusCode, 303);
  assert.equal((await ctx.store.servers.find(server.id))?.allocation_id, a2.id);
  assert.equal((await ctx.store.servers.find(server.id))?.threads, null);

  // An allocation in use cannot be deleted: the refusal is a notice on the list page.
  const refused = await send('POST', `/admin/nodes/${node.id}/allocations/${a2.id}/delete`);
  assert.equal(refused.statusCode, 303);
  assert.match((await send('GET', refused.headers.location as string)).body, /assigned to a server/);

  assert.equal((await send('POST', `/admin/servers/${server.id}/delete`)).statusCode, 303);
  assert.equal(await ctx.store.servers.find(server.id), undefined);
  const ev = (await ctx.activity.list({ perPage: 100 })).items.map((e) => e.event);
  for (const e of ['admin:server.create', 'server:suspended', 'admin:server.build', 'admin:server.delete']) assert.ok(ev.includes(e), e);
});

test('API keys: the token is shown once, it works, revoke deletes it', async () => {
  await send('GET', '/admin/api');
  const created = await send('POST', '/admin/api', { key_type: 'application', memo: 'ci', allowed_ips: '' });
  assert.equal(created.statusCode, 201);
  const token = /id="api-key-token">(hka_[A-Za-z0-9]{48})</.exec(created.body)?.[1];
  assert.ok(token !== undefined);
  const api = await app.inject({ method: 'GET', url: '/api/application/users', headers: { authorization: `Bearer ${token}` } });
  assert.equal(api.statusCode, 200);
  const list = await send('GET', '/admin/api');
  assert.doesNotMatch(list.body, new RegExp(token));
  const identifier = token.slice(4, 20);
  assert.equal((await send('POST', `/admin/api/${identifier}/delete`)).statusCode, 303);
  assert.equal((await app.inject({ method: 'GET', url: '/api/application/users', headers: { authorization: `Bearer ${token}` } })).statusCode, 401);
});

test('an admin can neither delete their own account (a notice, not an error page) nor drop their own admin flag', async () => {
  await send('GET', `/admin/users/${admin.id}`);
  const self = await send('POST', `/admin/users/${admin.id}/delete`);
  assert.equal(self.statusCode, 303);
  assert.match((await send('GET', `/admin/users/${admin.id}`)).body, /cannot delete your own account/);
  const demote = await send('POST', `/admin/users/${admin.id}`, { username: 'root', email: 'root@example.com' });
  assert.equal(demote.statusCode, 422);
  assert.match(demote.body, /cannot remove your own administrator rights/);
});

test('sessions end after the idle timeout; a logout without a session needs no token', async () => {
  const { id, row } = await createSession(ctx, admin, { twoFactorOk: true, ip: '' }, 1_000);
  assert.equal((await resolveSession(ctx, id, 1_000 + SESSION_IDLE_MS - 1))?.row.id, row.id);
  assert.equal(await resolveSession(ctx, id, 1_000 + 2 * SESSION_IDLE_MS + 60_000), undefined);
  assert.equal(await ctx.store.sessions.find(row.id), undefined);
  const out = await app.inject({ method: 'POST', url: '/auth/logout', payload: '', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  assert.equal(out.statusCode, 303);
});

test('requireAdmin also guards a route outside the web scope (reads the session cookie itself)', async () => {
  const other = Fastify();
  other.get('/admin/outside.json', { preHandler: requireAdmin(ctx) }, async () => ({ ok: true }));
  const cookie = `${SESSION_COOKIE}=${cookies[SESSION_COOKIE] ?? ''}`;
  assert.equal((await other.inject({ method: 'GET', url: '/admin/outside.json', headers: { cookie: `a=b; ${cookie}`, accept: 'application/json' } })).statusCode, 200);
  assert.equal((await other.inject({ method: 'GET', url: '/admin/outside.json', headers: { accept: 'application/json' } })).statusCode, 401);
  await other.close();
});

test('external ids are set, shown, refused when taken and cleared on the user and server pages', async () => {
  const location = await createLocation(ctx, { short: 'ext' });
  const { node } = await createNode(ctx, { name: 'ext', fqdn: 'ext.example.com', location_id: location.id });
  const [a1, a2] = await createAllocations(ctx, node.id, { ip: '10.0.0.2', ports: ['25565-25566'] });
  const nest = await createNest(ctx, { name: 'Ext' });
  const egg = await createEgg(ctx, { nest_id: nest.id, name: 'Ext', docker_image: 'example/ext:1', startup: 'run' });
  assert.ok(a1 !== undefined && a2 !== undefined);
  const server = async (name: string, allocation: number, external: string): Promise<LightMyRequestResponse> =>
    send('POST', '/admin/servers', { name, owner_id: String(admin.id), egg_id: String(egg.id), allocation_id: String(allocation), external_id: external });

  assert.equal((await server('billed', a1.id, ' whmcs-7 ')).statusCode, 303);
  const billed = await ctx.store.servers.findBy({ name: 'billed' });
  assert.equal(billed?.external_id, 'whmcs-7');
  assert.match((await send('GET', `/admin/servers/${billed?.id}`)).body, /name="external_id"[^>]*value="whmcs-7"/);
  const taken = await server('twin', a2.id, 'whmcs-7');
  assert.equal(taken.statusCode, 422);
  assert.match(taken.body, /the external_id has already been taken/);
  assert.equal((await send('POST', `/admin/servers/${billed?.id}/details`, { name: 'billed', owner_id: String(admin.id), description: '', external_id: '' })).statusCode, 303);
  assert.equal((await ctx.store.servers.find(billed?.id ?? 0))?.external_id, null);

  const user = await createUser(ctx, { username: 'billed', email: 'billed@example.com', password: 'billed-password', external_id: 'client-1' });
  assert.match((await send('GET', `/admin/users/${user.id}`)).body, /name="external_id"[^>]*value="client-1"/);
  const saved = await send('POST', `/admin/users/${user.id}`, { username: 'billed', email: 'billed@example.com', first_name: '', last_name: '', external_id: 'client-2' });
  assert.equal(saved.statusCode, 303);
  assert.equal((await ctx.store.users.find(user.id))?.external_id, 'client-2');
});

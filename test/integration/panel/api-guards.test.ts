/**
 * The panel's guards end to end against the real panel process: a subuser cannot grant more than
 * it holds, a suspended server answers 409 to everything but its view, application API changes
 * reach the activity log as the admin pages write them, an admin cannot delete or demote their
 * own account through the API, huge page numbers are refused or clamped, and the login throttle
 * counts an account once whether it is named by username or email.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { adminSession, webClient } from './admin-session.ts';
import { startPanel, type TestPanel } from './harness.ts';

type Item = { object: string; attributes: Record<string, unknown> };
type Errors = { errors: { code: string; status: string; detail: string; meta?: Record<string, unknown> }[] };

const PASSWORD = 'correct horse battery';
const HUGE = '99999999999999999999';

describe('panel guards', () => {
  let panel: TestPanel;
  let admin: string;
  let rootId: number;
  let owner: string;
  let helper: string;
  let server: { id: number; uuid: string; identifier: string };
  let nodeId: number;
  let nestId: number;
  let allocIds: number[];

  /** The admin:* and server:* activity rows, read straight from the panel's database. */
  const activity = (event: string): { actor_id: number | null; subject_type: string | null; subject_id: number | null; properties: Record<string, unknown> }[] => {
    const db = new DatabaseSync(join(panel.dir, 'data', 'panel.sqlite'), { readOnly: true });
    try {
      const rows = db.prepare('SELECT actor_id, subject_type, subject_id, properties FROM activity_logs WHERE event = ? ORDER BY id').all(event) as {
        actor_id: number | null;
        subject_type: string | null;
        subject_id: number | null;
        properties: string;
      }[];
      return rows.map((r) => ({ ...r, properties: JSON.parse(r.properties) as Record<string, unknown> }));
    } finally {
      db.close();
    }
  };

  before(async () => {
    panel = await startPanel();
    rootId = panel.createUser('root', { admin: true });
    panel.createUser('owner');
    panel.createUser('helper');
    panel.createUser('carol');
    panel.createUser('dave');
    admin = panel.createKey('root', 'application');
    owner = panel.createKey('owner', 'client');
    helper = panel.createKey('helper', 'client');

    const loc = await panel.api(admin, 'POST', '/api/application/locations', { short: 'fra1', long: 'Frankfurt' });
    const node = await panel.api(admin, 'POST', '/api/application/nodes', { name: 'node-1', fqdn: 'node1.example.test', location_id: (loc.body as Item).attributes.id });
    nodeId = (node.body as Item).attributes.id as number;
    const allocs = await panel.api(admin, 'POST', `/api/application/nodes/${nodeId}/allocations`, { ip: '127.0.0.1', ports: ['25565-25567'] });
    allocIds = (allocs.body as { data: Item[] }).data.map((a) => a.attributes.id as number);
    const nest = await panel.api(admin, 'POST', '/api/application/nests', { name: 'Minecraft' });
    nestId = (nest.body as Item).attributes.id as number;
    const egg = await panel.api(admin, 'POST', `/api/application/nests/${nestId}/eggs`, { name: 'Paper', docker_image: 'ghcr.io/pterodactyl/yolks:java_21', startup: 'java -jar server.jar' });
    const ownerId = ((await panel.api(admin, 'GET', '/api/application/users?filter[search]=owner')).body as { data: Item[] }).data[0]?.attributes.id;
    const created = await panel.api(admin, 'POST', '/api/application/servers', {
      name: 'Survival',
      user: ownerId,
      egg: (egg.body as Item).attributes.id,
      limits: { memory: 2048, swap: 0, disk: 10240, io: 500, cpu: 200 },
      allocation: { default: allocIds[0] },
    });
    assert.equal(created.status, 201, created.text);
    server = (created.body as Item).attributes as typeof server;
  });
  after(async () => panel?.stop());

  it('lets a subuser grant only the permissions it holds', async () => {
    const base = `/api/client/servers/${server.uuid}/users`;
    const add = await panel.api(owner, 'POST', base, { email: 'helper@example.test', permissions: ['file.read', 'user.create', 'user.read', 'user.update'] });
    assert.equal(add.status, 200, add.text);

    const escalate = await panel.api(helper, 'POST', base, { email: 'carol@example.test', permissions: ['file.read', 'file.delete', 'control.console'] });
    assert.equal(escalate.status, 403, escalate.text);
    const err = (escalate.body as Errors).errors[0];
    assert.equal(err?.code, 'AccessDeniedHttpException');
    assert.match(err?.detail ?? '', /control\.console, file\.delete/);
    assert.doesNotMatch(err?.detail ?? '', /file\.read\b/, 'only the missing permissions are named');

    const within = await panel.api(helper, 'POST', base, { email: 'carol@example.test', permissions: ['file.read'] });
    assert.equal(within.status, 200, within.text);
    const carol = (within.body as Item).attributes.uuid as string;
    const update = await panel.api(helper, 'POST', `${base}/${carol}`, { permissions: ['file.read', 'file.update'] });
    assert.equal(update.status, 403, update.text);
    assert.match((update.body as Errors).errors[0]?.detail ?? '', /file\.update/);
    const carolNow = (await panel.api(owner, 'GET', `${base}/${carol}`)).body as Item;
    assert.deepEqual(carolNow.attributes.permissions, ['file.read'], 'a refused update changes nothing');

    assert.equal((await panel.api(owner, 'POST', `${base}/${carol}`, { permissions: ['file.read', 'file.delete', 'control.console'] })).status, 200, 'the owner grants anything');
    const byRoot = panel.createKey('root', 'client');
    assert.equal((await panel.api(byRoot, 'POST', base, { email: 'dave@example.test', permissions: ['file.delete', 'settings.rename'] })).status, 200, 'a root admin grants anything');
  });

  it('answers 409 to every server route but the view while the server is suspended', async () => {
    const base = `/api/client/servers/${server.identifier}`;
    mkdirSync(join(panel.volumesDir, server.uuid), { recursive: true });
    writeFileSync(join(panel.volumesDir, server.uuid, 'a.txt'), 'a');
    assert.equal((await panel.api(admin, 'POST', `/api/application/servers/${server.id}/suspend`)).status, 204);
    const rootClient = panel.createKey('root', 'client');
    const calls: [string, string, unknown?][] = [
      ['GET', '/files/list?directory=/'],
      ['GET', '/files/contents?file=/a.txt'],
      ['POST', '/files/write?file=/susp.txt', 'x'],
      ['POST', '/files/create-folder', { root: '/', name: 'dir' }],
      ['PUT', '/files/rename', { root: '/', files: [{ from: 'a.txt', to: 'b.txt' }] }],
      ['POST', '/files/delete', { root: '/', files: ['a.txt'] }],
      ['POST', '/settings/rename', { name: 'renamed' }],
      ['GET', '/activity'],
      ['GET', '/users'],
      ['POST', '/users', { email: 'carol@example.test', permissions: [] }],
    ];
    for (const key of [owner, helper, rootClient]) {
      for (const [method, path, body] of calls) {
        const r = await panel.api(key, method, `${base}${path}`, body, typeof body === 'string' ? { 'content-type': 'text/plain' } : {});
        assert.equal(r.status, 409, `${method} ${path}: ${r.text}`);
        const err = (r.body as Errors).errors[0];
        assert.equal(err?.code, 'ServerStateConflictException');
        assert.equal(err?.detail, 'This server is currently suspended and the functionality requested is unavailable.');
      }
      const view = await panel.api(key, 'GET', base);
      assert.equal(view.status, 200, view.text);
      assert.equal((view.body as Item).attributes.is_suspended, true);
    }
    assert.equal((await panel.api(panel.createKey('dave', 'client'), 'GET', `${base}/files/list`)).status, 409, 'a subuser sees the conflict too');
    panel.createUser('eve');
    const outsider = panel.createKey('eve', 'client');
    assert.equal((await panel.api(outsider, 'GET', `${base}/files/list`)).status, 404, 'a stranger still gets 404, not a hint that the server exists');
    assert.equal((await panel.api(admin, 'GET', `/api/application/servers/${server.id}`)).status, 200);
    assert.equal((await panel.api(admin, 'POST', `/api/application/servers/${server.id}/unsuspend`)).status, 204);
    assert.equal((await panel.api(owner, 'GET', `${base}/files/list?directory=/`)).status, 200);
  });

  it('writes the admin activity entries of application API changes', async () => {
    const user = await panel.api(admin, 'POST', '/api/application/users', { username: 'frank', email: 'frank@example.test', password: PASSWORD });
    const frankId = (user.body as Item).attributes.id as number;
    assert.equal((await panel.api(admin, 'PATCH', `/api/application/users/${frankId}`, { root_admin: true, password: 'a new password!' })).status, 200);
    const key = await panel.api(admin, 'POST', `/api/application/users/${frankId}/api-keys`, {});
    assert.equal(key.status, 201, key.text);
    assert.equal((await panel.api(admin, 'PATCH', `/api/application/users/${frankId}`, { root_admin: false })).status, 200);
    assert.equal((await panel.api(admin, 'DELETE', `/api/application/users/${frankId}`)).status, 204);

    const loc = await panel.api(admin, 'POST', '/api/application/locations', { short: 'ams1', long: 'Amsterdam' });
    const locId = (loc.body as Item).attributes.id as number;
    assert.equal((await panel.api(admin, 'PATCH', `/api/application/locations/${locId}`, { long: 'Amsterdam NL' })).status, 200);
    assert.equal((await panel.api(admin, 'PATCH', `/api/application/nodes/${nodeId}`, { name: 'node-one' })).status, 200);
    const allocs = await panel.api(admin, 'POST', `/api/application/nodes/${nodeId}/allocations`, { ip: '127.0.0.1', ports: [30000] });
    const allocId = ((allocs.body as { data: Item[] }).data[0]?.attributes.id as number) ?? 0;
    assert.equal((await panel.api(admin, 'DELETE', `/api/application/nodes/${nodeId}/allocations/${allocId}`)).status, 204);
    assert.equal((await panel.api(admin, 'PATCH', `/api/application/nests/${nestId}`, { name: 'Minecraft Java' })).status, 200);
    const egg = await panel.api(admin, 'POST', `/api/application/nests/${nestId}/eggs`, { name: 'Vanilla', docker_image: 'img', startup: 'run' });
    const eggId = (egg.body as Item).attributes.id as number;
    assert.equal((await panel.api(admin, 'PATCH', `/api/application/nests/${nestId}/eggs/${eggId}`, { name: 'Vanilla 2', docker_image: 'img', startup: 'run' })).status, 200);
    assert.equal((await panel.api(admin, 'DELETE', `/api/application/nests/${nestId}/eggs/${eggId}`)).status, 204);
    assert.equal((await panel.api(admin, 'DELETE', `/api/application/locations/${locId}`)).status, 204);
    const details = await panel.api(admin, 'PATCH', `/api/application/servers/${server.id}/details`, { name: 'Survival 2' });
    assert.equal(details.status, 200, details.text);
    const build = await panel.api(admin, 'PATCH', `/api/application/servers/${server.id}/build`, { limits: { memory: 4096 } });
    assert.equal(build.status, 200, build.text);
    assert.equal((await panel.api(admin, 'POST', `/api/application/servers/${server.id}/suspend`)).status, 204);
    assert.equal((await panel.api(admin, 'POST', `/api/application/servers/${server.id}/unsuspend`)).status, 204);

    const one = (event: string, index = 0): ReturnType<typeof activity>[number] => {
      const rows = activity(event);
      const row = rows[index < 0 ? rows.length + index : index];
      assert.ok(row !== undefined, `${event} was logged`);
      assert.equal(row.actor_id, rootId, `${event} names the key's user`);
      return row;
    };
    const updates = activity('admin:user.update');
    assert.equal(updates.length, 2);
    assert.deepEqual(one('admin:user.update', 0).properties, { fields: ['root_admin'], password_changed: true });
    assert.deepEqual(one('admin:user.update', 1).properties, { fields: ['root_admin'], password_changed: false });
    assert.ok(!JSON.stringify(updates).includes('a new password'), 'the password is never recorded');
    assert.deepEqual(one('admin:user.create', -1).properties, { username: 'frank', root_admin: false });
    assert.deepEqual(one('admin:user.delete').properties, { username: 'frank' });
    const keyRow = one('admin:api-key.create');
    assert.equal(keyRow.subject_type, 'api_key');
    assert.equal(keyRow.properties.key_type, 'client');
    assert.equal(keyRow.properties.identifier, (key.body as Item).attributes.identifier);
    assert.deepEqual(one('admin:location.update', -1).properties, { short: 'ams1' });
    assert.equal(one('admin:location.delete', -1).subject_id, locId);
    assert.deepEqual(one('admin:node.update').properties, { name: 'node-one' });
    assert.deepEqual(one('admin:allocation.create', -1).properties, { ip: '127.0.0.1', ports: [30000], added: 1 });
    assert.deepEqual(one('admin:allocation.delete').properties, { allocation: allocId });
    assert.deepEqual(one('admin:nest.update').properties, { name: 'Minecraft Java' });
    assert.deepEqual(one('admin:egg.create', -1).properties, { name: 'Vanilla', nest: nestId });
    assert.deepEqual(one('admin:egg.update').properties, { name: 'Vanilla 2' });
    assert.deepEqual(one('admin:egg.delete').properties, { name: 'Vanilla 2' });
    assert.equal(one('admin:server.update').subject_id, server.id);
    assert.deepEqual(one('admin:server.build').properties, { fields: ['memory'] });
    assert.equal(one('server:suspended', -1).subject_id, server.id);
    assert.equal(one('server:unsuspended', -1).subject_id, server.id);
  });

  it('refuses or clamps huge page numbers instead of failing', async () => {
    const users = await panel.api(admin, 'GET', `/api/application/users?page=${HUGE}`);
    assert.equal(users.status, 422, users.text);
    assert.equal((users.body as Errors).errors[0]?.code, 'ValidationException');
    assert.equal((users.body as Errors).errors[0]?.meta?.source_field, 'page');
    const act = await panel.api(owner, 'GET', `/api/client/servers/${server.uuid}/activity?page=${HUGE}`);
    assert.equal(act.status, 422, act.text);
    assert.equal((await panel.api(admin, 'GET', '/api/application/users?page=1000000')).status, 200, 'the largest page is an empty page');
    assert.equal((await panel.api(admin, 'GET', `/api/application/users?per_page=${HUGE}`)).status, 200);

    const web = await adminSession(panel.url, 'root', PASSWORD);
    const page = await web.get(`/admin/users?page=${HUGE}`);
    assert.equal(page.status, 200, page.text.slice(0, 500));
  });

  it('refuses to let the key user delete or demote their own account', async () => {
    const demote = await panel.api(admin, 'PATCH', `/api/application/users/${rootId}`, { root_admin: false });
    assert.equal(demote.status, 422, demote.text);
    assert.equal((demote.body as Errors).errors[0]?.meta?.source_field, 'root_admin');
    assert.match((demote.body as Errors).errors[0]?.detail ?? '', /cannot remove your own administrator rights/);
    const del = await panel.api(admin, 'DELETE', `/api/application/users/${rootId}`);
    assert.equal(del.status, 409, del.text);
    assert.equal((del.body as Errors).errors[0]?.detail, 'You cannot delete your own account.');
    const me = (await panel.api(admin, 'GET', `/api/application/users/${rootId}`)).body as Item;
    assert.equal(me.attributes.root_admin, true);
    assert.equal((await panel.api(admin, 'PATCH', `/api/application/users/${rootId}`, { first_name: 'Root' })).status, 200, 'other changes to oneself still work');
  });

  it('counts failed logins per account whether named by username or email', async () => {
    const web = webClient(panel.url);
    const send = async (method: 'GET' | 'POST', form?: Record<string, string>): Promise<number> => (await web(method, '/auth/login', form)).status;
    assert.equal(await send('GET'), 200);
    for (const login of ['carol', 'carol@example.test', 'carol', 'CAROL@example.test', 'carol']) assert.equal(await send('POST', { username: login, password: 'wrong password' }), 401, login);
    assert.equal(await send('POST', { username: 'carol@example.test', password: PASSWORD }), 429, 'the account is locked for both identifiers after 5 failures in total');
    assert.equal(await send('POST', { username: 'carol', password: PASSWORD }), 429);
    for (let i = 0; i < 5; i++) assert.equal(await send('POST', { username: 'nobody', password: 'x' }), 401);
    assert.equal(await send('POST', { username: 'nobody', password: 'x' }), 429, 'an unknown login keeps its own count');
    assert.equal(await send('POST', { username: 'helper', password: PASSWORD }), 303, 'other accounts are not affected');
  });
});

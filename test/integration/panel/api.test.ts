/**
 * The panel's application and client APIs end to end against the real panel process: records
 * created through the application API with an admin's key, the client API seen by the owner, a
 * subuser and a stranger, and the files gateway on the server's volume, escapes included.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, symlinkSync, writeFileSync, existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startPanel, type TestPanel } from './harness.ts';

type Item = { object: string; attributes: Record<string, unknown> };
type Errors = { errors: { code: string; status: string; detail: string; meta?: Record<string, unknown> }[] };

describe('panel APIs', () => {
  let panel: TestPanel;
  let admin: string;
  let owner: string;
  let stranger: string;
  let helper: string;
  let server: { id: number; uuid: string; identifier: string };
  let nodeId: number;

  before(async () => {
    panel = await startPanel();
    panel.createUser('root', { admin: true });
    panel.createUser('owner');
    panel.createUser('stranger');
    panel.createUser('helper');
    admin = panel.createKey('root', 'application');
    owner = panel.createKey('owner', 'client');
    stranger = panel.createKey('stranger', 'client');
    helper = panel.createKey('helper', 'client');
  });
  after(async () => panel?.stop());

  it('refuses requests without a valid key of the right type', async () => {
    assert.equal((await panel.api('nope', 'GET', '/api/application/users')).status, 401);
    assert.equal((await panel.api(owner, 'GET', '/api/application/users')).status, 401, 'a client key is not an application key');
    assert.equal((await panel.api(admin, 'GET', '/api/client')).status, 401, 'an application key is not a client key');
    const r = panel.cli('key', 'create', '--user', 'owner', '--type', 'application');
    assert.equal(r.code, 1);
    assert.match(r.stderr, /root administrators/);
  });

  it('creates a location, a node with its pairing token, allocations, a nest, an egg and a server', async () => {
    const loc = await panel.api(admin, 'POST', '/api/application/locations', { short: 'fra1', long: 'Frankfurt' });
    assert.equal(loc.status, 201);
    const locId = (loc.body as Item).attributes.id;
    const node = await panel.api(admin, 'POST', '/api/application/nodes', { name: 'node-1', fqdn: 'node1.example.test', location_id: locId });
    assert.equal(node.status, 201, node.text);
    const nodeBody = node.body as Item & { meta: { pairing_token: string } };
    assert.match(nodeBody.meta.pairing_token, /^[0-9a-f]{64}$/);
    assert.equal(nodeBody.attributes.daemon_listen, 8480);
    assert.equal(nodeBody.attributes.scheme, 'http');
    nodeId = nodeBody.attributes.id as number;
    assert.ok(!JSON.stringify((await panel.api(admin, 'GET', `/api/application/nodes/${nodeId}`)).body).includes(nodeBody.meta.pairing_token), 'the token is shown once');

    const allocs = await panel.api(admin, 'POST', `/api/application/nodes/${nodeId}/allocations`, { ip: '127.0.0.1', ports: ['25565-25567', 27015] });
    assert.equal(allocs.status, 201);
    const allocIds = (allocs.body as { data: Item[] }).data.map((a) => a.attributes.id as number);
    assert.equal(allocIds.length, 4);

    const nest = await panel.api(admin, 'POST', '/api/application/nests', { name: 'Minecraft' });
    const nestId = (nest.body as Item).attributes.id as number;
    const egg = await panel.api(admin, 'POST', `/api/application/nests/${nestId}/eggs`, { name: 'Paper', docker_image: 'ghcr.io/pterodactyl/yolks:java_21', startup: 'java -jar server.jar' });
    assert.equal(egg.status, 201, egg.text);
    const eggId = (egg.body as Item).attributes.id as number;

    const ownerId = ((await panel.api(admin, 'GET', '/api/application/users?filter[search]=owner')).body as { data: Item[] }).data[0]?.attributes.id;
    const created = await panel.api(admin, 'POST', '/api/application/servers', {
      name: 'Survival',
      user: ownerId,
      egg: eggId,
      limits: { memory: 2048, swap: 0, disk: 10240, io: 500, cpu: 200 },
      feature_limits: { databases: 1, allocations: 1, backups: 2 },
      allocation: { default: allocIds[0] },
    });
    assert.equal(created.status, 201, created.text);
    const attrs = (created.body as Item).attributes as { id: number; uuid: string; identifier: string; limits: { memory: number }; container: { image: string } };
    assert.match(attrs.uuid, /^[0-9a-f-]{36}$/);
    assert.equal(attrs.identifier, attrs.uuid.slice(0, 8));
    assert.equal(attrs.limits.memory, 2048);
    assert.equal(attrs.container.image, 'ghcr.io/pterodactyl/yolks:java_21', 'the image comes from the egg');
    server = attrs;

    const taken = await panel.api(admin, 'POST', '/api/application/servers', { name: 'Clash', user: ownerId, egg: eggId, allocation: { default: allocIds[0] } });
    assert.equal(taken.status, 422, 'an assigned allocation cannot be reused');
    const nowhere = await panel.api(admin, 'POST', '/api/application/servers', { name: 'Ghost', user: 99999, egg: 99999, allocation: { default: 99999 } });
    assert.equal(nowhere.status, 422, 'records the body names but that do not exist are its fault');
    assert.deepEqual((nowhere.body as Errors).errors.map((e) => [e.meta?.source_field, e.detail]), [
      ['user', 'the user field must name an existing user'],
      ['egg', 'the egg field must name an existing egg'],
      ['allocation.default', 'the allocation.default field must name an existing allocation'],
    ]);
    const list = (await panel.api(admin, 'GET', '/api/application/servers')).body as { object: string; data: Item[]; meta: { pagination: { total: number } } };
    assert.equal(list.object, 'list');
    assert.equal(list.meta.pagination.total, 1);
    assert.equal((await panel.api(admin, 'DELETE', `/api/application/nodes/${nodeId}/allocations/${allocIds[0]}`)).status, 409, 'an assigned allocation cannot be deleted');
  });

  it('answers validation failures with one ValidationException per field', async () => {
    const r = await panel.api(admin, 'POST', '/api/application/users', { username: 'bad name!', password: 'short' });
    assert.equal(r.status, 422);
    const fields = (r.body as Errors).errors.map((e) => [e.code, e.meta?.source_field]);
    assert.deepEqual(new Set(fields.map((f) => f[0])), new Set(['ValidationException']));
    assert.deepEqual(new Set(fields.map((f) => f[1])), new Set(['email', 'username', 'password']));
    const dup = await panel.api(admin, 'POST', '/api/application/users', { username: 'owner', email: 'x@example.test', password: 'long enough pw' });
    assert.equal(dup.status, 422);
    assert.match((dup.body as Errors).errors[0]?.detail ?? '', /username has already been taken/);
    // Both taken fields at once (in any case), not only the first the database would name.
    const both = await panel.api(admin, 'POST', '/api/application/users', { username: 'OWNER', email: 'Owner@example.test', password: 'long enough pw' });
    assert.equal(both.status, 422);
    assert.deepEqual((both.body as Errors).errors.map((e) => [e.meta?.source_field, e.detail]), [
      ['username', 'the username has already been taken'],
      ['email', 'the email has already been taken'],
    ]);
    const missing = await panel.api(admin, 'GET', '/api/application/servers/999');
    assert.equal(missing.status, 404);
    assert.equal((missing.body as Errors).errors[0]?.code, 'NotFoundHttpException');
    // Errors name the fields as the request sent them, not the columns they are stored in.
    const server = await panel.api(admin, 'POST', '/api/application/servers', { name: 'x', user: 'me', egg: 0, docker_image: 5, limits: { memory: -1 }, allocation: { default: 'a' } });
    assert.equal(server.status, 422);
    const named = new Map((server.body as Errors).errors.map((e) => [e.meta?.source_field, e.detail]));
    assert.deepEqual(new Set(named.keys()), new Set(['user', 'egg', 'docker_image', 'limits.memory', 'allocation.default']));
    assert.match(named.get('limits.memory') ?? '', /^the limits\.memory field/);
    const key = await panel.api(admin, 'POST', '/api/application/users/1/api-keys', { type: 'app' });
    assert.equal(key.status, 422, 'an unknown key type is refused, not taken for client');
  });

  it('filters lists by exact fields and sorts them, and refuses filters and sorts a list does not have', async () => {
    for (const username of ['carol', 'xcarol']) {
      assert.equal((await panel.api(admin, 'POST', '/api/application/users', { username, email: `${username}@example.com`, password: 'long enough pw' })).status, 201);
    }
    type Page = { data: Item[] };
    const names = async (path: string, field = 'username'): Promise<unknown[]> => {
      const r = await panel.api(admin, 'GET', path);
      assert.equal(r.status, 200, `${path}: ${r.text}`);
      return (r.body as Page).data.map((d) => d.attributes[field]);
    };
    // A billing module looks a user up by email and takes data[0]: never the first user of the list.
    assert.deepEqual(await names('/api/application/users?filter[email]=CAROL@example.com'), ['carol']);
    assert.deepEqual(await names('/api/application/users?filter[username]=Carol'), ['carol'], 'usernames compare case-insensitively');
    assert.deepEqual(await names('/api/application/users?filter[email]=nobody@example.com'), []);
    const carol = ((await panel.api(admin, 'GET', '/api/application/users?filter[username]=carol')).body as Page).data[0]?.attributes.uuid as string;
    assert.deepEqual(await names(`/api/application/users?filter[uuid]=${carol}`), ['carol']);
    assert.deepEqual(await names('/api/application/users?filter[search]=carol'), ['carol', 'xcarol'], 'the search filter still matches substrings');
    const all = await names('/api/application/users', 'id');
    assert.deepEqual(await names('/api/application/users?sort=-id', 'id'), [...all].reverse());
    assert.deepEqual(await names(`/api/application/servers?filter[uuidShort]=${server.identifier}`, 'uuid'), [server.uuid]);
    assert.deepEqual(await names('/api/application/servers?filter[name]=Surv', 'uuid'), [], 'an exact match, not a substring');
    assert.deepEqual(await names('/api/application/nodes?filter[fqdn]=node1.example.test&sort=-memory', 'id'), [nodeId]);
    assert.deepEqual(await names('/api/application/locations?filter[short]=fra1', 'short'), ['fra1']);
    for (const [path, field] of [
      ['/api/application/users?filter[first_name]=Carol', 'filter[first_name]'],
      ['/api/application/users?filter[email]=a@example.com&filter[email]=b@example.com', 'filter[email]'],
      ['/api/application/servers?filter[description]=x', 'filter[description]'],
      ['/api/application/nests?filter[name]=Minecraft', 'filter[name]'],
      ['/api/application/users?sort=email', 'sort'],
      ['/api/application/locations?sort=-short', 'sort'],
      ['/api/application/nests?sort=id', 'sort'],
      ['/api/application/users?filter[search]=a&filter[search]=b', 'filter[search]'],
      ['/api/application/nests?search=a&search=b', 'search'],
    ]) {
      const r = await panel.api(admin, 'GET', path as string);
      assert.equal(r.status, 422, `${path}: ${r.text}`);
      assert.deepEqual((r.body as Errors).errors.map((e) => e.meta?.source_field), [field], path);
    }
  });

  it('refuses write bodies that are not objects, and Pterodactyl groups that are not objects', async () => {
    const nest = ((await panel.api(admin, 'GET', '/api/application/nests')).body as { data: Item[] }).data[0]?.attributes.id as number;
    const egg = ((await panel.api(admin, 'GET', `/api/application/nests/${nest}/eggs`)).body as { data: Item[] }).data[0]?.attributes.id as number;
    const json = { 'content-type': 'application/json' };
    const refused = async (method: string, path: string, body: unknown, field = ''): Promise<void> => {
      const r = await panel.api(admin, method, path, typeof body === 'string' ? JSON.stringify(body) : body, json);
      assert.equal(r.status, 422, `${method} ${path} ${JSON.stringify(body)}: ${r.text}`);
      assert.deepEqual((r.body as Errors).errors.map((e) => [e.meta?.source_field, e.detail]), [[field, field === '' ? 'the request must be an object' : `the ${field} field must be an object`]]);
    };
    for (const body of ['str', [], 5]) {
      await refused('POST', '/api/application/servers', body);
      await refused('PATCH', `/api/application/servers/${server.id}/details`, body);
      await refused('PATCH', `/api/application/servers/${server.id}/build`, body);
      await refused('POST', `/api/application/nests/${nest}/eggs`, body);
      await refused('PATCH', `/api/application/nests/${nest}/eggs/${egg}`, body);
      await refused('POST', '/api/application/users/1/api-keys', body);
      await refused('PATCH', '/api/application/locations/1', body);
    }
    await refused('PATCH', `/api/application/servers/${server.id}/build`, { limits: 'x' }, 'limits');
    await refused('PATCH', `/api/application/servers/${server.id}/build`, { feature_limits: [1] }, 'feature_limits');
    await refused('POST', '/api/application/servers', { name: 'x', user: 1, egg, allocation: 5, limits: { memory: 1 } }, 'allocation');
    const after = ((await panel.api(admin, 'GET', `/api/application/servers/${server.id}`)).body as Item).attributes as { name: string; limits: { memory: number } };
    assert.deepEqual([after.name, after.limits.memory], ['Survival', 2048], 'nothing was changed');
    assert.equal(((await panel.api(admin, 'GET', '/api/application/servers')).body as { data: Item[] }).data.length, 1, 'nothing was created');
  });

  it('refuses a client API key request whose body is not an object, and creates no key', async () => {
    const keys = async (): Promise<number> => ((await panel.api(stranger, 'GET', '/api/client/account/api-keys')).body as { data: Item[] }).data.length;
    const before = await keys();
    for (const body of ['str', [], 5]) {
      const r = await panel.api(stranger, 'POST', '/api/client/account/api-keys', JSON.stringify(body), { 'content-type': 'application/json' });
      assert.equal(r.status, 422, `${JSON.stringify(body)}: ${r.text}`);
      assert.deepEqual((r.body as Errors).errors.map((e) => [e.meta?.source_field, e.detail]), [['', 'the request must be an object']]);
    }
    assert.equal(await keys(), before, 'no key was made');
  });

  it('trims required names, and a blank one is required', async () => {
    const blank = async (key: string, method: string, path: string, body: Record<string, unknown>, field: string): Promise<void> => {
      const r = await panel.api(key, method, path, body);
      assert.equal(r.status, 422, `${method} ${path}: ${r.text}`);
      assert.deepEqual((r.body as Errors).errors.map((e) => [e.meta?.source_field, e.detail]), [[field, `the ${field} field is required`]]);
    };
    await blank(admin, 'PATCH', `/api/application/servers/${server.id}/details`, { name: '  ' }, 'name');
    await blank(owner, 'POST', `/api/client/servers/${server.identifier}/settings/rename`, { name: '   ' }, 'name');
    await blank(admin, 'POST', '/api/application/nests', { name: '   ' }, 'name');
    await blank(admin, 'PATCH', '/api/application/locations/1', { short: ' ' }, 'short');
    await blank(admin, 'PATCH', `/api/application/nodes/${nodeId}`, { name: '\t' }, 'name');
    await blank(admin, 'POST', '/api/application/users', { username: ' ', email: 'blank@example.test', password: 'long enough pw' }, 'username');
    const renamed = await panel.api(admin, 'PATCH', `/api/application/servers/${server.id}/details`, { name: '  Survival  ' });
    assert.equal((renamed.body as Item).attributes.name, 'Survival');
    assert.equal((await panel.api(owner, 'POST', `/api/client/servers/${server.identifier}/settings/rename`, { name: ' Survival\n' })).status, 204);
    assert.equal(((await panel.api(admin, 'GET', `/api/application/servers/${server.id}`)).body as Item).attributes.name, 'Survival');
    const user = await panel.api(admin, 'POST', '/api/application/users', { username: ' dave ', email: ' Dave@Example.test ', password: 'long enough pw' });
    assert.equal(user.status, 201, user.text);
    assert.deepEqual([(user.body as Item).attributes.username, (user.body as Item).attributes.email], ['dave', 'dave@example.test']);
  });

  it('shows the owner their server by uuid or short id, and a stranger a 404', async () => {
    const mine = (await panel.api(owner, 'GET', '/api/client')).body as { data: Item[]; meta: { pagination: Record<string, number> } };
    assert.deepEqual(mine.data.map((s) => s.attributes.uuid), [server.uuid]);
    assert.deepEqual(mine.meta.pagination, { total: 1, count: 1, per_page: 50, current_page: 1, total_pages: 1 });
    const past = (await panel.api(owner, 'GET', '/api/client?per_page=1&page=2')).body as { data: Item[]; meta: { pagination: Record<string, number> } };
    assert.deepEqual([past.data.length, past.meta.pagination.current_page, past.meta.pagination.total_pages], [0, 2, 1]);
    assert.equal(mine.data[0]?.attributes.server_owner, true);
    for (const ref of [server.uuid, server.identifier]) assert.equal((await panel.api(owner, 'GET', `/api/client/servers/${ref}`)).status, 200);
    assert.deepEqual(((await panel.api(stranger, 'GET', '/api/client')).body as { data: Item[] }).data, []);
    const hidden = await panel.api(stranger, 'GET', `/api/client/servers/${server.uuid}`);
    assert.equal(hidden.status, 404, 'another user\'s server answers 404');
    assert.equal((await panel.api(stranger, 'GET', `/api/client/servers/${server.identifier}/files/list`)).status, 404);
  });

  it('lists and edits the server\'s files on its volume', async () => {
    const volume = join(panel.volumesDir, server.uuid);
    mkdirSync(volume, { recursive: true });
    writeFileSync(join(volume, 'server.properties'), 'motd=hello\n');
    const base = `/api/client/servers/${server.identifier}/files`;
    const listing = (await panel.api(owner, 'GET', `${base}/list?directory=/`)).body as { object: string; data: Item[] };
    assert.equal(listing.object, 'list');
    assert.equal(listing.data[0]?.object, 'file_object');
    assert.deepEqual(listing.data.map((f) => f.attributes.name), ['server.properties']);

    const read = await panel.api(owner, 'GET', `${base}/contents?file=/server.properties`);
    assert.equal(read.status, 200);
    assert.equal(read.text, 'motd=hello\n');
    assert.equal((await panel.api(owner, 'POST', `${base}/write?file=/config/ops.json`, '[]\n', { 'content-type': 'text/plain' })).status, 204);
    assert.equal(readFileSync(join(volume, 'config', 'ops.json'), 'utf8'), '[]\n');
    assert.equal((await panel.api(owner, 'POST', `${base}/write?file=/raw.json`, '{"a":1}', { 'content-type': 'application/json' })).status, 204);
    assert.equal(readFileSync(join(volume, 'raw.json'), 'utf8'), '{"a":1}', 'the body is written as sent, whatever its content type');
    assert.equal((await panel.api(owner, 'POST', `${base}/create-folder`, { root: '/', name: 'plugins' })).status, 204);
    assert.equal((await panel.api(owner, 'PUT', `${base}/rename`, { root: '/', files: [{ from: 'server.properties', to: 'plugins/server.properties' }] })).status, 204);
    assert.ok(existsSync(join(volume, 'plugins', 'server.properties')));
    assert.equal((await panel.api(owner, 'POST', `${base}/delete`, { root: '/', files: ['raw.json'] })).status, 204);
    assert.ok(!existsSync(join(volume, 'raw.json')));
  });

  it('keeps every file operation inside the volume, symlinks included', async () => {
    const volume = join(panel.volumesDir, server.uuid);
    const outside = mkdtempSync(join(tmpdir(), 'hk-outside-'));
    writeFileSync(join(outside, 'secret.txt'), 'top secret');
    symlinkSync(outside, join(volume, 'escape'));
    symlinkSync(join(outside, 'secret.txt'), join(volume, 'secret-link'));
    const base = `/api/client/servers/${server.uuid}/files`;
    const refused = async (method: string, path: string, body?: unknown): Promise<void> => {
      const r = await panel.api(owner, method, `${base}${path}`, body, typeof body === 'string' ? { 'content-type': 'text/plain' } : {});
      assert.ok(r.status >= 400 && r.status < 500, `${method} ${path} answered ${r.status}: ${r.text}`);
    };
    await refused('GET', '/contents?file=../../../../etc/passwd');
    await refused('GET', '/contents?file=/escape/secret.txt');
    await refused('GET', '/contents?file=/secret-link');
    await refused('GET', '/list?directory=/escape');
    await refused('POST', '/write?file=/escape/new.txt', 'x');
    await refused('POST', '/write?file=/secret-link', 'overwritten');
    await refused('POST', '/create-folder', { root: '/escape', name: 'x' });
    await refused('PUT', '/rename', { root: '/', files: [{ from: 'plugins', to: 'escape/plugins' }] });
    await refused('POST', '/delete', { root: '/escape', files: ['secret.txt'] });
    assert.equal(readFileSync(join(outside, 'secret.txt'), 'utf8'), 'top secret');
    assert.ok(!existsSync(join(outside, 'new.txt')) && !existsSync(join(outside, 'x')));
    assert.equal((await panel.api(owner, 'POST', `${base}/delete`, { root: '/', files: ['secret-link'] })).status, 204, 'a link itself may be deleted');
    assert.equal(readFileSync(join(outside, 'secret.txt'), 'utf8'), 'top secret', 'deleting a link leaves its target');
  });

  it('gives a subuser exactly their permissions', async () => {
    const base = `/api/client/servers/${server.uuid}`;
    const add = await panel.api(owner, 'POST', `${base}/users`, { email: 'helper@example.test', permissions: ['file.read', 'file.read-content'] });
    assert.equal(add.status, 200, add.text);
    assert.equal((await panel.api(owner, 'POST', `${base}/users`, { email: 'helper@example.test', permissions: ['no.such'] })).status, 422);
    const shared = (await panel.api(helper, 'GET', '/api/client')).body as { data: Item[] };
    assert.deepEqual(shared.data.map((s) => [s.attributes.uuid, s.attributes.server_owner]), [[server.uuid, false]]);
    assert.equal((await panel.api(helper, 'GET', `${base}/files/list?directory=/plugins`)).status, 200);
    const denied = await panel.api(helper, 'POST', `${base}/files/delete`, { root: '/', files: ['plugins'] });
    assert.equal(denied.status, 403);
    assert.equal((denied.body as Errors).errors[0]?.code, 'AccessDeniedHttpException');
    assert.equal((await panel.api(helper, 'POST', `${base}/files/write?file=/x.txt`, 'x', { 'content-type': 'text/plain' })).status, 403);
    assert.equal((await panel.api(helper, 'GET', `${base}/users`)).status, 403);
    const subUuid = ((add.body as Item).attributes.uuid as string) ?? '';
    assert.equal((await panel.api(owner, 'DELETE', `${base}/users/${subUuid}`)).status, 204);
    assert.equal((await panel.api(helper, 'GET', base)).status, 404, 'a removed subuser loses access');
  });

  it('suspends and unsuspends through the service, and records activity', async () => {
    assert.equal((await panel.api(admin, 'POST', `/api/application/servers/${server.id}/suspend`)).status, 204);
    assert.equal(((await panel.api(owner, 'GET', `/api/client/servers/${server.uuid}`)).body as Item).attributes.is_suspended, true);
    assert.equal((await panel.api(admin, 'POST', `/api/application/servers/${server.id}/unsuspend`)).status, 204);
    assert.equal(((await panel.api(owner, 'GET', `/api/client/servers/${server.uuid}`)).body as Item).attributes.is_suspended, false);
    const activity = (await panel.api(owner, 'GET', `/api/client/servers/${server.uuid}/activity`)).body as { data: Item[] };
    const events = activity.data.map((a) => a.attributes.event);
    // The trash bin is on by default: the delete above moved the link into the trash.
    for (const e of ['server:suspended', 'server:unsuspended', 'server:file.write', 'server:file.read', 'server:trashbin.trash', 'server:subuser.create']) assert.ok(events.includes(e), `${e} in ${events.join(', ')}`);
    const write = activity.data.find((a) => a.attributes.event === 'server:file.write')?.attributes as { actor: { type: string }; ip: string; properties: { file: string } };
    assert.equal(write.actor.type, 'user');
    assert.match(write.ip, /127\.0\.0\.1/);
    assert.ok(write.properties.file.length > 0);
  });

  it('scopes every egg route to the nest in the URL and never moves an egg between nests', async () => {
    const served = ((await panel.api(admin, 'GET', `/api/application/servers/${server.id}`)).body as Item).attributes as { nest: number; egg: number };
    const other = ((await panel.api(admin, 'POST', '/api/application/nests', { name: 'Other' })).body as Item).attributes.id as number;
    const spare = ((await panel.api(admin, 'POST', `/api/application/nests/${other}/eggs`, { name: 'Spare', docker_image: 'img:1', startup: 'run' })).body as Item).attributes.id as number;
    const eggOf = async (nest: number, egg: number): Promise<Record<string, unknown>> => ((await panel.api(admin, 'GET', `/api/application/nests/${nest}/eggs/${egg}`)).body as Item).attributes;
    for (const [method, nest, egg] of [
      ['GET', other, served.egg],
      ['PATCH', other, served.egg],
      ['DELETE', served.nest, spare],
      ['PATCH', 999, spare],
    ] as const) {
      const r = await panel.api(admin, method, `/api/application/nests/${nest}/eggs/${egg}`, method === 'PATCH' ? { name: 'moved?' } : undefined);
      assert.equal(r.status, 404, `${method} nest ${nest} egg ${egg}: ${r.text}`);
      assert.equal((r.body as Errors).errors[0]?.code, 'NotFoundHttpException');
    }
    assert.equal((await eggOf(served.nest, served.egg)).nest, served.nest);
    assert.equal((await eggOf(other, spare)).name, 'Spare', 'the egg of another nest was not deleted');
    const patched = await panel.api(admin, 'PATCH', `/api/application/nests/${served.nest}/eggs/${served.egg}`, { nest_id: other, nest: other, description: 'kept here' });
    assert.equal(patched.status, 200, patched.text);
    assert.deepEqual([(patched.body as Item).attributes.nest, (patched.body as Item).attributes.description], [served.nest, 'kept here']);
    const inUse = await panel.api(admin, 'DELETE', `/api/application/nests/${served.nest}`);
    assert.equal(inUse.status, 409);
    assert.deepEqual((inUse.body as Errors).errors.map((e) => [e.code, e.detail]), [['ConflictHttpException', 'cannot delete a nest that still has servers']]);
    assert.equal((await panel.api(admin, 'DELETE', `/api/application/nests/${other}/eggs/${spare}`)).status, 204);
    assert.equal((await panel.api(admin, 'DELETE', `/api/application/nests/${other}`)).status, 204);
  });

  it('answers 404 for the allocations of a node and the eggs of a nest that do not exist, as for their writes', async () => {
    const location = ((await panel.api(admin, 'POST', '/api/application/locations', { short: 'gone1' })).body as Item).attributes.id as number;
    const node = ((await panel.api(admin, 'POST', '/api/application/nodes', { name: 'short-lived', fqdn: 'gone.example.test', location_id: location })).body as Item).attributes.id as number;
    assert.equal((await panel.api(admin, 'POST', `/api/application/nodes/${node}/allocations`, { ip: '127.0.0.1', ports: [30000] })).status, 201);
    assert.equal((await panel.api(admin, 'DELETE', `/api/application/nodes/${node}`)).status, 204);
    for (const [path, what] of [
      [`/api/application/nodes/${node}/allocations`, 'node'],
      [`/api/application/nodes/${node}/allocations/1`, 'node'],
      ['/api/application/nests/999/eggs', 'nest'],
      ['/api/application/nests/999/eggs/1', 'nest'],
    ] as const) {
      const r = await panel.api(admin, 'GET', path);
      assert.equal(r.status, 404, `${path}: ${r.text}`);
      assert.deepEqual((r.body as Errors).errors.map((e) => [e.code, e.detail]), [['NotFoundHttpException', `the requested ${what} was not found`]], path);
    }
  });

  it('stores each allocation address in one spelling and names each bad port once', async () => {
    const add = async (ip: string, ports: unknown[]): Promise<{ status: number; ips: unknown[] }> => {
      const r = await panel.api(admin, 'POST', `/api/application/nodes/${nodeId}/allocations`, { ip, ports });
      return { status: r.status, ips: (r.body as { data?: Item[] }).data?.map((a) => a.attributes.ip) ?? [] };
    };
    assert.deepEqual(await add('::1', [25565]), { status: 201, ips: ['::1'] });
    assert.deepEqual(await add('0:0:0:0:0:0:0:1', [25565]), { status: 201, ips: [] }, 'the same endpoint spelled out is not added again');
    assert.deepEqual(await add('::FFFF:127.0.0.1', [25565, 28000]), { status: 201, ips: ['127.0.0.1'] }, 'an IPv4-mapped address is its IPv4 address');
    const listed = ((await panel.api(admin, 'GET', `/api/application/nodes/${nodeId}/allocations?per_page=100`)).body as { data: Item[] }).data.map((a) => `${String(a.attributes.ip)}:${String(a.attributes.port)}`);
    assert.equal(listed.filter((a) => a === '::1:25565').length, 1);
    assert.ok(!listed.some((a) => a.startsWith('::ffff:') || a.startsWith('0:0:')), listed.join(' '));

    const bad = await panel.api(admin, 'POST', `/api/application/nodes/${nodeId}/allocations`, { ip: '127.0.0.1', ports: [0, '0', 28001, 'x', 65536, '25570-25565', true] });
    assert.equal(bad.status, 422);
    const want = (i: number): [string, string] => [`ports.${i}`, `the ports.${i} field must be a port from 1 to 65535 or a range such as 25565-25570`];
    assert.deepEqual((bad.body as Errors).errors.map((e) => [e.meta?.source_field, e.detail]), [0, 1, 3, 4, 5, 6].map(want));
    assert.ok(!JSON.stringify((await panel.api(admin, 'GET', `/api/application/nodes/${nodeId}/allocations?per_page=100`)).body).includes('28001'), 'nothing was added');
  });

  it('refuses to delete records still in use', async () => {
    assert.equal((await panel.api(admin, 'DELETE', `/api/application/nodes/${nodeId}`)).status, 409);
    assert.equal((await panel.api(admin, 'DELETE', `/api/application/servers/${server.id}`)).status, 204);
    assert.equal((await panel.api(owner, 'GET', `/api/client/servers/${server.uuid}`)).status, 404);
  });
});

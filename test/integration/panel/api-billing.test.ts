/**
 * What billing modules (WHMCS, Blesta, Paymenter) use of the application API, against the real
 * panel process: `external_id` on users and servers (set, changed, cleared, unique, looked up by
 * `/external/{id}`, kept through the upgrade of an older database) and `?include=` relations in
 * Fractal's shapes, each included record as its own route gives it.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { startHostkit, type Daemon } from '../hostkit-process.ts';
import { startPanel, type TestPanel } from './harness.ts';

type Attributes = Record<string, unknown>;
type Item = { object: string; attributes: Attributes & { relationships?: Record<string, unknown> } };
type Page = { object: string; data: Item[] };
type Errors = { errors: { code: string; status: string; detail: string; meta?: Record<string, unknown> }[] };

/** An application-API client of one panel with one admin key. */
function client(panel: TestPanel, key: string) {
  const call = async (method: string, path: string, body?: unknown, status = method === 'POST' ? 201 : 200): Promise<unknown> => {
    const r = await panel.api(key, method, `/api/application${path}`, body);
    assert.equal(r.status, status, `${method} ${path}: ${r.text}`);
    return r.body;
  };
  return {
    call,
    /** The attributes of one record as its own route gives them. */
    attrs: async (path: string): Promise<Attributes> => ((await call('GET', path)) as Item).attributes,
    create: async (path: string, body: unknown): Promise<Attributes> => ((await call('POST', path, body)) as Item).attributes,
    /** The errors of a refused request: [source_field, detail] each. */
    refused: async (method: string, path: string, body: unknown, status = 422): Promise<unknown[][]> => ((await call(method, path, body, status)) as Errors).errors.map((e) => [e.meta?.source_field ?? e.code, e.detail]),
  };
}

describe('application API: external ids', () => {
  let panel: TestPanel;
  let api: ReturnType<typeof client>;
  let alloc: number[];
  let egg: number;

  before(async () => {
    panel = await startPanel();
    panel.createUser('root', { admin: true });
    api = client(panel, panel.createKey('root', 'application'));
    const location = await api.create('/locations', { short: 'fra1' });
    const node = await api.create('/nodes', { name: 'node-1', fqdn: 'node1.example.test', location_id: location.id });
    alloc = ((await api.call('POST', `/nodes/${node.id}/allocations`, { ip: '127.0.0.1', ports: ['25565-25568'] })) as Page).data.map((a) => a.attributes.id as number);
    const nest = await api.create('/nests', { name: 'Minecraft' });
    egg = (await api.create(`/nests/${nest.id}/eggs`, { name: 'Paper', docker_image: 'ghcr.io/pterodactyl/yolks:java_21', startup: 'java -jar server.jar' })).id as number;
  });
  after(async () => panel?.stop());

  it('sets, changes, clears and looks up a user by external_id, which is unique among users', async () => {
    const alice = await api.create('/users', { username: 'alice', email: 'alice@example.test', password: 'long enough pw', external_id: ' whmcs-7 ' });
    assert.deepEqual(Object.keys(alice).slice(0, 3), ['id', 'external_id', 'uuid'], 'where Pterodactyl puts it');
    assert.equal(alice.external_id, 'whmcs-7', 'trimmed as Pterodactyl trims request strings');
    assert.deepEqual(await api.attrs('/users/external/whmcs-7'), alice);
    assert.deepEqual(((await api.call('GET', '/users?filter[external_id]=whmcs-7')) as Page).data.map((u) => u.attributes.id), [alice.id]);

    // None is null, and any number of users have none.
    const bob = await api.create('/users', { username: 'bob', email: 'bob@example.test', password: 'long enough pw' });
    const carol = await api.create('/users', { username: 'carol', email: 'carol@example.test', password: 'long enough pw', external_id: '' });
    assert.deepEqual([bob.external_id, carol.external_id], [null, null]);

    assert.deepEqual(await api.refused('POST', '/users', { username: 'dave', email: 'dave@example.test', password: 'long enough pw', external_id: 'whmcs-7' }), [
      ['external_id', 'the external_id has already been taken'],
    ]);
    assert.deepEqual(await api.refused('PATCH', `/users/${bob.id}`, { external_id: 'whmcs-7' }), [['external_id', 'the external_id has already been taken']]);
    assert.equal(((await api.call('PATCH', `/users/${alice.id}`, { external_id: 'whmcs-7', first_name: 'Alice' })) as Item).attributes.external_id, 'whmcs-7', 'its own id is no clash');
    assert.deepEqual(await api.refused('PATCH', `/users/${bob.id}`, { external_id: 42 }), [['external_id', 'the external_id field must be a string or null']]);
    assert.deepEqual(await api.refused('PATCH', `/users/${bob.id}`, { external_id: 'x'.repeat(192) }), [['external_id', 'the external_id field must not be longer than 191 characters']]);

    // Any text, exactly as stored: spaces and slashes travel percent-encoded; case matters.
    await api.call('PATCH', `/users/${bob.id}`, { external_id: 'blesta 12/a' });
    assert.equal((await api.attrs(`/users/external/${encodeURIComponent('blesta 12/a')}`)).id, bob.id);
    assert.deepEqual(await api.refused('GET', '/users/external/WHMCS-7', undefined, 404), [['NotFoundHttpException', 'the requested user was not found']]);

    // Changed or cleared, the old id finds no one.
    await api.call('PATCH', `/users/${alice.id}`, { external_id: 'whmcs-8' });
    assert.equal((await api.attrs('/users/external/whmcs-8')).id, alice.id);
    await api.refused('GET', '/users/external/whmcs-7', undefined, 404);
    assert.equal(((await api.call('PATCH', `/users/${alice.id}`, { external_id: null })) as Item).attributes.external_id, null);
    await api.refused('GET', '/users/external/whmcs-8', undefined, 404);
    assert.equal(((await api.call('PATCH', `/users/${bob.id}`, { external_id: '   ' })) as Item).attributes.external_id, null, 'blank is none');
  });

  it('sets, changes, clears and looks up a server by external_id, which is unique among servers', async () => {
    const owner = (await api.attrs('/users/1')).id;
    const body = (name: string, allocation: number, extra: Attributes = {}): Attributes => ({ name, user: owner, egg, allocation: { default: allocation }, ...extra });
    const one = await api.create('/servers', body('One', alloc[0] as number, { external_id: 'svc-1' }));
    assert.deepEqual(Object.keys(one).slice(0, 3), ['id', 'external_id', 'uuid']);
    assert.equal(one.external_id, 'svc-1');
    assert.deepEqual(await api.attrs('/servers/external/svc-1'), one);
    assert.deepEqual(((await api.call('GET', '/servers?filter[external_id]=svc-1')) as Page).data.map((s) => s.attributes.id), [one.id]);

    // A taken id is refused before anything is written, and alongside the request's other problems.
    assert.deepEqual(await api.refused('POST', '/servers', body('Two', alloc[1] as number, { external_id: 'svc-1', egg: 999 })), [
      ['external_id', 'the external_id has already been taken'],
      ['egg', 'the egg field must name an existing egg'],
    ]);
    await api.refused('POST', '/servers', body('Two', alloc[1] as number, { external_id: 'svc-1' }));
    assert.equal(((await api.call('GET', '/servers')) as Page).data.length, 1);

    const two = await api.create('/servers', body('Two', alloc[1] as number));
    assert.equal(two.external_id, null);
    const three = await api.create('/servers', body('Three', alloc[2] as number, { external_id: '' }));
    assert.equal(three.external_id, null, 'blank is none, and many servers have none');
    assert.equal((await api.create('/users', { username: 'svc', email: 'svc@example.test', password: 'long enough pw', external_id: 'svc-1' })).external_id, 'svc-1', 'users and servers are apart');

    assert.deepEqual(await api.refused('PATCH', `/servers/${two.id}/details`, { external_id: 'svc-1' }), [['external_id', 'the external_id has already been taken']]);
    assert.equal(((await api.call('PATCH', `/servers/${one.id}/details`, { external_id: 'svc-1', name: 'One!' })) as Item).attributes.name, 'One!', 'its own id is no clash');
    assert.deepEqual(await api.refused('PATCH', `/servers/${two.id}/details`, { external_id: ['svc-2'] }), [['external_id', 'the external_id field must be a string or null']]);
    assert.equal(((await api.call('PATCH', `/servers/${two.id}/details`, { external_id: 'svc-2' })) as Item).attributes.external_id, 'svc-2');
    assert.equal((await api.attrs('/servers/external/svc-2')).id, two.id);
    assert.equal(((await api.call('PATCH', `/servers/${one.id}/details`, { external_id: null })) as Item).attributes.external_id, null);
    assert.deepEqual(await api.refused('GET', '/servers/external/svc-1', undefined, 404), [['NotFoundHttpException', 'the requested server was not found']]);
    assert.equal((await api.attrs(`/servers/${one.id}`)).name, 'One!', 'the other details are kept');
  });
});

describe('application API: a database from before external ids', () => {
  let panel: TestPanel;
  /** The panel started again on the old database (panel.stop() stops only the first). */
  let restarted: Daemon | undefined;

  before(async () => {
    panel = await startPanel();
  });
  after(async () => {
    await restarted?.stop();
    await panel?.stop();
  });

  it('is upgraded on start: its users and servers have no external id, and can be given one', async () => {
    panel.createUser('root', { admin: true });
    const api = client(panel, panel.createKey('root', 'application'));
    const location = await api.create('/locations', { short: 'fra1' });
    const node = await api.create('/nodes', { name: 'node-1', fqdn: 'node1.example.test', location_id: location.id });
    const [allocation] = ((await api.call('POST', `/nodes/${node.id}/allocations`, { ip: '127.0.0.1', ports: [25565] })) as Page).data.map((a) => a.attributes.id);
    const nest = await api.create('/nests', { name: 'Minecraft' });
    const egg = await api.create(`/nests/${nest.id}/eggs`, { name: 'Paper', docker_image: 'ghcr.io/pterodactyl/yolks:java_21', startup: 'java -jar server.jar' });
    const server = await api.create('/servers', { name: 'Old', user: 1, egg: egg.id, allocation: { default: allocation } });
    await panel.daemon.stop();

    // The database as the release before external ids left it: schema version 3.
    const db = new DatabaseSync(join(panel.dir, 'data', 'panel.sqlite'));
    db.exec(`
      DROP INDEX users_external_id; ALTER TABLE users DROP COLUMN external_id;
      DROP INDEX servers_external_id; ALTER TABLE servers DROP COLUMN external_id;
      DELETE FROM schema_migrations WHERE version = 4;
    `);
    // Addons number their migrations from 100 up; the core's stop at 3.
    assert.deepEqual(db.prepare('SELECT version FROM schema_migrations WHERE version < 100 ORDER BY version').all().map((r) => r['version']), [1, 2, 3]);
    db.close();

    restarted = startHostkit(['panel', 'serve', '--config', panel.config]);
    await restarted.waitFor(/panel listening/);
    assert.match(restarted.output(), /"versions":\[4\].*applied database migrations/);
    assert.equal((await api.attrs('/users/1')).external_id, null);
    const upgraded = await api.attrs(`/servers/${server.id}`);
    assert.deepEqual(upgraded, { ...server, external_id: null });
    await api.call('PATCH', '/users/1', { external_id: 'whmcs-1' });
    await api.call('PATCH', `/servers/${server.id}/details`, { external_id: 'whmcs-1' });
    assert.equal((await api.attrs('/users/external/whmcs-1')).id, 1);
    assert.equal((await api.attrs('/servers/external/whmcs-1')).name, 'Old');
  });
});

describe('application API: ?include= relations', () => {
  let panel: TestPanel;
  let api: ReturnType<typeof client>;
  /** Ids of the records made in `before`. */
  const id = { fra: 0, ams: 0, node: 0, a1: 0, a2: 0, a3: 0, nest: 0, egg: 0, alice: 0, bob: 0, one: 0, two: 0 };
  /** The identifier of server one, for the client API. */
  let oneIdentifier: string;

  before(async () => {
    panel = await startPanel();
    panel.createUser('root', { admin: true });
    api = client(panel, panel.createKey('root', 'application'));
    id.fra = (await api.create('/locations', { short: 'fra1' })).id as number;
    id.ams = (await api.create('/locations', { short: 'ams1' })).id as number;
    id.node = (await api.create('/nodes', { name: 'node-1', fqdn: 'node1.example.test', location_id: id.fra })).id as number;
    [id.a1, id.a2, id.a3] = ((await api.call('POST', `/nodes/${id.node}/allocations`, { ip: '127.0.0.1', ports: ['25565-25567'] })) as Page).data.map((a) => a.attributes.id) as [number, number, number];
    id.nest = (await api.create('/nests', { name: 'Minecraft' })).id as number;
    id.egg = (await api.create(`/nests/${id.nest}/eggs`, { name: 'Paper', docker_image: 'ghcr.io/pterodactyl/yolks:java_21', startup: 'java -jar server.jar' })).id as number;
    id.alice = (await api.create('/users', { username: 'alice', email: 'alice@example.test', password: 'long enough pw', external_id: 'whmcs-1' })).id as number;
    id.bob = (await api.create('/users', { username: 'bob', email: 'bob@example.test', password: 'long enough pw' })).id as number;
    const one = await api.create('/servers', { name: 'One', user: id.alice, egg: id.egg, allocation: { default: id.a1 }, external_id: 'svc-1' });
    id.one = one.id as number;
    oneIdentifier = one.identifier as string;
    id.two = (await api.create('/servers', { name: 'Two', user: id.bob, egg: id.egg, allocation: { default: id.a2 } })).id as number;
    // Bob is a subuser of Alice's server, added as Alice through the client API.
    const added = await panel.api(panel.createKey('alice', 'client'), 'POST', `/api/client/servers/${oneIdentifier}/users`, { email: 'bob@example.test', permissions: ['file.read'] });
    assert.equal(added.status, 200, added.text);
  });
  after(async () => panel?.stop());

  /** `{object, attributes}` of a record as its own route gives it. */
  const own = async (object: string, path: string): Promise<Item> => ({ object, attributes: await api.attrs(path) });
  const many = (data: Item[]): unknown => ({ object: 'list', data });

  /**
   * Each include of each resource, on its show route and in its list: [show path, list path,
   * include, the relationship expected], the related records as their own routes give them.
   */
  const cases = async (): Promise<[string, string, string, unknown][]> => {
    const server = (n: number): Promise<Item> => own('server', `/servers/${n}`);
    const allocation = (n: number): Promise<Item> => own('allocation', `/nodes/${id.node}/allocations/${n}`);
    // Subusers have no application route: their shape has its own test, here show and list agree.
    const subusers = ((await api.call('GET', `/servers/${id.one}?include=subusers`)) as Item).attributes.relationships?.['subusers'];
    return [
      [`/servers/${id.one}`, '/servers', 'allocations', many([await allocation(id.a1)])],
      [`/servers/${id.one}`, '/servers', 'user', await own('user', `/users/${id.alice}`)],
      [`/servers/${id.one}`, '/servers', 'subusers', subusers],
      [`/servers/${id.two}`, '/servers', 'subusers', many([])],
      [`/servers/${id.one}`, '/servers', 'nest', await own('nest', `/nests/${id.nest}`)],
      [`/servers/${id.one}`, '/servers', 'egg', await own('egg', `/nests/${id.nest}/eggs/${id.egg}`)],
      [`/servers/${id.one}`, '/servers', 'location', await own('location', `/locations/${id.fra}`)],
      [`/servers/${id.one}`, '/servers', 'node', await own('node', `/nodes/${id.node}`)],
      [`/users/${id.alice}`, '/users', 'servers', many([await server(id.one)])],
      [`/users/${id.bob}`, '/users', 'servers', many([await server(id.two)])],
      [`/nodes/${id.node}`, '/nodes', 'allocations', many([await allocation(id.a1), await allocation(id.a2), await allocation(id.a3)])],
      [`/nodes/${id.node}`, '/nodes', 'location', await own('location', `/locations/${id.fra}`)],
      [`/nodes/${id.node}`, '/nodes', 'servers', many([await server(id.one), await server(id.two)])],
      [`/locations/${id.fra}`, '/locations', 'nodes', many([await own('node', `/nodes/${id.node}`)])],
      [`/locations/${id.fra}`, '/locations', 'servers', many([await server(id.one), await server(id.two)])],
      [`/locations/${id.ams}`, '/locations', 'nodes', many([])],
      [`/locations/${id.ams}`, '/locations', 'servers', many([])],
      [`/nests/${id.nest}`, '/nests', 'eggs', many([await own('egg', `/nests/${id.nest}/eggs/${id.egg}`)])],
      [`/nests/${id.nest}`, '/nests', 'servers', many([await server(id.one), await server(id.two)])],
      [`/nests/${id.nest}/eggs/${id.egg}`, `/nests/${id.nest}/eggs`, 'nest', await own('nest', `/nests/${id.nest}`)],
      [`/nests/${id.nest}/eggs/${id.egg}`, `/nests/${id.nest}/eggs`, 'servers', many([await server(id.one), await server(id.two)])],
      [`/nodes/${id.node}/allocations/${id.a1}`, `/nodes/${id.node}/allocations`, 'server', await server(id.one)],
      [`/nodes/${id.node}/allocations/${id.a1}`, `/nodes/${id.node}/allocations`, 'node', await own('node', `/nodes/${id.node}`)],
      // Pterodactyl's serializer writes a relation without a record as a null_resource.
      [`/nodes/${id.node}/allocations/${id.a3}`, `/nodes/${id.node}/allocations`, 'server', { object: 'null_resource', attributes: null }],
    ];
  };

  it('gives a server its subusers as the application API shapes them', async () => {
    const r = ((await api.call('GET', `/servers/${id.one}?include=subusers`)) as Item).attributes.relationships?.['subusers'] as Page;
    assert.equal(r.object, 'list');
    assert.equal(r.data.length, 1);
    const sub = r.data[0] as Item;
    assert.equal(sub.object, 'subuser');
    assert.deepEqual(Object.keys(sub.attributes), ['id', 'user_id', 'server_id', 'permissions', 'created_at', 'updated_at']);
    assert.deepEqual([sub.attributes.user_id, sub.attributes.server_id, sub.attributes.permissions], [id.bob, id.one, ['file.read']]);
  });

  it('adds each include to the show route and to every record of the list, as the related records own routes give them', async () => {
    for (const [show, listPath, name, expected] of await cases()) {
      const shown = (await api.call('GET', `${show}?include=${name}`)) as Item;
      assert.deepEqual(shown.attributes.relationships, { [name]: expected }, `${show}?include=${name}`);
      const { relationships, ...rest } = shown.attributes;
      assert.ok(relationships !== undefined);
      assert.deepEqual(rest, await api.attrs(show), 'the record itself is as without the include');
      const listed = ((await api.call('GET', `${listPath}?include=${name}`)) as Page).data;
      const entry = listed.find((d) => d.attributes.id === shown.attributes.id);
      assert.deepEqual(entry?.attributes.relationships, { [name]: expected }, `${listPath}?include=${name}`);
      for (const other of listed) assert.deepEqual(Object.keys(other.attributes.relationships ?? {}), [name], `${listPath}: every record has it`);
    }
  });

  it('takes several includes at once, on the external id lookups too, and the server list gives each server its own', async () => {
    const all = 'allocations,user,subusers,nest,egg,location,node';
    const viaExternal = (await api.call('GET', `/servers/external/svc-1?include=${all}`)) as Item;
    assert.deepEqual(viaExternal, await api.call('GET', `/servers/${id.one}?include=${all}`));
    assert.deepEqual(Object.keys(viaExternal.attributes.relationships ?? {}), all.split(','));
    const users = (await api.call('GET', '/users/external/whmcs-1?include=servers')) as Item;
    assert.deepEqual((users.attributes.relationships?.['servers'] as Page).data.map((s) => s.attributes.id), [id.one]);

    const list = ((await api.call('GET', `/servers?include=${all}`)) as Page).data;
    const rel = (n: number, name: string): Item => list.find((s) => s.attributes.id === n)?.attributes.relationships?.[name] as Item;
    assert.equal(rel(id.one, 'user').attributes.id, id.alice);
    assert.equal(rel(id.two, 'user').attributes.id, id.bob);
    assert.deepEqual((rel(id.two, 'allocations') as unknown as Page).data.map((a) => a.attributes.id), [id.a2]);
  });

  it('ignores include names the resource does not have, and adds nothing without one', async () => {
    const plain = await api.attrs(`/servers/${id.one}`);
    assert.equal('relationships' in plain, false, 'no relationships without an include');
    for (const include of ['bogus', 'servers', '', ',,', '__proto__,constructor,toString', 'variables,databases']) {
      assert.deepEqual(await api.attrs(`/servers/${id.one}?include=${encodeURIComponent(include)}`), plain, `include=${include} is ignored`);
    }
    const mixed = ((await api.call('GET', `/users/${id.alice}?include=bogus,servers, user`)) as Item).attributes.relationships;
    assert.deepEqual(Object.keys(mixed ?? {}), ['servers'], 'the known name is kept, the others ignored');
    // Fractal reads a nested name as its first level; the nested level is not expanded.
    const nested = ((await api.call('GET', `/servers/${id.one}?include=allocations.node`)) as Item).attributes.relationships;
    assert.deepEqual(Object.keys(nested ?? {}), ['allocations']);
    assert.equal('relationships' in ((nested?.['allocations'] as Page).data[0]?.attributes ?? {}), false);
  });
});

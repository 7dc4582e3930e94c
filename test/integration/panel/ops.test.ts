/**
 * The operations suite against the real panel process, part one: settings (typed defaults,
 * validation, the 5-minute cache flushed by a save, the audit entry), tags through the admin
 * session (forms and JSON), the application API (root-admin keys only: 403 in plain text
 * otherwise) and the client API (hidden until tags_visible_to_users), the naming pattern and its
 * preview, and templates with revisions, clones and favorites.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { adminSession, type AdminSession } from './admin-session.ts';
import { startPanel, type TestPanel } from './harness.ts';

type Item = { object: string; attributes: Record<string, unknown> };
type Errors = { errors: { code: string; status: string; detail: string; meta?: Record<string, unknown> }[] };
type Tag = { id: number; name: string; slug: string; color: string; icon: string | null; is_default: boolean; created_at: string; updated_at: string };
type Template = { id: number; name: string; category: string; description: string | null; is_default: boolean; config: Record<string, unknown>; favorited: boolean; revision: number };

const SETTINGS_FORM = {
  naming_pattern: '{egg}-{index} ({username})',
  allocation_page_size: '20',
  metrics_retention_days: '30',
  upgrade_cpu_threshold: '80',
  upgrade_ram_threshold: '81',
  upgrade_disk_threshold: '82',
  upgrade_window_hours: '48',
  upgrade_cooldown_hours: '100',
  upgrade_message: 'Consider a bigger plan.',
  health_crash_threshold: '3',
  health_window_hours: '12',
  health_retention_days: '14',
  node_pressure_warn_pct: '60',
  node_pressure_crit_pct: '80',
  bulk_move_enabled: 'on',
};

describe('panel operations suite: settings, tags, naming, templates', () => {
  let panel: TestPanel;
  let db: DatabaseSync;
  let web: AdminSession;
  let admin: string;
  let demoted: string;
  let owner: string;
  let helper: string;
  let stranger: string;
  let ownerId: number;
  let rootId: number;
  let server: { id: number; identifier: string };
  let eggId: number;
  let nodeId: number;
  let allocs: number[];

  const fieldsOf = (r: { body: unknown }): string[] => (r.body as Errors).errors.map((e) => String(e.meta?.source_field));
  const auditActions = (): string[] => (db.prepare('SELECT action FROM ops_audit_log ORDER BY id').all() as { action: string }[]).map((r) => r.action);
  const tags = async (): Promise<Tag[]> => web.json<Tag[]>('/admin/ops/tags/list');
  const templates = async (): Promise<Template[]> => web.json<Template[]>('/admin/ops/templates/options');

  before(async () => {
    panel = await startPanel();
    rootId = panel.createUser('root', { admin: true });
    const formerId = panel.createUser('formeradmin', { admin: true });
    ownerId = panel.createUser('owner');
    panel.createUser('helper');
    panel.createUser('stranger');
    admin = panel.createKey('root', 'application');
    demoted = panel.createKey('formeradmin', 'application');
    owner = panel.createKey('owner', 'client');
    helper = panel.createKey('helper', 'client');
    stranger = panel.createKey('stranger', 'client');
    db = new DatabaseSync(join(panel.dir, 'data', 'panel.sqlite'));
    db.exec('PRAGMA busy_timeout = 5000');
    web = await adminSession(panel.url, 'root', 'correct horse battery');

    const loc = (await panel.api(admin, 'POST', '/api/application/locations', { short: 'fra1' })).body as Item;
    const node = (await panel.api(admin, 'POST', '/api/application/nodes', { name: 'node-1', fqdn: 'node1.example.test', location_id: loc.attributes.id, memory: 8192 })).body as Item;
    nodeId = node.attributes.id as number;
    allocs = ((await panel.api(admin, 'POST', `/api/application/nodes/${nodeId}/allocations`, { ip: '127.0.0.1', ports: ['25565-25567'] })).body as { data: Item[] }).data.map((a) => a.attributes.id as number);
    const nest = ((await panel.api(admin, 'POST', '/api/application/nests', { name: 'Games' })).body as Item).attributes.id as number;
    eggId = ((await panel.api(admin, 'POST', `/api/application/nests/${nest}/eggs`, { name: 'Paper', docker_image: 'img:1', startup: 'run' })).body as Item).attributes.id as number;
    const r = await panel.api(admin, 'POST', '/api/application/servers', { name: 'One', user: ownerId, egg: eggId, limits: { memory: 512, swap: 0, disk: 1024, io: 500, cpu: 100 }, feature_limits: {}, allocation: { default: allocs[0] } });
    assert.equal(r.status, 201, r.text);
    server = (r.body as Item).attributes as unknown as { id: number; identifier: string };
    const sub = await panel.api(owner, 'POST', `/api/client/servers/${server.identifier}/users`, { email: 'helper@example.test', permissions: ['file.read'] });
    assert.equal(sub.status, 200, sub.text);
    // A key made while its user was a root admin; the user then loses the flag.
    const demote = await panel.api(admin, 'PATCH', `/api/application/users/${formerId}`, { root_admin: false });
    assert.equal(demote.status, 200, demote.text);
  });
  after(async () => {
    db?.close();
    await panel?.stop();
  });

  it('shows the default settings and saves a valid form with an audit entry', async () => {
    const page = await web.get('/admin/ops/settings');
    assert.equal(page.status, 200);
    assert.match(page.text, /value="\{server_id\} - \{username\}"/);
    assert.match(page.text, /name="node_pressure_crit_pct" type="number" value="90"/);
    assert.deepEqual(await web.json('/admin/ops/naming/pattern'), { pattern: '{server_id} - {username}' });

    const r = await web.post('/admin/ops/settings', SETTINGS_FORM);
    assert.equal(r.status, 303, r.text.slice(0, 1000));
    assert.equal(r.location, '/admin/ops/settings');
    const rows = Object.fromEntries((db.prepare('SELECT key, value FROM ops_settings').all() as { key: string; value: string }[]).map((x) => [x.key, x.value]));
    assert.equal(rows.allocation_page_size, '20');
    assert.equal(rows.bulk_move_enabled, '1');
    assert.equal(rows.upgrade_message, 'Consider a bigger plan.');
    assert.equal(rows.tags_visible_to_users, undefined, 'the settings form leaves tag visibility alone');
    assert.deepEqual(await web.json('/admin/ops/naming/pattern'), { pattern: '{egg}-{index} ({username})' }, 'a save flushes the cache at once');
    const entry = db.prepare("SELECT actor_id, payload FROM ops_audit_log WHERE action = 'settings.updated'").get() as { actor_id: number; payload: string };
    assert.equal(entry.actor_id, rootId);
    assert.equal((JSON.parse(entry.payload) as Record<string, unknown>).node_pressure_warn_pct, 60);
    assert.match((await web.get('/admin/ops/settings')).text, /Operations settings saved/);

    // Unchecked box saves false: the key is a required boolean and a form sends nothing for it.
    const off = await web.post('/admin/ops/settings', { ...SETTINGS_FORM, bulk_move_enabled: '' });
    assert.equal(off.status, 303);
    assert.equal((db.prepare("SELECT value FROM ops_settings WHERE key = 'bulk_move_enabled'").get() as { value: string }).value, '0');
  });

  it('refuses settings outside their ranges, naming every bad field, and keeps warn above crit', async () => {
    const bad = await web.post('/admin/ops/settings', {
      ...SETTINGS_FORM,
      naming_pattern: '',
      allocation_page_size: '9',
      metrics_retention_days: '3651',
      upgrade_cpu_threshold: '0',
      upgrade_message: 'x'.repeat(501),
      health_window_hours: '169',
      node_pressure_warn_pct: '100',
    });
    assert.equal(bad.status, 422);
    for (const text of [
      /the naming_pattern field is required/,
      /the allocation_page_size field must be at least 10/,
      /the metrics_retention_days field must not be greater than 3650/,
      /the upgrade_cpu_threshold field must be at least 1/,
      /the upgrade_message field must not be longer than 500 characters/,
      /the health_window_hours field must not be greater than 168/,
      /the node_pressure_warn_pct field must not be greater than 99/,
    ]) assert.match(bad.text, text);
    assert.equal((db.prepare("SELECT value FROM ops_settings WHERE key = 'allocation_page_size'").get() as { value: string }).value, '20', 'nothing was saved');

    const json = await web.request('POST', '/admin/ops/settings', { naming_pattern: 'x' });
    assert.equal(json.status, 422);
    assert.ok(fieldsOf(json).includes('bulk_move_enabled') && fieldsOf(json).includes('health_retention_days'), 'every key but tag visibility is required');

    const inverse = await web.post('/admin/ops/settings', { ...SETTINGS_FORM, node_pressure_warn_pct: '95', node_pressure_crit_pct: '50' });
    assert.equal(inverse.status, 303, 'the order of warn and crit is not validated');
    assert.equal(auditActions().filter((a) => a === 'settings.updated').length, 3);
  });

  it('reads settings through a cache, so a direct row edit waits for the next save', async () => {
    db.prepare("UPDATE ops_settings SET value = 'edited {index}' WHERE key = 'naming_pattern'").run();
    assert.deepEqual(await web.json('/admin/ops/naming/pattern'), { pattern: '{egg}-{index} ({username})' });
    assert.equal((await web.post('/admin/ops/settings', SETTINGS_FORM)).status, 303);
    assert.deepEqual(await web.json('/admin/ops/naming/pattern'), { pattern: '{egg}-{index} ({username})' });
  });

  it('previews names with the pattern and the caller values', async () => {
    const r = await web.request('POST', '/admin/ops/naming/preview', { owner_id: ownerId, egg_id: eggId, node_id: nodeId, index: 4 });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.body, { name: 'Paper-4 (owner)', pattern: '{egg}-{index} ({username})' });
    const unknown = await web.request('POST', '/admin/ops/naming/preview', {});
    assert.deepEqual(unknown.body, { name: 'unknown-1 (admin)', pattern: '{egg}-{index} ({username})' });
    const bad = await web.request('POST', '/admin/ops/naming/preview', { index: 'two', memory: -1 });
    assert.equal(bad.status, 422);
    assert.deepEqual(fieldsOf(bad).sort(), ['index', 'memory']);

    await web.post('/admin/ops/settings', { ...SETTINGS_FORM, naming_pattern: '{server_id}/{ram} {disk} {cpu} {node} <b>' });
    const tokens = await web.request('POST', '/admin/ops/naming/preview', { node_id: nodeId, memory: 2048, disk: 4096, cpu: 150, batch_offset: 2 });
    const next = ((db.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'servers'").get() as { seq: number }).seq) + 1;
    assert.equal((tokens.body as { name: string }).name, `${next + 2}2048MB 4096MB 150 node-1 b`, 'slash, percent and angle brackets are removed');
    await web.post('/admin/ops/settings', SETTINGS_FORM);
  });

  it('creates, edits and deletes tags through forms and JSON, with slugs and validation', async () => {
    assert.equal((await web.get('/admin/ops/tags')).status, 200);
    const created = await web.post('/admin/ops/tags', { name: 'Premium Plan!', color: '#AA00ff', icon: 'star', is_default: '' });
    assert.equal(created.status, 303);
    assert.equal(created.location, '/admin/ops/tags');
    const again = await web.post('/admin/ops/tags', { name: 'premium plan', color: '#00aa00' });
    assert.equal(again.status, 303);
    let list = await tags();
    assert.deepEqual(list.map((t) => [t.name, t.slug, t.color, t.icon, t.is_default]), [['premium plan', 'premium-plan-2', '#00aa00', null, false], ['Premium Plan!', 'premium-plan', '#aa00ff', 'star', false]]);
    assert.deepEqual(Object.keys(list[0] as Tag).sort(), ['color', 'created_at', 'icon', 'id', 'is_default', 'name', 'slug', 'updated_at']);

    const bad = await web.request('POST', '/admin/ops/tags', { name: 'n'.repeat(61), slug: 'has space', color: 'red', icon: 'i'.repeat(41), is_default: 'yes' });
    assert.equal(bad.status, 422);
    assert.deepEqual(fieldsOf(bad).sort(), ['color', 'icon', 'is_default', 'name', 'slug']);
    const taken = await web.request('POST', '/admin/ops/tags', { name: 'Other', slug: 'premium-plan', color: '#000000' });
    assert.equal(taken.status, 422);
    assert.deepEqual(fieldsOf(taken), ['slug']);
    const formBad = await web.post('/admin/ops/tags', { name: 'Bad', color: 'blue' });
    assert.equal(formBad.status, 303);
    assert.match((await web.get('/admin/ops/tags')).text, /the color field must be a colour like #1d5fbf/);

    const first = list.find((t) => t.slug === 'premium-plan') as Tag;
    const put = await web.request('PUT', `/admin/ops/tags/${first.id}`, { name: 'Premium', slug: 'premium', color: '#123456', icon: null, is_default: true });
    assert.equal(put.status, 303);
    const second = list.find((t) => t.slug === 'premium-plan-2') as Tag;
    const formPut = await web.post(`/admin/ops/tags/${second.id}`, { _method: 'PUT', name: 'Basic', slug: '', color: '#654321' });
    assert.equal(formPut.status, 303);
    list = await tags();
    assert.deepEqual(list.map((t) => [t.name, t.slug, t.color, t.is_default]), [['Basic', 'basic', '#654321', false], ['Premium', 'premium', '#123456', true]]);
    assert.equal((await web.request('PUT', '/admin/ops/tags/9999', { name: 'x', color: '#000000' })).status, 404);

    const third = await web.request('POST', '/admin/ops/tags', { name: 'Doomed', color: '#ffffff' });
    assert.equal(third.status, 303);
    const doomed = (await tags()).find((t) => t.name === 'Doomed') as Tag;
    assert.equal((await web.request('DELETE', `/admin/ops/tags/${doomed.id}`)).status, 303);
    const fourth = await web.post('/admin/ops/tags', { name: 'Doomed too', color: '#ffffff' });
    assert.equal(fourth.status, 303);
    const doomed2 = (await tags()).find((t) => t.name === 'Doomed too') as Tag;
    assert.equal((await web.post(`/admin/ops/tags/${doomed2.id}`, { _method: 'DELETE' })).status, 303);
    assert.deepEqual((await tags()).map((t) => t.name), ['Basic', 'Premium']);
    assert.deepEqual(auditActions().filter((a) => a.startsWith('tag.')), ['tag.created', 'tag.created', 'tag.updated', 'tag.updated', 'tag.created', 'tag.deleted', 'tag.created', 'tag.deleted']);
  });

  it('syncs the tags of a server and reads them per server', async () => {
    const [basic, premium] = await tags();
    assert.ok(basic !== undefined && premium !== undefined);
    const sync = await web.request('POST', `/admin/ops/tags/server/${server.id}`, { tag_ids: [basic.id, premium.id] });
    assert.equal(sync.status, 200, sync.text);
    assert.deepEqual(sync.body, { success: true });
    const map = await web.json<Record<string, unknown[]>>(`/admin/ops/tags/by-servers?ids=${server.id},9999`);
    assert.deepEqual(map, { [server.id]: [{ id: basic.id, name: 'Basic', color: '#654321', icon: null }, { id: premium.id, name: 'Premium', color: '#123456', icon: null }], 9999: [] });
    const missing = await web.request('POST', `/admin/ops/tags/server/${server.id}`, { tag_ids: [premium.id, 777] });
    assert.equal(missing.status, 422);
    assert.match((missing.body as Errors).errors[0]?.detail ?? '', /tags that do not exist: 777/);
    assert.equal((await web.request('POST', `/admin/ops/tags/server/${server.id}`, {})).status, 422, 'tag_ids is required');
    assert.equal((await web.request('POST', '/admin/ops/tags/server/9999', { tag_ids: [] })).status, 404);
    assert.equal((await web.request('GET', '/admin/ops/tags/by-servers?ids=1,x')).status, 422);
    assert.equal((await web.request('POST', `/admin/ops/tags/server/${server.id}`, { tag_ids: [premium.id] })).status, 200);

    // Any server create may carry ops_tag_ids: checked before the server is written, synced after.
    const body = { name: 'Tagged', user: ownerId, egg: eggId, limits: { memory: 1, swap: 0, disk: 1, io: 500, cpu: 1 }, feature_limits: {}, allocation: { default: allocs[1] } };
    const refused = await panel.api(admin, 'POST', '/api/application/servers', { ...body, ops_tag_ids: [basic.id, 31337] });
    assert.equal(refused.status, 422);
    assert.deepEqual(fieldsOf(refused), ['ops_tag_ids']);
    assert.equal((db.prepare("SELECT COUNT(*) AS n FROM servers WHERE name = 'Tagged'").get() as { n: number }).n, 0);
    const tagged = await panel.api(admin, 'POST', '/api/application/servers', { ...body, ops_tag_ids: [basic.id] });
    assert.equal(tagged.status, 201, tagged.text);
    const taggedId = (tagged.body as Item).attributes.id as number;
    assert.deepEqual(Object.keys(await web.json<Record<string, unknown[]>>(`/admin/ops/tags/by-servers?ids=${taggedId}`)), [String(taggedId)]);
    assert.deepEqual((await web.json<Record<string, { id: number }[]>>(`/admin/ops/tags/by-servers?ids=${taggedId}`))[taggedId]?.map((t) => t.id), [basic.id]);
    const plain = await panel.api(admin, 'POST', '/api/application/servers', { ...body, name: 'Plain', allocation: { default: allocs[2] } });
    assert.equal(plain.status, 201);
    const plainId = (plain.body as Item).attributes.id as number;
    assert.deepEqual((await web.json<Record<string, { id: number }[]>>(`/admin/ops/tags/by-servers?ids=${plainId}`))[plainId]?.map((t) => t.id), [premium.id], 'the default tag (Premium) goes to a server created without ops_tag_ids');
  });

  it('shows server tags to owners and subusers only when tags_visible_to_users is on', async () => {
    const path = `/api/client/servers/${server.identifier}/tags`;
    assert.deepEqual((await panel.api(owner, 'GET', path)).body, { visible: false, tags: [] });
    const on = await web.post('/admin/ops/tags/settings', { tags_visible_to_users: 'on' });
    assert.equal(on.status, 303);
    const seen = (await panel.api(owner, 'GET', path)).body as { visible: boolean; tags: Tag[] };
    assert.equal(seen.visible, true);
    assert.deepEqual(seen.tags.map((t) => [t.name, t.slug, t.is_default]), [['Premium', 'premium', true]]);
    assert.deepEqual(Object.keys(seen.tags[0] as Tag).sort(), ['color', 'created_at', 'icon', 'id', 'is_default', 'name', 'slug', 'updated_at']);
    assert.deepEqual(((await panel.api(helper, 'GET', path)).body as { tags: Tag[] }).tags.length, 1, 'a subuser with any permission sees them');
    assert.equal((await panel.api(stranger, 'GET', path)).status, 404);
    assert.equal((await panel.api(owner, 'POST', path, {})).status, 404, 'tags are read-only for clients');
    const json = await web.request('POST', '/admin/ops/tags/settings', { tags_visible_to_users: null });
    assert.equal(json.status, 303);
    assert.deepEqual((await panel.api(owner, 'GET', path)).body, { visible: false, tags: [] }, 'null reads as hidden');
    assert.equal((await web.request('POST', '/admin/ops/tags/settings', { tags_visible_to_users: 'maybe' })).status, 422);
  });

  it('serves tags on the application API to root-admin keys only', async () => {
    const list = await panel.api(admin, 'GET', '/api/application/ops/tags');
    assert.equal(list.status, 200);
    assert.deepEqual((list.body as Tag[]).map((t) => t.name), ['Basic', 'Premium']);
    const created = await panel.api(admin, 'POST', '/api/application/ops/tags', { name: 'API', color: '#0000ff', is_default: false });
    assert.equal(created.status, 201, created.text);
    const tag = created.body as Tag;
    assert.equal(tag.slug, 'api');
    const bad = await panel.api(admin, 'POST', '/api/application/ops/tags', { name: '', color: '#0000ff' });
    assert.equal(bad.status, 422);
    assert.equal((bad.body as Errors).errors[0]?.code, 'ValidationException');
    const put = await panel.api(admin, 'PUT', `/api/application/ops/tags/${tag.id}`, { name: 'API 2', color: '#0000aa' });
    assert.equal(put.status, 200);
    assert.equal((put.body as Tag).name, 'API 2');
    assert.equal((await panel.api(admin, 'DELETE', `/api/application/ops/tags/${tag.id}`)).status, 204);
    assert.equal((await panel.api(admin, 'DELETE', `/api/application/ops/tags/${tag.id}`)).status, 404);
    assert.equal((await panel.api(admin, 'DELETE', '/api/application/ops/tags/abc')).status, 404);

    for (const [method, path] of [['GET', '/tags'], ['POST', '/tags'], ['GET', '/templates'], ['POST', '/bulk'], ['GET', '/search?q=a'], ['GET', '/health/nodes/1'], ['GET', '/settings']] as const) {
      const r = await panel.api(demoted, method, `/api/application/ops${path}`, method === 'POST' ? {} : undefined);
      assert.equal(r.status, 403, `${method} ${path}`);
      assert.equal(r.text, 'Root administrator access is required to use the operations API.');
    }
    assert.equal((await fetch(`${panel.url}/api/application/ops/tags`, { headers: { authorization: `Bearer ${demoted}` } })).headers.get('content-type'), 'text/plain; charset=utf-8');
    assert.equal((await panel.api(demoted, 'GET', '/api/application/users')).status, 401, 'the core application API still answers such a key 401');
    assert.equal((await panel.api('hka_nope', 'GET', '/api/application/ops/tags')).status, 401);
    assert.equal((await panel.api(owner, 'GET', '/api/application/ops/tags')).status, 401, 'a client key is not an application key');
    const settings = await panel.api(admin, 'GET', '/api/application/ops/settings');
    assert.equal(settings.status, 200);
    assert.match(settings.text, /<th>allocation_page_size<\/th><td>20<\/td>/);
    // An HTML page outside the web scope carries the pages' security headers all the same.
    const headers = (await fetch(`${panel.url}/api/application/ops/settings`, { headers: { authorization: `Bearer ${admin}` } })).headers;
    assert.match(headers.get('content-security-policy') ?? '', /frame-ancestors 'none'/);
    assert.equal(headers.get('x-content-type-options'), 'nosniff');
  });

  it('keeps templates with revisions, clones, favorites and stripped configs', async () => {
    assert.equal((await web.get('/admin/ops/templates')).status, 200);
    const [basic] = await tags();
    const created = await web.request('POST', '/admin/ops/templates', {
      name: 'Small',
      category: 'Minecraft',
      description: '',
      config: { memory: 1024, disk: 2048, startup: '', image: null, tag_ids: [], unknown_key: 5, oom_disabled: true, tag_ids_extra: 1, egg_id: eggId },
    });
    assert.equal(created.status, 303, created.text);
    let [small] = await templates();
    assert.ok(small !== undefined);
    assert.deepEqual(small.config, { memory: 1024, disk: 2048, oom_disabled: true, egg_id: eggId }, 'empty values and unknown keys are dropped');
    assert.equal(small.description, null);
    assert.equal(small.revision, 1);

    const saved = await web.request('POST', `/admin/ops/templates/${small.id}/save`, { name: 'Small+', category: 'Minecraft', description: 'More disk', is_default: true, config: { memory: 1024, disk: 4096, tag_ids: [basic?.id] } });
    assert.equal(saved.status, 303);
    const revised = await web.post(`/admin/ops/templates/${small.id}/revision`, { config: '{"memory": 2048}' });
    assert.equal(revised.status, 303);
    [small] = await templates();
    assert.ok(small !== undefined);
    assert.deepEqual([small.name, small.description, small.is_default, small.revision, small.config], ['Small+', 'More disk', true, 3, { memory: 2048 }]);
    assert.equal((db.prepare('SELECT COUNT(*) AS n FROM ops_template_revisions WHERE template_id = ?').get(small.id) as { n: number }).n, 3);

    const badJson = await web.post(`/admin/ops/templates/${small.id}/revision`, { config: '{not json' });
    assert.equal(badJson.status, 303);
    assert.match((await web.get('/admin/ops/templates')).text, /the config field must be a JSON object/);
    const bad = await web.request('POST', '/admin/ops/templates', { name: 'x'.repeat(101), description: 'd'.repeat(501), config: { io: 5, tag_ids: [4242] } });
    assert.equal(bad.status, 422);
    assert.deepEqual(fieldsOf(bad).sort(), ['category', 'config.io', 'description', 'name']);
    const badTags = await web.request('POST', '/admin/ops/templates', { name: 'T', category: 'C', config: { tag_ids: [4242] } });
    assert.equal(badTags.status, 422);
    assert.deepEqual(fieldsOf(badTags), ['config.tag_ids']);

    assert.equal((await web.request('POST', `/admin/ops/templates/${small.id}/clone`, { name: 'Small copy' })).status, 303);
    assert.equal((await web.post(`/admin/ops/templates/${small.id}/clone`)).status, 303);
    const all = await templates();
    assert.deepEqual(all.map((t) => [t.name, t.revision, t.is_default]), [['Small copy', 1, false], ['Small+', 3, true], ['Small+ (copy)', 1, false]]);
    assert.deepEqual(all[0]?.config, { memory: 2048 });

    const fav = await web.request('POST', `/admin/ops/templates/${small.id}/favorite`);
    assert.deepEqual(fav.body, { favorited: true });
    assert.equal((await templates()).find((t) => t.id === small?.id)?.favorited, true);
    assert.deepEqual((await web.request('POST', `/admin/ops/templates/${small.id}/favorite`)).body, { favorited: false });
    assert.equal((await web.request('POST', '/admin/ops/templates/9999/favorite')).status, 404);

    const copy = all[2] as Template;
    assert.equal((await web.post(`/admin/ops/templates/${copy.id}`, { _method: 'DELETE' })).status, 303);
    const other = all[0] as Template;
    assert.equal((await web.request('DELETE', `/admin/ops/templates/${other.id}`)).status, 303);
    assert.deepEqual((await templates()).map((t) => t.name), ['Small+']);

    const api = await panel.api(admin, 'POST', '/api/application/ops/templates', { name: 'API made', category: 'Other', config: { cpu: 200 } });
    assert.equal(api.status, 201, api.text);
    assert.deepEqual([(api.body as Template).name, (api.body as Template).revision, (api.body as Template).config], ['API made', 1, { cpu: 200 }]);
    assert.deepEqual(((await panel.api(admin, 'GET', '/api/application/ops/templates')).body as Template[]).map((t) => t.name), ['Small+', 'API made']);
    assert.deepEqual(auditActions().filter((a) => a.startsWith('template.')), ['template.created', 'template.saved', 'template.revision', 'template.cloned', 'template.cloned', 'template.deleted', 'template.deleted', 'template.created']);
  });

  it('cuts the default name of a clone by characters, never inside an emoji', async () => {
    const long = '\u{1F600}'.repeat(100);
    assert.equal((await web.request('POST', '/admin/ops/templates', { name: long, category: 'Emoji', config: {} })).status, 303);
    const source = (await templates()).find((t) => t.name === long);
    assert.ok(source !== undefined);
    assert.equal((await web.request('POST', `/admin/ops/templates/${source.id}/clone`)).status, 303);
    const copy = (await templates()).find((t) => t.id !== source.id && t.category === 'Emoji');
    assert.equal(copy?.name, `${'\u{1F600}'.repeat(93)} (copy)`);
    for (const t of [source, copy]) assert.equal((await web.request('DELETE', `/admin/ops/templates/${t?.id ?? 0}`)).status, 303);
  });

  it('keeps every admin route behind the admin session', async () => {
    for (const path of ['/admin/ops', '/admin/ops/settings', '/admin/ops/tags/list', '/admin/ops/templates/options']) {
      const r = await fetch(`${panel.url}${path}`, { redirect: 'manual', headers: { accept: 'application/json' } });
      assert.equal(r.status, 401, path);
    }
    const noCsrf = await fetch(`${panel.url}/admin/ops/tags`, { method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/json', accept: 'application/json' }, body: '{}' });
    assert.equal(noCsrf.status, 403, 'a change without the CSRF token is refused before anything else');
    assert.equal(((await noCsrf.json()) as Errors).errors[0]?.code, 'AccessDeniedHttpException');
    const dash = await web.get('/admin/ops');
    assert.equal(dash.status, 200);
    for (const href of ['/admin/ops/multicreate', '/admin/ops/tags', '/admin/ops/templates', '/admin/ops/health', '/admin/ops/audit', '/admin/ops/settings']) assert.ok(dash.text.includes(`href="${href}"`), href);
    assert.match((await web.get('/admin')).text, /<a href="\/admin\/ops" class="">Operations<\/a>/);
  });

  it('answers JSON clients of bodiless deletes and clones with 404 for unknown ids', async () => {
    for (const [method, path] of [['DELETE', '/admin/ops/tags/999'], ['DELETE', '/admin/ops/tags/abc'], ['DELETE', '/admin/ops/templates/999'], ['POST', '/admin/ops/templates/999/clone']] as const) {
      const r = await web.request(method, path);
      assert.equal(r.status, 404, `${method} ${path}`);
      assert.equal((r.body as Errors).errors[0]?.code, 'NotFoundHttpException', `${method} ${path}`);
    }
    const form = await web.post('/admin/ops/tags/999', { _method: 'DELETE' });
    assert.equal(form.status, 303, 'a browser form still gets the page back with a notice');
    assert.match((await web.get('/admin/ops/tags')).text, /not found/);
  });

  it('refuses whitespace-only required strings and trims the others', async () => {
    const blankTag = await panel.api(admin, 'POST', '/api/application/ops/tags', { name: '   ', color: '#112233' });
    assert.equal(blankTag.status, 422);
    assert.deepEqual(fieldsOf(blankTag), ['name']);
    assert.match((blankTag.body as Errors).errors[0]?.detail ?? '', /the name field is required/);
    const spaced = await panel.api(admin, 'POST', '/api/application/ops/tags', { name: '  Spaced  ', color: ' #112233 ', slug: '  ' });
    assert.equal(spaced.status, 201, spaced.text);
    assert.deepEqual([(spaced.body as Tag).name, (spaced.body as Tag).slug, (spaced.body as Tag).color], ['Spaced', 'spaced', '#112233']);
    assert.equal((await panel.api(admin, 'DELETE', `/api/application/ops/tags/${(spaced.body as Tag).id}`)).status, 204);

    const blankTemplate = await web.request('POST', '/admin/ops/templates', { name: ' \t ', category: '  ' });
    assert.equal(blankTemplate.status, 422);
    assert.deepEqual(fieldsOf(blankTemplate).sort(), ['category', 'name']);
    const typed = Object.fromEntries(Object.entries(SETTINGS_FORM).map(([k, v]) => [k, k === 'bulk_move_enabled' ? true : /^\d+$/.test(v) ? Number(v) : v]));
    const blankSettings = await web.request('POST', '/admin/ops/settings', { ...typed, naming_pattern: '   ', upgrade_message: '\n ' });
    assert.equal(blankSettings.status, 422);
    assert.deepEqual(fieldsOf(blankSettings).sort(), ['naming_pattern', 'upgrade_message']);
    const trimmed = await web.request('POST', '/admin/ops/settings', { ...typed, naming_pattern: '  {server_id} - {username}  ' });
    assert.equal(trimmed.status, 303, trimmed.text);
    assert.deepEqual(await web.json('/admin/ops/naming/pattern'), { pattern: '{server_id} - {username}' });
    await web.post('/admin/ops/settings', SETTINGS_FORM);
  });

  it('keeps a tag slug on an update without one and accepts Unicode slugs', async () => {
    const made = await panel.api(admin, 'POST', '/api/application/ops/tags', { name: 'Stable', color: '#101010' });
    assert.equal(made.status, 201, made.text);
    const tag = made.body as Tag;
    assert.equal(tag.slug, 'stable');
    const renamed = await panel.api(admin, 'PUT', `/api/application/ops/tags/${tag.id}`, { name: 'Renamed', color: '#101010' });
    assert.equal(renamed.status, 200, renamed.text);
    assert.equal((renamed.body as Tag).slug, 'stable', 'an update without slug keeps it');
    const cleared = await panel.api(admin, 'PUT', `/api/application/ops/tags/${tag.id}`, { name: 'Renamed', color: '#101010', slug: null });
    assert.equal((cleared.body as Tag).slug, 'renamed', 'a null slug is made from the name again');
    const unicode = await panel.api(admin, 'PUT', `/api/application/ops/tags/${tag.id}`, { name: 'Café', color: '#101010', slug: 'café_ü-1' });
    assert.equal(unicode.status, 200, unicode.text);
    assert.equal((unicode.body as Tag).slug, 'café_ü-1');
    const derived = await panel.api(admin, 'POST', '/api/application/ops/tags', { name: 'Crème brûlée', color: '#101010' });
    assert.equal((derived.body as Tag).slug, 'creme-brulee');
    assert.equal((await panel.api(admin, 'POST', '/api/application/ops/tags', { name: 'X', color: '#101010', slug: 'no/slash' })).status, 422);
    for (const t of [tag, derived.body as Tag]) assert.equal((await panel.api(admin, 'DELETE', `/api/application/ops/tags/${t.id}`)).status, 204);
  });

  it('refuses malformed tag queries and bodies with 422 and authenticates before parsing', async () => {
    for (const q of ['ids[]=1', 'ids=1&ids=2', 'ids[0]=1']) {
      const r = await web.request('GET', `/admin/ops/tags/by-servers?${q}`);
      assert.equal(r.status, 422, q);
      assert.deepEqual(fieldsOf(r), ['ids'], q);
    }
    assert.deepEqual(await web.json('/admin/ops/tags/by-servers?ids='), {});
    const many = await web.request('POST', `/admin/ops/tags/server/${server.id}`, { tag_ids: Array.from({ length: 101 }, (_, i) => i + 1) });
    assert.equal(many.status, 422);
    assert.match((many.body as Errors).errors[0]?.detail ?? '', /at most 100 tag ids/);
    const array = await web.request('POST', '/admin/ops/tags', [{ name: 'x', color: '#000000' }]);
    assert.equal(array.status, 422);
    assert.match((array.body as Errors).errors[0]?.detail ?? '', /the request body must be a JSON object/);
    assert.equal((await panel.api(admin, 'POST', '/api/application/ops/tags', ['x'])).status, 422);

    const raw = async (key: string | undefined): Promise<{ status: number; text: string }> => {
      const r = await fetch(`${panel.url}/api/application/ops/tags`, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json', ...(key === undefined ? {} : { authorization: `Bearer ${key}` }) }, body: '{"name":' });
      return { status: r.status, text: await r.text() };
    };
    const demotedRaw = await raw(demoted);
    assert.deepEqual(demotedRaw, { status: 403, text: 'Root administrator access is required to use the operations API.' });
    assert.equal((await raw(undefined)).status, 401);
    assert.equal((await raw('hka_nope')).status, 401);
    assert.equal((await raw(admin)).status, 400, 'a root-admin key reaches the body parser');
  });

  it('keeps the icon and default flag of a tag on an update that leaves them out', async () => {
    const made = await panel.api(admin, 'POST', '/api/application/ops/tags', { name: 'Staging', color: '#123456', icon: 'flask', is_default: true });
    assert.equal(made.status, 201, made.text);
    const id = (made.body as Tag).id;
    const put = async (body: Record<string, unknown>): Promise<Tag> => {
      const r = await panel.api(admin, 'PUT', `/api/application/ops/tags/${id}`, body);
      assert.equal(r.status, 200, r.text);
      return r.body as Tag;
    };
    const renamed = await put({ name: 'Staging2', color: '#123456' });
    assert.deepEqual([renamed.name, renamed.slug, renamed.icon, renamed.is_default], ['Staging2', 'staging', 'flask', true], 'fields left out keep their stored values');
    const noIcon = await put({ name: 'Staging2', color: '#123456', icon: null });
    assert.deepEqual([noIcon.icon, noIcon.is_default], [null, true], 'an explicit null icon clears it');
    const off = await put({ name: 'Staging2', color: '#123456', icon: 'flask', is_default: false });
    assert.deepEqual([off.icon, off.is_default], ['flask', false]);

    // The edit form sends every field: its blank icon clears it and its unchecked box is false.
    await put({ name: 'Staging2', color: '#123456', is_default: true });
    const form = await web.post(`/admin/ops/tags/${id}`, { _method: 'PUT', name: 'Staging3', slug: 'staging', color: '#123456', icon: '' });
    assert.equal(form.status, 303);
    const edited = (await tags()).find((t) => t.id === id) as Tag;
    assert.deepEqual([edited.name, edited.icon, edited.is_default], ['Staging3', null, false]);
    assert.equal((await panel.api(admin, 'DELETE', `/api/application/ops/tags/${id}`)).status, 204);
  });

  it('answers JSON clients of unknown paths under /admin/ops with the 404 envelope', async () => {
    for (const [method, path] of [
      ['GET', '/admin/ops/health/servers/1'],
      ['GET', '/admin/ops/analytics/series/1'],
      ['POST', '/admin/ops/analytics/recommendations/1/dismiss'],
      ['GET', '/admin/ops/tags/1'],
      ['DELETE', '/admin/ops/settings'],
    ] as const) {
      const r = await web.request(method, path);
      assert.equal(r.status, 404, `${method} ${path}`);
      assert.deepEqual(r.body, { errors: [{ code: 'NotFoundHttpException', status: '404', detail: 'the requested route was not found' }] }, `${method} ${path}`);
    }
    const page = await web.get('/admin/ops/analytics/series/1');
    assert.equal(page.status, 404);
    assert.match(page.text, /<h1>404 · Not found<\/h1><p>page not found<\/p>/, 'a browser still gets the panel 404 page');
    const anonymous = await fetch(`${panel.url}/admin/ops/analytics/series/1`, { redirect: 'manual', headers: { accept: 'application/json' } });
    assert.equal(anonymous.status, 401, 'the admin session is checked first');
  });
});

/**
 * The operations suite against the real panel process, part two, where servers change:
 * multi-create (JSON and the page's form, 50 at most, per-entry failures, pattern names, tags),
 * the allocation picker (cursor pages, next/prev/random, recents), search, the activity feed and
 * the audit page, bulk operations on the `ops` queue and inside the request with OPS_BULK_SYNC
 * (suspend, unsuspend, delete, move, tags; power and reinstall failing per item without a
 * daemon), and node health with recommendations, on both the admin session and the application API.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';
import { startHostkit } from '../hostkit-process.ts';
import { adminSession, type AdminSession } from './admin-session.ts';
import { startPanel, type TestPanel } from './harness.ts';

type Item = { object: string; attributes: Record<string, unknown> };
type Errors = { errors: { code: string; status: string; detail: string; meta?: Record<string, unknown> }[] };
type Result = { success: boolean; name: string; id?: number; error?: string };
type Allocation = { id: number; node_id: number; ip: string; port: number; assigned: boolean; server_id: number | null };
type Job = { uuid: string; type: string; label: string; status: string; total: number; processed: number; failed: number; skipped: number; succeeded: number; progress_pct: number; started_at: string | null; finished_at: string | null; items: { server_id: number; status: string; error: string | null }[] };
type ServerRow = { id: number; name: string; node_id: number; allocation_id: number; suspended: number; memory: number };

const SETTINGS_FORM = {
  naming_pattern: '{server_id} - {username}',
  allocation_page_size: '50',
  metrics_retention_days: '90',
  upgrade_cpu_threshold: '85',
  upgrade_ram_threshold: '85',
  upgrade_disk_threshold: '90',
  upgrade_window_hours: '72',
  upgrade_cooldown_hours: '168',
  upgrade_message: 'Bigger plan?',
  health_crash_threshold: '5',
  health_window_hours: '24',
  health_retention_days: '30',
  node_pressure_warn_pct: '75',
  node_pressure_crit_pct: '90',
};

/** Location, two nodes (10 and 5 ports), a nest and an egg, through the application API. */
async function infrastructure(panel: TestPanel, key: string): Promise<{ nodeA: number; nodeB: number; egg: number; nest: number; allocsA: number[]; allocsB: number[] }> {
  const loc = (await panel.api(key, 'POST', '/api/application/locations', { short: 'fra1' })).body as Item;
  const node = async (name: string, memory: number): Promise<number> => ((await panel.api(key, 'POST', '/api/application/nodes', { name, fqdn: `${name}.example.test`, location_id: loc.attributes.id, memory })).body as Item).attributes.id as number;
  const nodeA = await node('node-a', 4096);
  const nodeB = await node('node-b', 8192);
  const ports = async (n: number, spec: string): Promise<number[]> => ((await panel.api(key, 'POST', `/api/application/nodes/${n}/allocations`, { ip: '127.0.0.1', ports: [spec] })).body as { data: Item[] }).data.map((a) => a.attributes.id as number);
  const allocsA = await ports(nodeA, '25565-25574');
  const allocsB = await ports(nodeB, '30000-30004');
  const nest = ((await panel.api(key, 'POST', '/api/application/nests', { name: 'Games' })).body as Item).attributes.id as number;
  const egg = ((await panel.api(key, 'POST', `/api/application/nests/${nest}/eggs`, { name: 'Paper', docker_image: 'img:1', startup: 'run' })).body as Item).attributes.id as number;
  return { nodeA, nodeB, egg, nest, allocsA, allocsB };
}

describe('panel operations suite: multi-create, allocations, search, activity, bulk, health', () => {
  let panel: TestPanel;
  let db: DatabaseSync;
  let web: AdminSession;
  let admin: string;
  let ownerId: number;
  let rootId: number;
  let infra: Awaited<ReturnType<typeof infrastructure>>;
  let tagGold: number;
  let tagDefault: number;
  let created: number[] = [];

  const server = (id: number): ServerRow | undefined => db.prepare('SELECT id, name, node_id, allocation_id, suspended, memory FROM servers WHERE id = ?').get(id) as ServerRow | undefined;
  const tagsOf = (id: number): number[] => (db.prepare('SELECT tag_id FROM ops_server_tags WHERE server_id = ? ORDER BY tag_id').all(id) as { tag_id: number }[]).map((r) => r.tag_id);
  const fieldsOf = (r: { body: unknown }): string[] => (r.body as Errors).errors.map((e) => String(e.meta?.source_field));
  /** The id SQLite gives the next server: the `{server_id}` of a pattern name. */
  const nextId = (): number => ((db.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'servers'").get() as { seq: number } | undefined)?.seq ?? 0) + 1;
  const entry = (over: Record<string, unknown> = {}): Record<string, unknown> => ({ owner_id: ownerId, node_id: infra.nodeA, nest_id: infra.nest, egg_id: infra.egg, memory: 512, swap: 0, disk: 1024, io: 500, cpu: 100, environment: { MOTD: 'hi' }, ...over });
  const untilFinished = async (uuid: string, get: (path: string) => Promise<Job>, path = `/admin/ops/bulk/${uuid}`): Promise<Job> => {
    for (let i = 0; i < 200; i++) {
      const job = await get(path);
      if (job.status === 'finished') return job;
      await sleep(25);
    }
    throw new Error(`bulk job ${uuid} did not finish`);
  };
  const webJob = (path: string): Promise<Job> => web.json<Job>(path);
  const bulk = async (body: Record<string, unknown>): Promise<Job> => {
    const r = await web.request('POST', '/admin/ops/bulk', body);
    assert.equal(r.status, 202, r.text);
    const started = r.body as { uuid: string; total: number; status: string };
    assert.deepEqual(Object.keys(started).sort(), ['status', 'total', 'uuid']);
    return untilFinished(started.uuid, webJob);
  };

  before(async () => {
    panel = await startPanel();
    rootId = panel.createUser('root', { admin: true });
    ownerId = panel.createUser('owner');
    admin = panel.createKey('root', 'application');
    db = new DatabaseSync(join(panel.dir, 'data', 'panel.sqlite'));
    db.exec('PRAGMA busy_timeout = 5000');
    web = await adminSession(panel.url, 'root', 'correct horse battery');
  });
  after(async () => {
    db?.close();
    await panel?.stop();
  });

  it('sends the multi-create page to node setup while no node exists', async () => {
    const r = await web.get('/admin/ops/multicreate');
    assert.equal(r.status, 303);
    assert.equal(r.location, '/admin/nodes/new');
    infra = await infrastructure(panel, admin);
    assert.equal((await web.get('/admin/ops/multicreate')).status, 200);
    await web.request('POST', '/admin/ops/tags', { name: 'Gold', color: '#ffd700' });
    await web.request('POST', '/admin/ops/tags', { name: 'New', color: '#00ff00', is_default: true });
    const tags = await web.json<{ id: number; name: string }[]>('/admin/ops/tags/list');
    tagGold = (tags.find((t) => t.name === 'Gold') as { id: number }).id;
    tagDefault = (tags.find((t) => t.name === 'New') as { id: number }).id;
  });

  it('creates servers in a batch where a bad entry fails alone', async () => {
    const next = nextId();
    const r = await web.request('POST', '/admin/ops/multicreate', {
      servers: [
        entry({ name: 'Alpha', allocation_id: infra.allocsA[3], ops_tag_ids: [tagGold] }),
        entry({ memory: 1024 }),
        entry({ name: 'No owner', owner_id: 9999 }),
        entry({ name: 'Wrong node', allocation_id: infra.allocsB[0] }),
        entry({ name: 'Bad memory', memory: -5 }),
        entry({ name: 'Bad tags', ops_tag_ids: [4242] }),
        entry({ name: 'Bad env', environment: { A: 1 } }),
        entry({ name: 'Taken', allocation_id: infra.allocsA[3] }),
      ],
    });
    assert.equal(r.status, 200, r.text);
    const body = r.body as { results: Result[]; summary: { total: number; success: number; failed: number } };
    assert.deepEqual(body.summary, { total: 8, success: 2, failed: 6 });
    const [alpha, named] = body.results;
    assert.ok(alpha?.success === true && named?.success === true);
    assert.deepEqual(Object.keys(alpha).sort(), ['id', 'name', 'success']);
    assert.equal(alpha.name, 'Alpha');
    assert.equal(alpha.id, next);
    assert.equal(named.name, `${next + 1} - owner`, 'a nameless entry is named by the pattern with its own id');
    assert.deepEqual(body.results.slice(2).map((x) => [x.success, x.name]), [[false, 'No owner'], [false, 'Wrong node'], [false, 'Bad memory'], [false, 'Bad tags'], [false, 'Bad env'], [false, 'Taken']]);
    assert.match(body.results[2]?.error ?? '', /the owner_id field must name an existing user/);
    assert.match(body.results[3]?.error ?? '', /allocation does not belong to the selected node/);
    assert.match(body.results[4]?.error ?? '', /the memory field must be at least 0/);
    assert.match(body.results[5]?.error ?? '', /tags that do not exist: 4242/);
    assert.match(body.results[6]?.error ?? '', /environment/);
    assert.match(body.results[7]?.error ?? '', /already assigned/);
    assert.deepEqual(Object.keys(body.results[2] ?? {}).sort(), ['error', 'name', 'success']);

    const a = server(alpha.id as number);
    assert.equal(a?.allocation_id, infra.allocsA[3]);
    const b = server(named.id as number);
    assert.equal(b?.allocation_id, infra.allocsA[0], 'an entry without an allocation takes the lowest free port of its node');
    assert.equal(b?.memory, 1024);
    assert.deepEqual(tagsOf(alpha.id as number), [tagGold], 'ops_tag_ids are synced');
    assert.deepEqual(tagsOf(named.id as number), [tagDefault], 'without ops_tag_ids the default tags apply');
    created = [alpha.id as number, named.id as number];
    const events = (db.prepare("SELECT COUNT(*) AS n FROM activity_logs WHERE event = 'admin:server.create' AND actor_id = ?").get(rootId) as { n: number }).n;
    assert.equal(events, 2);
  });

  it('refuses a batch over 50 servers and a body without servers', async () => {
    const big = await web.request('POST', '/admin/ops/multicreate', { servers: Array.from({ length: 51 }, () => entry()) });
    assert.equal(big.status, 422);
    assert.deepEqual(fieldsOf(big), ['servers']);
    assert.match((big.body as Errors).errors[0]?.detail ?? '', /must not have more than 50 items/);
    assert.equal((await web.request('POST', '/admin/ops/multicreate', {})).status, 422);
    assert.equal((await web.request('POST', '/admin/ops/multicreate', { servers: [] })).status, 422);
    assert.equal((db.prepare('SELECT COUNT(*) AS n FROM servers').get() as { n: number }).n, 2);
  });

  it('fails only the entry that is not an object or has a name that is not a string', async () => {
    const next = nextId();
    const r = await web.request('POST', '/admin/ops/multicreate', { servers: ['str', 5, null, [1], entry({ name: 5 }), entry({ name: { a: 1 } })] });
    assert.equal(r.status, 200, r.text);
    const body = r.body as { results: Result[]; summary: { total: number; success: number; failed: number } };
    assert.deepEqual(body.summary, { total: 6, success: 0, failed: 6 });
    assert.ok(body.results.every((x) => x.success === false));
    assert.deepEqual(body.results.map((x) => x.name), [...Array<string>(4).fill(`${next} - admin`), `${next} - owner`, `${next} - owner`], 'each reports the name the pattern gives it');
    assert.match(body.results[0]?.error ?? '', /the servers.0 entry must be an object/);
    assert.match(body.results[3]?.error ?? '', /the servers.3 entry must be an object/);
    assert.match(body.results[4]?.error ?? '', /the name field must be a string/);
    assert.match(body.results[5]?.error ?? '', /the name field must be a string/);
    assert.equal((db.prepare('SELECT COUNT(*) AS n FROM servers').get() as { n: number }).n, 2, 'nothing was created');
    assert.equal((await web.request('POST', '/admin/ops/multicreate', { servers: 'x' })).status, 422, 'the array itself is still checked');
  });

  it('reports the pattern name of a failed nameless entry whatever check failed', async () => {
    const next = nextId();
    const r = await web.request('POST', '/admin/ops/multicreate', {
      servers: [entry({ environment: { A: 1 } }), entry({ ops_tag_ids: [4242] }), entry({ node_id: 9999 }), entry({ allocation_id: infra.allocsB[0] }), entry({ memory: -5 }), entry({ name: '  ', cpu: 'x' })],
    });
    assert.equal(r.status, 200, r.text);
    const body = r.body as { results: Result[] };
    assert.deepEqual(
      body.results.map((x) => [x.success, x.name]),
      Array.from({ length: 6 }, () => [false, `${next} - owner`]),
    );
    assert.match(body.results[5]?.error ?? '', /the cpu field must be an integer/);
  });

  it('refuses control characters in server names on every create and rename path', async () => {
    const r = await web.request('POST', '/admin/ops/multicreate', { servers: [entry({ name: '\u0000nul' }), entry({ name: 'tab\there' }), entry({ name: 'del\u007f' })] });
    assert.equal(r.status, 200, r.text);
    const results = (r.body as { results: Result[] }).results;
    assert.deepEqual(results.map((x) => [x.success, x.name]), [[false, '\u0000nul'], [false, 'tab\there'], [false, 'del\u007f']]);
    for (const x of results) assert.match(x.error ?? '', /the name field must not contain control characters/);

    const limits = { memory: 1, swap: 0, disk: 1, io: 500, cpu: 1 };
    const api = await panel.api(admin, 'POST', '/api/application/servers', { name: 'bell\u0007', user: ownerId, egg: infra.egg, limits, feature_limits: {}, allocation: { default: infra.allocsA[9] } });
    assert.equal(api.status, 422, api.text);
    assert.deepEqual(fieldsOf(api), ['name']);
    const [alpha] = created as [number];
    const rename = await panel.api(admin, 'PATCH', `/api/application/servers/${alpha}/details`, { name: 'line\nbreak' });
    assert.equal(rename.status, 422, rename.text);
    assert.match((rename.body as Errors).errors[0]?.detail ?? '', /the name field must not contain control characters/);
    assert.equal(server(alpha)?.name, 'Alpha');
    assert.equal((db.prepare('SELECT COUNT(*) AS n FROM servers').get() as { n: number }).n, 2, 'nothing was created');
  });

  it('creates alike servers from the page form', async () => {
    const r = await web.post('/admin/ops/multicreate', { count: '2', name: '', owner_id: String(ownerId), node_id: String(infra.nodeB), egg_id: String(infra.egg), memory: '2048', swap: '0', disk: '1024', io: '500', cpu: '100' });
    assert.equal(r.status, 200, r.text.slice(0, 1000));
    assert.match(r.text, /2 of 2 created, 0 failed/);
    const rows = db.prepare('SELECT id, name, node_id FROM servers WHERE node_id = ? ORDER BY id').all(infra.nodeB) as { id: number; name: string }[];
    assert.deepEqual(rows.map((x) => x.name), rows.map((x) => `${x.id} - owner`));
    created.push(...rows.map((x) => x.id));
    const meta = await web.json<Record<string, { name?: string; short?: string }[]>>('/admin/ops/servers/filter-meta');
    assert.deepEqual(Object.keys(meta).sort(), ['eggs', 'locations', 'nodes', 'tags', 'types']);
    assert.deepEqual([meta.nodes?.map((n) => n.name), meta.eggs?.map((e) => e.name), meta.types?.map((t) => t.name), meta.locations?.map((l) => l.short), meta.tags?.map((t) => t.name)], [['node-a', 'node-b'], ['Paper'], ['Games'], ['fra1'], ['Gold', 'New']]);
    const bad = await web.post('/admin/ops/multicreate', { count: '51' });
    assert.equal(bad.status, 422);
    assert.match(bad.text, /the count field must be between 1 and 50/);
  });

  it('pages allocations by cursor and picks next, previous, random and recent ones', async () => {
    const page = async (q: string): Promise<{ data: Allocation[]; meta: { per_page: number; next_cursor: string | null } }> => web.json(`/admin/ops/allocations/${infra.nodeA}${q}`);
    const all = await page('');
    assert.equal(all.meta.per_page, 50, 'the default page size is allocation_page_size');
    assert.deepEqual(all.data.map((a) => a.port), [25565, 25566, 25567, 25568, 25569, 25570, 25571, 25572, 25573, 25574]);
    assert.equal(all.meta.next_cursor, null);
    const seen: number[] = [];
    let cursor: string | null = '';
    let pages = 0;
    while (cursor !== null) {
      const p = await page(`?per_page=10&free_only=true${cursor === '' ? '' : `&cursor=${cursor}`}`);
      seen.push(...p.data.map((a) => a.port));
      cursor = p.meta.next_cursor;
      pages++;
    }
    assert.equal(pages, 1);
    assert.deepEqual(seen, [25566, 25567, 25569, 25570, 25571, 25572, 25573, 25574], 'free ones only: 25565 and 25568 are assigned');
    await web.post('/admin/ops/settings', { ...SETTINGS_FORM, allocation_page_size: '10' });
    db.prepare('UPDATE allocations SET notes = ? WHERE port = 25570').run('reserved for events');
    const searched = await page('?search=reserved');
    assert.deepEqual(searched.data.map((a) => a.port), [25570]);
    assert.deepEqual((await page('?search=2557')).data.map((a) => a.port), [25570, 25571, 25572, 25573, 25574]);
    // A bracketed parameter is refused like a repeated one, not ignored.
    for (const q of ['?per_page=9', '?per_page=201', `?search=${'x'.repeat(61)}`, '?free_only=maybe', '?cursor=bm9wZQ', '?per_page[]=20', '?free_only[]=true']) {
      const r = await web.request('GET', `/admin/ops/allocations/${infra.nodeA}${q}`);
      assert.equal(r.status, 422, q);
    }
    assert.equal((await web.request('GET', '/admin/ops/allocations/9999')).status, 404);

    // Cursor pages of 10 over 10 rows of node A, then of node B's five.
    const b = await web.json<{ data: Allocation[]; meta: { next_cursor: string | null } }>(`/admin/ops/allocations/${infra.nodeB}?per_page=10`);
    assert.equal(b.data.length, 5);
    assert.equal(b.meta.next_cursor, null);

    const next = await web.json<{ allocation: Allocation }>(`/admin/ops/allocations/${infra.nodeA}/next?current_port=25565`);
    assert.equal(next.allocation.port, 25566);
    const skip = await web.json<{ allocation: Allocation }>(`/admin/ops/allocations/${infra.nodeA}/next?current_port=25567`);
    assert.equal(skip.allocation.port, 25569, 'the next free port above, skipping the assigned 25568');
    const prev = await web.json<{ allocation: Allocation }>(`/admin/ops/allocations/${infra.nodeA}/prev?current_port=25569`);
    assert.equal(prev.allocation.port, 25567);
    assert.deepEqual(await web.json(`/admin/ops/allocations/${infra.nodeA}/prev?current_port=25565`), { allocation: null });
    const random = await web.json<{ allocation: Allocation }>(`/admin/ops/allocations/${infra.nodeA}/random`);
    assert.equal(random.allocation.node_id, infra.nodeA);
    assert.equal(random.allocation.assigned, false);

    assert.deepEqual((await web.request('POST', '/admin/ops/allocations/recents', { allocation_id: infra.allocsA[5] })).body, { success: true });
    assert.deepEqual((await web.request('POST', '/admin/ops/allocations/recents', { allocation_id: infra.allocsB[4] })).body, { success: true });
    const recents = await web.json<{ data: Allocation[] }>('/admin/ops/allocations/recents');
    assert.deepEqual(recents.data.map((a) => a.id).sort((x, y) => x - y), [infra.allocsA[5], infra.allocsB[4]].sort((x, y) => (x ?? 0) - (y ?? 0)));
    assert.equal((await web.request('POST', '/admin/ops/allocations/recents', { allocation_id: 'x' })).status, 422);
    assert.equal((await web.request('POST', '/admin/ops/allocations/recents', { allocation_id: 99999 })).status, 404);
  });

  it('pages allocations by cursor across several pages', async () => {
    const ports: number[] = [];
    let cursor: string | null = '';
    let pages = 0;
    while (cursor !== null) {
      const p: { data: Allocation[]; meta: { next_cursor: string | null } } = await web.json(`/admin/ops/allocations/${infra.nodeA}?per_page=10${cursor === '' ? '' : `&cursor=${cursor}`}`);
      ports.push(...p.data.map((a) => a.port));
      cursor = p.meta.next_cursor;
      pages++;
    }
    assert.equal(pages, 1);
    // Eleven more ports make two pages of ten and one of one.
    await panel.api(admin, 'POST', `/api/application/nodes/${infra.nodeA}/allocations`, { ip: '127.0.0.2', ports: ['26000-26010'] });
    const all: number[] = [];
    cursor = '';
    pages = 0;
    while (cursor !== null) {
      const p: { data: Allocation[]; meta: { next_cursor: string | null } } = await web.json(`/admin/ops/allocations/${infra.nodeA}?per_page=10${cursor === '' ? '' : `&cursor=${cursor}`}`);
      all.push(...p.data.map((a) => a.port));
      cursor = p.meta.next_cursor;
      pages++;
    }
    assert.equal(pages, 3);
    assert.equal(all.length, 21);
    assert.deepEqual(all, [...all].sort((x, y) => x - y));
    assert.equal(new Set(all).size, 21);
  });

  it('searches servers, users, allocations, nodes and tags', async () => {
    const s = await web.json<Record<string, Record<string, unknown>[]>>('/admin/ops/search?q=alpha');
    assert.deepEqual(Object.keys(s).sort(), ['allocations', 'nodes', 'servers', 'tags', 'users']);
    assert.deepEqual(s.servers?.map((x) => x.name), ['Alpha']);
    assert.deepEqual((await web.json<Record<string, Record<string, unknown>[]>>('/admin/ops/search?q=owner')).users?.map((x) => x.username), ['owner']);
    assert.deepEqual((await web.json<Record<string, Record<string, unknown>[]>>('/admin/ops/search?q=node-b')).nodes?.map((x) => x.name), ['node-b']);
    assert.deepEqual((await web.json<Record<string, Record<string, unknown>[]>>('/admin/ops/search?q=gold')).tags?.map((x) => x.name), ['Gold']);
    assert.deepEqual((await web.json<Record<string, Record<string, unknown>[]>>('/admin/ops/search?q=30003')).allocations?.map((x) => x.port), [30003]);
    for (const q of ['', '?q=', `?q=${'a'.repeat(101)}`]) {
      const r = await web.request('GET', `/admin/ops/search${q}`);
      assert.equal(r.status, 422, q);
      assert.deepEqual(fieldsOf(r), ['q']);
    }
    assert.equal((await web.request('GET', `/admin/ops/search?q=${'a'.repeat(100)}`)).status, 200);
    for (const q of ['q=a&q=b', 'q[]=a', 'q[0]=a', 'q=a&q[]=b']) {
      const r = await web.request('GET', `/admin/ops/search?${q}`);
      assert.equal(r.status, 422, q);
      assert.deepEqual((r.body as Errors).errors.map((e) => [e.meta?.source_field, e.detail]), [['q', 'the q field must be a single string']], q);
    }
    assert.equal((await panel.api(admin, 'GET', '/api/application/ops/search?q=a&q=b')).status, 422);
    const api = await panel.api(admin, 'GET', '/api/application/ops/search?q=alpha');
    assert.equal(api.status, 200);
    assert.deepEqual(api.body, s);
    assert.equal((await panel.api(admin, 'GET', '/api/application/ops/search')).status, 422);
  });

  it('runs bulk operations on the ops queue with persisted jobs and items', async () => {
    const [alpha, second] = created as [number, number];
    const suspended = await bulk({ type: 'suspend', server_ids: [alpha, second, alpha] });
    assert.equal(suspended.total, 2, 'duplicate ids count once');
    assert.deepEqual([suspended.type, suspended.label, suspended.processed, suspended.succeeded, suspended.failed, suspended.skipped, suspended.progress_pct], ['suspend', 'Suspend 2 servers', 2, 2, 0, 0, 100]);
    assert.ok(suspended.started_at !== null && suspended.finished_at !== null);
    assert.deepEqual(suspended.items, [{ server_id: alpha, status: 'success', error: null }, { server_id: second, status: 'success', error: null }]);
    assert.equal(server(alpha)?.suspended, 1);
    assert.equal(server(second)?.suspended, 1);
    assert.equal((db.prepare("SELECT COUNT(*) AS n FROM activity_logs WHERE event = 'server:suspended' AND actor_id = ?").get(rootId) as { n: number }).n, 2);
    const again = await bulk({ type: 'suspend', server_ids: [alpha] });
    assert.deepEqual([again.skipped, again.items[0]?.error], [1, 'the server is already suspended']);
    const unsuspended = await bulk({ type: 'unsuspend', server_ids: [alpha, second] });
    assert.equal(unsuspended.succeeded, 2);
    assert.equal(server(alpha)?.suspended, 0);

    const added = await bulk({ type: 'tags_add', server_ids: [alpha, second], options: { tag_ids: [tagGold] } });
    assert.deepEqual([added.succeeded, added.skipped], [1, 1], 'Alpha had Gold already');
    assert.deepEqual(tagsOf(second), [tagGold, tagDefault].sort((x, y) => x - y));
    const removed = await bulk({ type: 'tags_remove', server_ids: [alpha, second], options: { tag_ids: [tagGold] } });
    assert.equal(removed.succeeded, 2);
    assert.deepEqual(tagsOf(alpha), []);

    const power = await bulk({ type: 'power', server_ids: [alpha], options: { power_action: 'restart' } });
    assert.deepEqual([power.status, power.failed, power.items[0]?.status], ['finished', 1, 'failed']);
    assert.equal(power.items[0]?.error, 'no server daemon is attached to this panel: the restart power action cannot be sent');
    const reinstall = await bulk({ type: 'reinstall', server_ids: [alpha] });
    assert.equal(reinstall.items[0]?.error, 'no server daemon is attached to this panel: a reinstall cannot run');
    assert.equal(server(alpha)?.suspended, 0, 'a failed item changes nothing');
    const rows = db.prepare('SELECT status, total FROM ops_bulk_jobs ORDER BY id').all() as { status: string; total: number }[];
    assert.ok(rows.every((x) => x.status === 'finished'));
    assert.equal((db.prepare('SELECT COUNT(*) AS n FROM ops_bulk_items').get() as { n: number }).n, 2 + 1 + 2 + 2 + 2 + 1 + 1);
  });

  it('asks before suspending on the admin server page: the button only opens the question', async () => {
    const [alpha] = created as [number];
    const page = await web.get(`/admin/servers/${alpha}`);
    assert.equal(page.status, 200);
    assert.match(page.text, new RegExp(`<details class="confirm"><summary class="button">Suspend server</summary><form method="post" action="/admin/servers/${alpha}/suspend"[^>]*><input type="hidden" name="_csrf" value="[^"]+"><p>Suspend server Alpha\\? Its users cannot use it until it is unsuspended\\.</p><button type="submit" class="danger">Yes, suspend server</button></form></details>`));
    assert.equal(server(alpha)?.suspended, 0, 'showing the question suspends nothing');
  });

  it('validates bulk requests and answers preflight without dispatching', async () => {
    const [alpha] = created as [number];
    const jobs = (): number => (db.prepare('SELECT COUNT(*) AS n FROM ops_bulk_jobs').get() as { n: number }).n;
    const before = jobs();
    assert.deepEqual((await web.request('POST', '/admin/ops/bulk/preflight', { type: 'suspend', server_ids: [alpha] })).body, { valid: true });
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ type: 'explode', server_ids: [alpha] }, /the type field must be one of: /],
      [{ type: 'suspend', server_ids: [] }, /the server_ids field must not be empty/],
      [{ type: 'suspend', server_ids: Array.from({ length: 501 }, (_, i) => i + 1) }, /must not have more than 500 items/],
      [{ type: 'suspend', server_ids: [alpha, 777] }, /servers that do not exist: 777/],
      [{ type: 'power', server_ids: [alpha] }, /options.power_action field is required/],
      [{ type: 'power', server_ids: [alpha], options: { power_action: 'explode' } }, /options.power_action field must be one of: start, stop, restart, kill/],
      [{ type: 'tags_add', server_ids: [alpha] }, /options.tag_ids field is required/],
      [{ type: 'tags_add', server_ids: [alpha], options: { tag_ids: [999] } }, /tags that do not exist: 999/],
      [{ type: 'move', server_ids: [alpha], options: { target_node_id: infra.nodeB } }, /bulk move is disabled/],
    ];
    for (const [body, message] of cases) {
      const pre = await web.request('POST', '/admin/ops/bulk/preflight', body);
      assert.equal(pre.status, 200);
      assert.equal((pre.body as { valid: boolean }).valid, false);
      assert.match((pre.body as { error: string }).error, message);
      const r = await web.request('POST', '/admin/ops/bulk', body);
      assert.equal(r.status, 422, JSON.stringify(body).slice(0, 100));
    }
    assert.equal((await web.request('POST', '/admin/ops/bulk', { type: 'suspend', server_ids: Array.from({ length: 500 }, () => alpha) })).status, 202, '500 ids are allowed');
    assert.equal(jobs(), before + 1);
    assert.equal((await web.request('GET', '/admin/ops/bulk/00000000-0000-0000-0000-000000000000')).status, 404);
    const meta = await web.json<{ nodes: { id: number; free_allocations: number }[]; tags: unknown[]; types: string[]; transfer_strategies: { enabled: boolean }[]; modes: { current: string } }>('/admin/ops/bulk/meta');
    assert.deepEqual(meta.types, ['suspend', 'unsuspend', 'delete', 'move', 'power', 'reinstall', 'tags_add', 'tags_remove']);
    assert.equal(meta.modes.current, 'queue');
    assert.equal(meta.transfer_strategies[0]?.enabled, false);
    assert.equal(meta.nodes.find((n) => n.id === infra.nodeB)?.free_allocations, 3);
    assert.equal(meta.tags.length, 2);
  });

  it('moves servers between nodes once bulk move is enabled, and deletes servers', async () => {
    const [alpha, second] = created as [number, number];
    assert.equal((await web.post('/admin/ops/settings', { ...SETTINGS_FORM, bulk_move_enabled: 'on' })).status, 303);
    const oldAllocation = server(alpha)?.allocation_id;
    const moved = await bulk({ type: 'move', server_ids: [alpha], options: { target_node_id: infra.nodeB } });
    assert.equal(moved.succeeded, 1, JSON.stringify(moved.items));
    const now = server(alpha);
    assert.equal(now?.node_id, infra.nodeB);
    const alloc = db.prepare('SELECT node_id, server_id FROM allocations WHERE id = ?').get(now?.allocation_id ?? 0) as { node_id: number; server_id: number };
    assert.deepEqual([alloc.node_id, alloc.server_id], [infra.nodeB, alpha]);
    assert.equal((db.prepare('SELECT server_id FROM allocations WHERE id = ?').get(oldAllocation ?? 0) as { server_id: number | null }).server_id, null, 'the old allocation is free again');
    const same = await bulk({ type: 'move', server_ids: [alpha], options: { target_node_id: infra.nodeB } });
    assert.equal(same.items[0]?.error, 'the server is already on the target node');
    // Node B has five ports: the two page-made servers, Alpha, then Second and Extra fill it; Extra2 finds none.
    const full = await bulk({ type: 'move', server_ids: [second], options: { target_node_id: infra.nodeB } });
    assert.equal(full.succeeded, 1);
    const extra = await web.request('POST', '/admin/ops/multicreate', { servers: [entry({ name: 'Extra' }), entry({ name: 'Extra2' })] });
    const [extraId, extra2Id] = (extra.body as { results: Result[] }).results.map((x) => x.id as number) as [number, number];
    assert.equal((await bulk({ type: 'move', server_ids: [extraId], options: { target_node_id: infra.nodeB } })).succeeded, 1);
    const none = await bulk({ type: 'move', server_ids: [extra2Id], options: { target_node_id: infra.nodeB } });
    assert.deepEqual([none.failed, none.items[0]?.error], [1, 'the target node has no free allocation']);
    assert.notEqual(server(extra2Id)?.node_id, infra.nodeB);

    const deleted = await bulk({ type: 'delete', server_ids: [extraId, extra2Id] });
    assert.equal(deleted.succeeded, 2);
    assert.equal(server(extraId), undefined);
    assert.equal(server(extra2Id), undefined);
    assert.equal((db.prepare("SELECT COUNT(*) AS n FROM activity_logs WHERE event = 'admin:server.delete' AND subject_id IN (?, ?)").get(extraId, extra2Id) as { n: number }).n, 2);
    const gone = await web.request('POST', '/admin/ops/bulk', { type: 'delete', server_ids: [extraId] });
    assert.equal(gone.status, 422, 'a deleted server is no longer an existing server');
  });

  it('runs bulk operations through the application API', async () => {
    const [alpha] = created as [number];
    assert.equal(server(alpha)?.suspended, 1, 'the 500-id job above suspended it');
    const r = await panel.api(admin, 'POST', '/api/application/ops/bulk', { type: 'unsuspend', server_ids: [alpha] });
    assert.equal(r.status, 202, r.text);
    const { uuid } = r.body as { uuid: string };
    const job = await untilFinished(uuid, async (path) => (await panel.api(admin, 'GET', path)).body as Job, `/api/application/ops/bulk/${uuid}`);
    assert.equal(job.succeeded, 1);
    assert.equal(server(alpha)?.suspended, 0);
    assert.equal((await panel.api(admin, 'POST', '/api/application/ops/bulk', { type: 'suspend' })).status, 422);
    assert.equal((await panel.api(admin, 'GET', '/api/application/ops/bulk/nope')).status, 404);
    const upper = await panel.api(admin, 'GET', `/api/application/ops/bulk/${uuid.toUpperCase()}`);
    assert.equal(upper.status, 200, 'job uuids match in any case');
    assert.equal((upper.body as Job).uuid, uuid);
    assert.equal((await web.json<Job>(`/admin/ops/bulk/${uuid.toUpperCase()}`)).uuid, uuid);
  });

  it('grades node health from allocations and memory and recommends nodes', async () => {
    const a = await web.json<{ node: Record<string, unknown>; latest: Record<string, unknown>; history: unknown[] }>(`/admin/ops/health/nodes/${infra.nodeA}`);
    assert.deepEqual(a.node, { id: infra.nodeA, name: 'node-a', fqdn: 'node-a.example.test', memory: 4096, disk: 0 });
    const usedA = (db.prepare('SELECT COUNT(*) AS n FROM allocations WHERE node_id = ? AND server_id IS NOT NULL').get(infra.nodeA) as { n: number }).n;
    const totalA = (db.prepare('SELECT COUNT(*) AS n FROM allocations WHERE node_id = ?').get(infra.nodeA) as { n: number }).n;
    const memA = (db.prepare('SELECT COALESCE(SUM(memory), 0) AS m FROM servers WHERE node_id = ?').get(infra.nodeA) as { m: number }).m;
    assert.equal(a.latest.allocation_used_pct, Math.round((usedA / totalA) * 10000) / 100);
    assert.equal(a.latest.memory_used_pct, Math.round((memA / 4096) * 10000) / 100);
    assert.deepEqual(Object.keys(a.latest).sort(), ['allocation_used_pct', 'health_score', 'memory_used_pct', 'snapshot_at', 'status']);
    assert.ok(Array.isArray(a.history) && a.history.length <= 48);
    const b = await web.json<{ latest: { memory_used_pct: number; allocation_used_pct: number; status: string; health_score: number } }>(`/admin/ops/health/nodes/${infra.nodeB}`);
    assert.equal(b.latest.allocation_used_pct, 80);
    assert.equal(b.latest.memory_used_pct, 68.75, 'two servers of 2048 MB, Alpha 512 MB and Second 1024 MB over 8192 MB');
    assert.deepEqual([b.latest.status, b.latest.health_score], ['warning', 20]);
    await web.post('/admin/ops/settings', { ...SETTINGS_FORM, bulk_move_enabled: 'on', node_pressure_crit_pct: '80' });
    assert.equal((await web.json<{ latest: { status: string } }>(`/admin/ops/health/nodes/${infra.nodeB}`)).latest.status, 'critical');
    assert.equal((await web.request('GET', '/admin/ops/health/nodes/9999')).status, 404);

    const recs = await web.json<{ node_id: number; node_name: string; composite_score: number; mem_pct: number; alloc_pct: number; reasons: string[] }[]>('/admin/ops/health/node-recommendations?memory_mb=1024');
    assert.deepEqual(recs.map((x) => x.node_name), ['node-a', 'node-b']);
    assert.deepEqual(Object.keys(recs[0] ?? {}).sort(), ['alloc_pct', 'composite_score', 'mem_pct', 'node_id', 'node_name', 'reasons']);
    assert.ok((recs[0]?.reasons ?? []).some((x) => x.includes('with 1024 MB more')));
    assert.ok(recs[0] !== undefined && recs[1] !== undefined && recs[0].composite_score > recs[1].composite_score);
    assert.equal((await web.request('GET', '/admin/ops/health/node-recommendations?memory_mb=-1')).status, 422);
    const page = await web.get('/admin/ops/health');
    assert.equal(page.status, 200);
    assert.match(page.text, /node-b<\/a><\/td><td><span class="badge red">critical/);

    const api = await panel.api(admin, 'GET', `/api/application/ops/health/nodes/${infra.nodeB}`);
    assert.equal(api.status, 200);
    assert.equal((api.body as { latest: { status: string } }).latest.status, 'critical');
    assert.deepEqual((await panel.api(admin, 'GET', '/api/application/ops/health/node-recommendations?memory_mb=1024')).body, recs);
    for (const gone of ['/api/application/ops/health/servers/1', '/api/application/ops/analytics/1/series', '/admin/ops/analytics/series/1']) {
      const r = gone.startsWith('/api') ? await panel.api(admin, 'GET', gone) : await web.request('GET', gone);
      assert.equal(r.status, 404, `${gone} is not built: no usage data`);
    }
  });

  it('lists the core activity log and the suite events together, filtered and paged', async () => {
    const [alpha] = created as [number];
    type Feed = { data: { source: string; event: string; server_id: number | null; node_id: number | null; payload: unknown }[]; meta: { pagination: { total: number; per_page: number; current_page: number; total_pages: number } } };
    const feed = await web.json<Feed>('/admin/ops/activity');
    assert.equal(feed.meta.pagination.per_page, 25);
    assert.equal(feed.data.length, 25);
    assert.ok(feed.data.some((x) => x.source === 'core') && feed.data.some((x) => x.source === 'ops'));
    const forAlpha = await web.json<Feed>(`/admin/ops/activity?server_id=${alpha}&per_page=100`);
    assert.ok(forAlpha.data.every((x) => x.server_id === alpha));
    const events = new Set(forAlpha.data.map((x) => `${x.source} ${x.event}`));
    for (const e of ['core admin:server.create', 'core server:suspended', 'ops multicreate.server_created', 'ops bulk.suspend', 'ops bulk.move']) assert.ok(events.has(e), e);
    const onB = await web.json<Feed>(`/admin/ops/activity?node_id=${infra.nodeB}&event=bulk.move&per_page=10`);
    assert.ok(onB.data.length >= 2 && onB.data.every((x) => x.event === 'bulk.move' && x.node_id === infra.nodeB));
    const page2 = await web.json<Feed>('/admin/ops/activity?per_page=10&page=2');
    assert.equal(page2.meta.pagination.current_page, 2);
    assert.equal(page2.data.length, 10);
    for (const q of ['?per_page=9', '?per_page=101', `?event=${'e'.repeat(81)}`, '?server_id=x']) assert.equal((await web.request('GET', `/admin/ops/activity${q}`)).status, 422, q);
    // `page` as on the other admin pages: past 1,000,000 is page 1,000,000, anything else not a page number is page 1.
    for (const [q, current] of [['2000000', 1_000_000], ['abc', 1], ['0', 1], ['-3', 1]] as const) {
      const r = await web.json<Feed>(`/admin/ops/activity?page=${q}`);
      assert.equal(r.meta.pagination.current_page, current, q);
    }
  });

  it('shows the audit log 50 entries a page, filtered by action and actor', async () => {
    const insert = db.prepare("INSERT INTO ops_audit_log (action, actor_id, payload, ip, created_at) VALUES ('paging.check', NULL, '{}', '', ?)");
    for (let i = 0; i < 60; i++) insert.run(new Date(Date.UTC(2020, 0, 1, 0, i)).toISOString());
    const page1 = await web.get('/admin/ops/audit?action=paging');
    assert.equal(page1.status, 200);
    assert.equal((page1.text.match(/<code>paging.check<\/code>/g) ?? []).length, 50);
    assert.match(page1.text, /Page 1 of 2/);
    assert.equal(((await web.get('/admin/ops/audit?action=paging&page=2')).text.match(/<code>paging.check<\/code>/g) ?? []).length, 10);
    const mine = await web.get(`/admin/ops/audit?actor_id=${rootId}&action=settings`);
    assert.match(mine.text, /<code>settings.updated<\/code>/);
    assert.doesNotMatch(mine.text, /paging.check/);
    // `page` as on the other admin pages (/admin/users?page=2000000): clamped or page 1, never a 422.
    for (const q of ['2000000', 'abc', '0']) {
      const r = await web.get(`/admin/ops/audit?action=paging&page=${q}`);
      assert.equal(r.status, 200, q);
    }
    assert.equal(((await web.get('/admin/ops/audit?action=paging&page=abc')).text.match(/<code>paging.check<\/code>/g) ?? []).length, 50, 'a malformed page is page 1');
    assert.match((await web.get('/admin/ops/audit?action=paging&page=2000000')).text, /Page 1000000 of 2/);
  });

  it('resumes a job a restart left pending, leaving out a tag deleted meanwhile', async (t) => {
    const [alpha, second] = created as [number, number];
    assert.equal((await web.request('POST', '/admin/ops/tags', { name: 'Doomed', color: '#000000' })).status, 303);
    const doomed = ((await web.json<{ id: number; name: string }[]>('/admin/ops/tags/list')).find((t) => t.name === 'Doomed') as { id: number }).id;
    assert.deepEqual([tagsOf(alpha).includes(tagGold), tagsOf(second).includes(tagGold)], [false, false]);
    await panel.daemon.stop();
    // What a dispatch stores before the queue runs it; the panel stopped first, then the tag went.
    const pending = (uuid: string, tagIds: number[], serverIds: number[]): void => {
      const job = db.prepare("INSERT INTO ops_bulk_jobs (uuid, type, label, status, options, actor_id, ip, total, created_at) VALUES (?, 'tags_add', 'Add tags', 'pending', ?, ?, '127.0.0.1', ?, ?) RETURNING id")
        .get(uuid, JSON.stringify({ tag_ids: tagIds }), rootId, serverIds.length, new Date().toISOString()) as { id: number };
      for (const id of serverIds) db.prepare("INSERT INTO ops_bulk_items (job_id, server_id, status) VALUES (?, ?, 'pending')").run(job.id, id);
    };
    pending('00000000-0000-4000-8000-000000000001', [doomed, tagGold], [alpha, second]);
    pending('00000000-0000-4000-8000-000000000002', [doomed], [alpha]);
    db.prepare('DELETE FROM ops_tags WHERE id = ?').run(doomed);
    // The harness stops only the panel it started.
    const restarted = startHostkit(['panel', 'serve', '--config', panel.config]);
    t.after(() => restarted.stop());
    await restarted.waitFor(/panel listening/);
    const items = async (uuid: string): Promise<{ status: string; error: string | null }[]> => {
      for (let i = 0; i < 200; i++) {
        const job = db.prepare('SELECT id, status FROM ops_bulk_jobs WHERE uuid = ?').get(uuid) as { id: number; status: string };
        if (job.status === 'finished') return (db.prepare('SELECT status, error FROM ops_bulk_items WHERE job_id = ? ORDER BY id').all(job.id) as { status: string; error: string | null }[]).map((r) => ({ ...r }));
        await sleep(25);
      }
      throw new Error(`bulk job ${uuid} did not finish`);
    };
    assert.deepEqual(await items('00000000-0000-4000-8000-000000000001'), [{ status: 'success', error: null }, { status: 'success', error: null }]);
    assert.deepEqual([tagsOf(alpha).includes(tagGold), tagsOf(second).includes(tagGold)], [true, true]);
    assert.deepEqual(await items('00000000-0000-4000-8000-000000000002'), [{ status: 'failed', error: `the tags of this job were deleted since it was dispatched: ${doomed}` }]);
    assert.doesNotMatch(restarted.output(), /FOREIGN KEY/);
  });
});

describe('panel operations suite: bulk operations inside the request with OPS_BULK_SYNC', () => {
  let panel: TestPanel;
  let web: AdminSession;

  before(async () => {
    panel = await startPanel({ env: { OPS_BULK_SYNC: 'true' } });
    panel.createUser('root', { admin: true });
    web = await adminSession(panel.url, 'root', 'correct horse battery');
  });
  after(async () => {
    await panel?.stop();
  });

  it('answers 202 with the finished job', async () => {
    const admin = panel.createKey('root', 'application');
    const ownerId = panel.createUser('owner');
    const infra = await infrastructure(panel, admin);
    const r = await panel.api(admin, 'POST', '/api/application/servers', { name: 'S', user: ownerId, egg: infra.egg, limits: { memory: 1, swap: 0, disk: 1, io: 500, cpu: 1 }, feature_limits: {}, allocation: { default: infra.allocsA[0] } });
    const id = ((r.body as Item).attributes.id) as number;
    const d = await web.request('POST', '/admin/ops/bulk', { type: 'suspend', server_ids: [id] });
    assert.equal(d.status, 202);
    assert.deepEqual([(d.body as { status: string }).status, (d.body as { total: number }).total], ['finished', 1]);
    const job = await web.json<Job>(`/admin/ops/bulk/${(d.body as { uuid: string }).uuid}`);
    assert.equal(job.succeeded, 1);
    assert.equal((await web.json<{ modes: { current: string } }>('/admin/ops/bulk/meta')).modes.current, 'sync');
  });
});

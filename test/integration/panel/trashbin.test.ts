/**
 * The trash bin addon end to end against the real panel process and a real volume directory:
 * deletes into `.trash/{id}`, the `/.trash` listing from the records, restore (with name
 * conflicts, ghosts, and a failure partway), permanent deletes, the addon switched off, quotas
 * resolved per server, egg and global, the trash folder guard, subusers with and without
 * `trashbin.access` on every file route and path spelling, the 10-per-minute limits, empty, the
 * retention purge, orphan items without a record, cleanup with servers and eggs, and the admin
 * routes through a signed-in admin session.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { adminSession, type AdminSession } from './admin-session.ts';
import { startPanel, type TestPanel } from './harness.ts';

type Item = { object: string; attributes: Record<string, unknown> };
type Errors = { errors: { code: string; status: string; detail: string; meta?: Record<string, unknown> }[] };
type Server = { id: number; uuid: string; identifier: string };
type Response = Awaited<ReturnType<TestPanel['api']>>;

const MIB = 1024 * 1024;
const PART = 600 * 1024;
// Every file permission of the core: the subusers below differ only in trashbin.access.
const FILE_PERMISSIONS = ['file.read', 'file.read-content', 'file.create', 'file.update', 'file.delete'];
const DEFAULT_FORM = { enabled: true, retention_hours: 24, default_max_mb_per_server: 0, max_files_per_delete: 100, purge_batch_size: 200, logging_enabled: true, protect_trash_dir: true };

describe('panel trash bin', () => {
  let panel: TestPanel;
  let db: DatabaseSync;
  let web: AdminSession;
  let admin: string;
  let owner: string;
  let keeper: string;
  let deleter: string;
  let peeker: string;
  let curator: string;
  let eggA: number;
  let eggB: number;
  let nestId: number;
  let s1: Server;
  let s2: Server;
  let settings = { ...DEFAULT_FORM };

  const vol = (s: Server, ...p: string[]): string => join(panel.volumesDir, s.uuid, ...p);
  const files = (s: Server): string => `/api/client/servers/${s.identifier}/files`;
  const del = (key: string, s: Server, body: Record<string, unknown>): ReturnType<TestPanel['api']> => panel.api(key, 'POST', `${files(s)}/delete`, body);
  const trashList = async (key: string, s: Server): Promise<Item[]> => {
    const r = await panel.api(key, 'GET', `${files(s)}/list?directory=/.trash`);
    assert.equal(r.status, 200, r.text);
    return (r.body as { data: Item[] }).data;
  };
  const records = (s: Server): { id: number; path: string; size: number }[] => db.prepare('SELECT id, path, size FROM trashbin_entries WHERE server_id = ? ORDER BY id').all(s.id) as { id: number; path: string; size: number }[];
  const firstError = (r: { body: unknown }): Errors['errors'][number] | undefined => (r.body as Errors).errors[0];
  const lastEvent = (s: Server, event: string): Record<string, unknown> => {
    const row = db.prepare("SELECT properties FROM activity_logs WHERE subject_type = 'server' AND subject_id = ? AND event = ? ORDER BY id DESC LIMIT 1").get(s.id, event) as { properties: string } | undefined;
    assert.ok(row !== undefined, `no ${event} entry`);
    return JSON.parse(row.properties) as Record<string, unknown>;
  };
  const events = (s: Server, prefix: string): string[] =>
    (db.prepare("SELECT event FROM activity_logs WHERE subject_type = 'server' AND subject_id = ? AND event LIKE ? ORDER BY id").all(s.id, `${prefix}%`) as { event: string }[]).map((r) => r.event);
  const saveSettings = async (change: Partial<typeof DEFAULT_FORM>): Promise<void> => {
    settings = { ...settings, ...change };
    await web.get('/admin/trashbin');
    const form = Object.fromEntries(Object.entries(settings).flatMap(([k, v]) => (typeof v === 'boolean' ? (v ? [[k, 'on']] : []) : [[k, String(v)]])));
    const r = await web.post('/admin/trashbin', form);
    assert.equal(r.status, 303, r.text.slice(0, 2000));
  };
  const createServer = async (name: string, egg: number, alloc: number, ownerId: number): Promise<Server> => {
    const r = await panel.api(admin, 'POST', '/api/application/servers', { name, user: ownerId, egg, limits: { memory: 512, swap: 0, disk: 1024, io: 500, cpu: 100 }, feature_limits: {}, allocation: { default: alloc } });
    assert.equal(r.status, 201, r.text);
    const s = (r.body as Item).attributes as unknown as Server;
    mkdirSync(vol(s), { recursive: true });
    return s;
  };

  before(async () => {
    panel = await startPanel();
    panel.createUser('root', { admin: true });
    const ownerId = panel.createUser('owner');
    panel.createUser('keeper');
    panel.createUser('deleter');
    panel.createUser('peeker');
    panel.createUser('curator');
    admin = panel.createKey('root', 'application');
    owner = panel.createKey('owner', 'client');
    keeper = panel.createKey('keeper', 'client');
    deleter = panel.createKey('deleter', 'client');
    peeker = panel.createKey('peeker', 'client');
    curator = panel.createKey('curator', 'client');
    db = new DatabaseSync(join(panel.dir, 'data', 'panel.sqlite'));
    db.exec('PRAGMA busy_timeout = 5000');
    web = await adminSession(panel.url, 'root', 'correct horse battery');

    const loc = (await panel.api(admin, 'POST', '/api/application/locations', { short: 'fra1' })).body as Item;
    const node = (await panel.api(admin, 'POST', '/api/application/nodes', { name: 'node-1', fqdn: 'node1.example.test', location_id: loc.attributes.id })).body as Item;
    const allocs = ((await panel.api(admin, 'POST', `/api/application/nodes/${String(node.attributes.id)}/allocations`, { ip: '127.0.0.1', ports: ['25565-25570'] })).body as { data: Item[] }).data.map((a) => a.attributes.id as number);
    nestId = ((await panel.api(admin, 'POST', '/api/application/nests', { name: 'Games' })).body as Item).attributes.id as number;
    const egg = async (name: string): Promise<number> => ((await panel.api(admin, 'POST', `/api/application/nests/${nestId}/eggs`, { name, docker_image: 'img:1', startup: 'run' })).body as Item).attributes.id as number;
    eggA = await egg('Paper');
    eggB = await egg('Vanilla');
    s1 = await createServer('One', eggA, allocs[0] ?? 0, ownerId);
    s2 = await createServer('Two', eggB, allocs[1] ?? 0, ownerId);
    for (const [s, who, permissions] of [[s1, 'keeper', ['file.read', 'file.delete', 'trashbin.access']], [s1, 'deleter', ['file.read', 'file.delete']], [s2, 'keeper', ['file.read', 'file.delete', 'trashbin.access']], [s1, 'peeker', FILE_PERMISSIONS], [s1, 'curator', [...FILE_PERMISSIONS, 'trashbin.access']]] as const) {
      const r = await panel.api(owner, 'POST', `/api/client/servers/${s.identifier}/users`, { email: `${who}@example.test`, permissions });
      assert.equal(r.status, 200, r.text);
    }
  });
  after(async () => {
    db?.close();
    await panel?.stop();
  });

  it('registers the trashbin.access permission', async () => {
    const r = (await panel.api(owner, 'GET', '/api/client/permissions')).body as Item;
    assert.ok((r.attributes.permissions as string[]).includes('trashbin.access'));
  });

  it('moves deleted files into .trash/{id} and lists them from the records, newest first', async () => {
    writeFileSync(vol(s1, 'a.txt'), 'hello');
    mkdirSync(vol(s1, 'plugins', 'deep'), { recursive: true });
    writeFileSync(vol(s1, 'plugins', 'x.jar'), 'jar!');
    writeFileSync(vol(s1, 'plugins', 'deep', 'y.cfg'), 'yy');
    assert.equal((await del(owner, s1, { root: '/', files: ['a.txt'] })).status, 204);
    const r = await del(owner, s1, { root: '/', files: ['plugins', 'plugins/x.jar'] });
    assert.equal(r.status, 204, r.text);
    assert.ok(!existsSync(vol(s1, 'a.txt')) && !existsSync(vol(s1, 'plugins')));
    const [a, p] = records(s1);
    assert.ok(a !== undefined && p !== undefined);
    assert.deepEqual([a.path, a.size, p.path, p.size], ['a.txt', 5, 'plugins', 6], 'a folder counts what is in it, once');
    assert.equal(readFileSync(vol(s1, '.trash', String(a.id)), 'utf8'), 'hello');
    assert.equal(readFileSync(vol(s1, '.trash', String(p.id), 'deep', 'y.cfg'), 'utf8'), 'yy');

    // Answered from the records: the volume may even be away.
    renameSync(vol(s1), `${vol(s1)}.away`);
    let listing: Item[];
    try {
      listing = await trashList(owner, s1);
    } finally {
      renameSync(`${vol(s1)}.away`, vol(s1));
    }
    assert.deepEqual(listing.map((e) => e.attributes.trash_id), [p.id, a.id], 'newest first');
    const entry = listing[1] as Item;
    assert.equal(entry.object, 'trash_bin_file_object');
    assert.deepEqual(Object.keys(entry.attributes).sort(), ['created_at', 'is_file', 'is_symlink', 'is_trash', 'mimetype', 'mode', 'mode_bits', 'modified_at', 'name', 'size', 'trash_id']);
    assert.equal(entry.attributes.name, 'a.txt');
    assert.equal(entry.attributes.mode, '-rw-r--r--');
    assert.equal(entry.attributes.mode_bits, 644);
    assert.equal(entry.attributes.size, 5);
    assert.equal(entry.attributes.is_file, true);
    assert.equal(entry.attributes.is_symlink, false);
    assert.equal(entry.attributes.is_trash, true);
    assert.equal(entry.attributes.mimetype, 'application/octet-stream');
    assert.match(String(entry.attributes.created_at), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.equal(entry.attributes.created_at, entry.attributes.modified_at);
    assert.equal(listing[0]?.attributes.is_file, false);
    for (const dir of ['.trash', '/.trash/', '.trash/']) {
      const same = await panel.api(owner, 'GET', `${files(s1)}/list?directory=${encodeURIComponent(dir)}`);
      assert.equal((same.body as { data: Item[] }).data[0]?.object, 'trash_bin_file_object', dir);
    }

    const root = ((await panel.api(owner, 'GET', `${files(s1)}/list?directory=/`)).body as { data: Item[] }).data;
    assert.deepEqual(root.map((f) => [f.object, f.attributes.name, f.attributes.is_trash, f.attributes.trash_id]), [['file_object', '.trash', false, null]]);
    assert.deepEqual(events(s1, 'server:trashbin.'), ['server:trashbin.trash', 'server:trashbin.trash']);
    assert.deepEqual(events(s1, 'server:file.delete'), [], 'a move to the trash is not a core delete');
  });

  it('restores to the original path, or to (restored) names when it is taken', async () => {
    const [a, p] = records(s1);
    assert.ok(a !== undefined && p !== undefined);
    writeFileSync(vol(s1, 'a.txt'), 'new');
    const r = await panel.api(owner, 'POST', `${files(s1)}/restore`, { files: [a.id, p.id] });
    assert.equal(r.status, 204, r.text);
    assert.equal(readFileSync(vol(s1, 'a.txt'), 'utf8'), 'new');
    assert.equal(readFileSync(vol(s1, 'a.txt (restored)'), 'utf8'), 'hello');
    assert.equal(readFileSync(vol(s1, 'plugins', 'deep', 'y.cfg'), 'utf8'), 'yy');
    assert.deepEqual(records(s1), []);
    assert.deepEqual(await trashList(owner, s1), []);

    assert.equal((await del(owner, s1, { root: '/', files: ['a.txt (restored)'] })).status, 204);
    writeFileSync(vol(s1, 'a.txt (restored)'), 'taken too');
    assert.equal((await del(owner, s1, { root: '/plugins', files: ['x.jar'] })).status, 204);
    mkdirSync(vol(s1, 'gone'));
    writeFileSync(vol(s1, 'gone', 'z.txt'), 'z');
    assert.equal((await del(owner, s1, { root: '/gone', files: ['z.txt'] })).status, 204);
    assert.equal((await del(owner, s1, { root: '/', files: ['gone'] })).status, 204);
    const ids = records(s1).map((e) => e.id);
    assert.equal((await panel.api(owner, 'POST', `${files(s1)}/restore`, { files: ids })).status, 204);
    assert.equal(readFileSync(vol(s1, 'a.txt (restored) (restored)'), 'utf8'), 'hello');
    assert.equal(readFileSync(vol(s1, 'plugins', 'x.jar'), 'utf8'), 'jar!');
    assert.equal(readFileSync(vol(s1, 'gone', 'z.txt'), 'utf8'), 'z', 'a missing parent folder is made again');
    assert.ok(existsSync(vol(s1, 'gone (restored)')), 'the folder trashed after its file finds its name taken');

    writeFileSync(vol(s1, 'c.txt'), 'one');
    await del(owner, s1, { root: '/', files: ['c.txt'] });
    writeFileSync(vol(s1, 'c.txt'), 'two');
    writeFileSync(vol(s1, 'c.txt (restored)'), 'three');
    await panel.api(owner, 'POST', `${files(s1)}/restore`, { files: records(s1).map((e) => e.id) });
    assert.equal(readFileSync(vol(s1, 'c.txt (restored 2)'), 'utf8'), 'one');
    assert.ok(events(s1, 'server:trashbin.restore').length >= 3);
  });

  it('validates restore input and ignores ids of other servers', async () => {
    for (const files_ of [undefined, [], ['1'], [1.5], 'x']) {
      const r = await panel.api(owner, 'POST', `${files(s1)}/restore`, files_ === undefined ? {} : { files: files_ });
      assert.equal(r.status, 422, JSON.stringify(files_));
      assert.equal(firstError(r)?.code, 'ValidationException');
    }
    writeFileSync(vol(s2, 'other.txt'), 'o');
    await del(owner, s2, { root: '/', files: ['other.txt'] });
    const [other] = records(s2);
    assert.ok(other !== undefined);
    assert.equal((await panel.api(owner, 'POST', `${files(s1)}/restore`, { files: [other.id] })).status, 204);
    assert.equal(records(s2).length, 1, 'an id of another server is not restored through this one');
    assert.equal((await del(owner, s1, { root: '/.trash', files: [String(other.id)] })).status, 204);
    assert.equal(records(s2).length, 1, 'nor deleted');
  });

  it('skips ghost records and records whose item is gone, removing both sides', async () => {
    const insert = db.prepare("INSERT INTO trashbin_entries (server_id, path, is_file, is_symlink, size, mode, mode_bits, deleted_at) VALUES (?, ?, 1, 0, 1, '-rw-r--r--', '644', ?) RETURNING id");
    const ghost = (insert.get(s1.id, '.trash/77', new Date().toISOString()) as { id: number }).id;
    const lost = (insert.get(s1.id, 'lost.txt', new Date().toISOString()) as { id: number }).id;
    writeFileSync(vol(s1, '.trash', String(ghost)), 'the ghost item');
    assert.equal((await panel.api(owner, 'POST', `${files(s1)}/restore`, { files: [ghost, lost] })).status, 204);
    assert.deepEqual(records(s1), []);
    assert.ok(!existsSync(vol(s1, '.trash', String(ghost))), 'the ghost item goes with its record');
    assert.ok(!existsSync(vol(s1, '.trash', '77')) && !existsSync(vol(s1, 'lost.txt')));
    assert.deepEqual(lastEvent(s1, 'server:trashbin.restore'), {
      restored: [],
      skipped: [{ id: ghost, file: '.trash/77', reason: 'ghost' }, { id: lost, file: 'lost.txt', reason: 'missing' }],
    });
  });

  it('logs the restores done before a failing one and names the failure, what was restored and what was not tried', async () => {
    writeFileSync(vol(s1, 'r1.txt'), '1');
    mkdirSync(vol(s1, 'blocked'));
    writeFileSync(vol(s1, 'blocked', 'r2.txt'), '2');
    writeFileSync(vol(s1, 'r3.txt'), '3');
    assert.equal((await del(owner, s1, { root: '/', files: ['r1.txt', 'blocked/r2.txt', 'r3.txt'] })).status, 204);
    const [r1, r2, r3] = records(s1).map((r) => r.id);
    assert.ok(r1 !== undefined && r2 !== undefined && r3 !== undefined);
    // The second one cannot go back: its folder is a file now.
    rmSync(vol(s1, 'blocked'), { recursive: true });
    writeFileSync(vol(s1, 'blocked'), 'a file now');

    // The owner has used up this minute's restores on this server; a subuser with trashbin.access has its own.
    const r = await panel.api(curator, 'POST', `${files(s1)}/restore`, { files: [r3, r1, r2] });
    assert.equal(r.status, 400, r.text);
    const error = firstError(r);
    assert.equal(error?.code, 'BadRequestHttpException');
    assert.match(error?.detail ?? '', new RegExp(`^Restoring trash entry ${r2} \\(/blocked/r2\\.txt\\) failed: .*not a directory.* Restored before it: ${r1}\\. Not tried, still in the trash: ${r3}\\.$`));
    assert.deepEqual(error?.meta, { trash_id: r2, restored: [r1], not_tried: [r3] });
    assert.equal(readFileSync(vol(s1, 'r1.txt'), 'utf8'), '1');
    assert.deepEqual(records(s1).map((e) => e.id), [r2, r3]);
    assert.ok(existsSync(vol(s1, '.trash', String(r2))) && existsSync(vol(s1, '.trash', String(r3))));
    const logged = lastEvent(s1, 'server:trashbin.restore');
    assert.deepEqual(logged.restored, [{ id: r1, file: 'r1.txt', to: 'r1.txt' }]);
    assert.deepEqual(logged.skipped, []);
    assert.equal((logged.failed as { id: number }).id, r2);
    assert.equal((logged.failed as { error: string }).error, error?.detail);

    rmSync(vol(s1, 'blocked'));
    assert.equal((await panel.api(curator, 'POST', `${files(s1)}/restore`, { files: [r2, r3] })).status, 204);
    assert.equal(readFileSync(vol(s1, 'blocked', 'r2.txt'), 'utf8'), '2');
    assert.equal(readFileSync(vol(s1, 'r3.txt'), 'utf8'), '3');
    assert.deepEqual(records(s1), []);
  });

  it('logs the items trashed before a failing one', async () => {
    writeFileSync(vol(s1, 't1.txt'), '1');
    writeFileSync(vol(s1, 't2.txt'), '2');
    // The second item's id is taken on disk already, so its move fails.
    const next = (db.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'trashbin_entries'").get() as { seq: number }).seq + 1;
    writeFileSync(vol(s1, '.trash', String(next + 1)), 'in the way');
    const r = await del(owner, s1, { root: '/', files: ['t1.txt', 't2.txt'] });
    assert.equal(r.status, 409, r.text);
    assert.deepEqual(records(s1).map((e) => [e.id, e.path]), [[next, 't1.txt']]);
    assert.ok(existsSync(vol(s1, 't2.txt')));
    assert.deepEqual(lastEvent(s1, 'server:trashbin.trash'), { files: ['t1.txt'], ids: [next], bytes: 1 });
    assert.equal((await del(owner, s1, { root: '/.trash', files: [String(next), String(next + 1)] })).status, 204);
    assert.deepEqual(lastEvent(s1, 'server:trashbin.delete'), { ids: [next], files: ['t1.txt'], orphans: [next + 1] });
    assert.ok(!existsSync(vol(s1, '.trash', String(next + 1))));
    rmSync(vol(s1, 't2.txt'));
  });

  it('hard-deletes with a truthy permanent flag and trashes with a falsy one', async () => {
    for (const permanent of [true, 1, '1', 'true', 'yes']) {
      writeFileSync(vol(s1, 'p.txt'), 'p');
      assert.equal((await del(owner, s1, { root: '/', files: ['p.txt'], permanent })).status, 204);
      assert.ok(!existsSync(vol(s1, 'p.txt')));
      assert.deepEqual(records(s1), [], String(permanent));
    }
    assert.ok(events(s1, 'server:file.delete').length >= 5, 'a hard delete is the core delete');
    for (const permanent of [false, 0, '0', 'false']) {
      writeFileSync(vol(s1, 'p.txt'), 'p');
      assert.equal((await del(owner, s1, { root: '/', files: ['p.txt'], permanent })).status, 204);
      assert.equal(records(s1).length, 1, String(permanent));
      await del(owner, s1, { root: '/.trash', files: records(s1).map((e) => String(e.id)) });
    }
  });

  it('deletes trash ids for good through the /.trash root, ignoring permanent', async () => {
    writeFileSync(vol(s1, 'd.txt'), 'd');
    writeFileSync(vol(s1, 'e.txt'), 'e');
    await del(owner, s1, { root: '/', files: ['d.txt', 'e.txt'] });
    const [d, e] = records(s1);
    assert.ok(d !== undefined && e !== undefined);
    const logged = events(s1, 'server:trashbin.delete').length;
    const bad = await del(owner, s1, { root: '/.trash', files: ['abc', String(d.id)] });
    assert.equal(bad.status, 422);
    assert.equal(firstError(bad)?.meta?.source_field, 'files.0');
    assert.equal((await del(owner, s1, { root: '/.trash', files: [String(d.id)], permanent: false })).status, 204);
    assert.deepEqual(records(s1).map((r) => r.id), [e.id]);
    assert.ok(!existsSync(vol(s1, '.trash', String(d.id))));
    assert.ok(existsSync(vol(s1, '.trash', String(e.id))));
    assert.equal(events(s1, 'server:trashbin.delete').length, logged + 1);
    await del(owner, s1, { root: '/.trash', files: [String(e.id)] });
  });

  it('refuses to trash the trash folder and guards it while protect_trash_dir is on', async () => {
    writeFileSync(vol(s1, 'k.txt'), 'k');
    await del(owner, s1, { root: '/', files: ['k.txt'] });
    const [k] = records(s1);
    assert.ok(k !== undefined);
    for (const body of [{ root: '/', files: ['.trash'] }, { root: '.trash', files: [String(k.id)] }, { root: '/', files: [`.trash/${k.id}`] }, { root: '/x', files: ['../.trash'] }]) {
      const r = await del(owner, s1, body);
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(firstError(r)?.code, 'DisplayException');
    }
    assert.equal((await del(owner, s1, { root: '/', files: ['.trash'], permanent: true })).status, 400, 'no deleting the folder for good either');
    const guarded = [
      await panel.api(owner, 'POST', `${files(s1)}/write?file=/.trash/new.txt`, 'x', { 'content-type': 'text/plain' }),
      await panel.api(owner, 'PUT', `${files(s1)}/rename`, { root: '/', files: [{ from: 'a.txt', to: '.trash/a.txt' }] }),
      await panel.api(owner, 'PUT', `${files(s1)}/rename`, { root: '/.trash', files: [{ from: String(k.id), to: '../k.txt' }] }),
      await panel.api(owner, 'PUT', `${files(s1)}/rename`, { root: '/', files: [{ from: '.trash', to: 'bin' }] }),
      await panel.api(owner, 'POST', `${files(s1)}/create-folder`, { root: '/.trash', name: 'sub' }),
    ];
    assert.deepEqual(guarded.map((r) => r.status), [400, 400, 400, 400, 400]);
    assert.ok(existsSync(vol(s1, '.trash', String(k.id))) && existsSync(vol(s1, 'a.txt')));

    await saveSettings({ protect_trash_dir: false });
    assert.equal((await panel.api(owner, 'POST', `${files(s1)}/create-folder`, { root: '/.trash', name: 'sub' })).status, 204);
    assert.equal((await del(owner, s1, { root: '/', files: ['.trash/sub'], permanent: true })).status, 204);
    assert.equal((await del(owner, s1, { root: '/', files: ['.trash'] })).status, 400, 'trashing the trash stays refused');
    await saveSettings({ protect_trash_dir: true });
    await del(owner, s1, { root: '/.trash', files: [String(k.id)] });
  });

  it('keeps the trash inside the volume: links move as links, escapes are refused', async () => {
    const outside = mkdtempSync(join(tmpdir(), 'hk-trash-outside-'));
    writeFileSync(join(outside, 'secret.txt'), 'top secret');
    symlinkSync(outside, vol(s1, 'escape'));
    const refused = await del(owner, s1, { root: '/escape', files: ['secret.txt'] });
    assert.equal(refused.status, 403, refused.text);
    assert.equal((await del(owner, s1, { root: '/', files: ['../x'] })).status, 403);
    assert.equal((await del(owner, s1, { root: '/', files: ['escape'] })).status, 204);
    const [link] = records(s1);
    assert.ok(link !== undefined);
    assert.ok(lstatSync(vol(s1, '.trash', String(link.id))).isSymbolicLink(), 'the link itself moved');
    assert.equal(readFileSync(join(outside, 'secret.txt'), 'utf8'), 'top secret');
    assert.equal(((await trashList(owner, s1))[0]?.attributes.is_symlink), true);
    assert.equal((await del(owner, s1, { root: '/.trash', files: [String(link.id)] })).status, 204);
    assert.ok(existsSync(join(outside, 'secret.txt')), 'deleting the trashed link leaves its target alone');
  });

  it('caps the files of one delete request at max_files_per_delete', async () => {
    await saveSettings({ max_files_per_delete: 2 });
    const r = await del(owner, s1, { root: '/', files: ['1', '2', '3'] });
    assert.equal(r.status, 422);
    assert.equal(firstError(r)?.meta?.source_field, 'files');
    assert.equal((await del(owner, s1, { root: '/', files: ['1', '2', '3'], permanent: true })).status, 422);
    assert.equal((await del(owner, s1, { root: '/', files: ['missing-1', 'missing-2'] })).status, 204);
    await saveSettings({ max_files_per_delete: 100 });
  });

  it('answers 409 when the effective quota is exceeded and moves nothing', async () => {
    const quota = async (s: Server): Promise<Record<string, unknown>> => {
      const r = await panel.api(owner, 'GET', `${files(s)}/trash-quota`);
      assert.equal(r.status, 200, r.text);
      assert.equal((r.body as Item).object, 'trash_quota');
      return (r.body as Item).attributes;
    };
    assert.deepEqual(await quota(s1), { enabled: true, cap_bytes: 0, used_bytes: 0, retention_hours: 24 });
    await saveSettings({ default_max_mb_per_server: 1 });
    writeFileSync(vol(s1, 'big.bin'), Buffer.alloc(2 * MIB));
    writeFileSync(vol(s1, 'm1.bin'), Buffer.alloc(PART));
    writeFileSync(vol(s1, 'm2.bin'), Buffer.alloc(PART));
    const big = await del(owner, s1, { root: '/', files: ['big.bin'] });
    assert.equal(big.status, 409);
    assert.equal(firstError(big)?.code, 'FileTooLargeForTrash');
    assert.deepEqual(firstError(big)?.meta, { file_size: 2 * MIB, cap_bytes: MIB });
    const full = await del(owner, s1, { root: '/', files: ['m1.bin', 'm2.bin'] });
    assert.equal(full.status, 409);
    assert.equal(firstError(full)?.code, 'TrashBinFull');
    assert.deepEqual(firstError(full)?.meta, { used_bytes: 0, cap_bytes: MIB, incoming_bytes: 2 * PART });
    assert.ok(existsSync(vol(s1, 'm1.bin')) && existsSync(vol(s1, 'm2.bin')) && existsSync(vol(s1, 'big.bin')), 'nothing moved');
    assert.deepEqual(records(s1), []);
    assert.equal((await del(owner, s1, { root: '/', files: ['m1.bin'] })).status, 204);
    const again = await del(owner, s1, { root: '/', files: ['m2.bin'] });
    assert.equal(firstError(again)?.code, 'TrashBinFull');
    assert.equal(firstError(again)?.meta?.used_bytes, PART);
    assert.deepEqual(await quota(s1), { enabled: true, cap_bytes: MIB, used_bytes: PART, retention_hours: 24 });
    assert.equal((await quota(s2)).cap_bytes, MIB);

    // The egg's 0 is unlimited and does not inherit the global cap; the other egg keeps it.
    assert.equal((await web.post('/admin/trashbin/egg', { egg_id: String(eggA), retention_hours: '48', max_mb: '0' })).status, 303);
    assert.deepEqual(await quota(s1), { enabled: true, cap_bytes: 0, used_bytes: PART, retention_hours: 48 });
    assert.equal((await quota(s2)).cap_bytes, MIB);
    assert.equal((await del(owner, s1, { root: '/', files: ['big.bin'] })).status, 204);

    // A server override wins over the egg; its null inherits the egg's value.
    db.prepare('INSERT INTO trashbin_server_overrides (server_id, max_bytes, retention_hours) VALUES (?, 100, NULL)').run(s1.id);
    assert.deepEqual(await quota(s1), { enabled: true, cap_bytes: 100, used_bytes: PART + 2 * MIB, retention_hours: 48 });
    const server = await del(owner, s1, { root: '/', files: ['m2.bin'] });
    assert.equal(firstError(server)?.code, 'FileTooLargeForTrash');
    assert.equal(firstError(server)?.meta?.cap_bytes, 100);
    db.prepare('UPDATE trashbin_server_overrides SET max_bytes = 0 WHERE server_id = ?').run(s1.id);
    assert.equal((await del(owner, s1, { root: '/', files: ['m2.bin'] })).status, 204, 'the server 0 is unlimited');
    db.prepare('UPDATE trashbin_server_overrides SET max_bytes = NULL WHERE server_id = ?').run(s1.id);
    assert.equal((await quota(s1)).cap_bytes, 0, 'null inherits the egg');
    await saveSettings({ default_max_mb_per_server: 0 });
    await del(owner, s1, { root: '/.trash', files: records(s1).map((e) => String(e.id)) });
  });

  it('reads hand-written overrides past 2^53 - 1 as no practical limit instead of failing', async () => {
    const huge = 2n ** 63n - 1n;
    db.prepare('UPDATE trashbin_server_overrides SET max_bytes = ?, retention_hours = ? WHERE server_id = ?').run(huge, huge, s1.id);
    const quota = await panel.api(owner, 'GET', `${files(s1)}/trash-quota`);
    assert.equal(quota.status, 200, quota.text);
    assert.deepEqual((quota.body as Item).attributes, { enabled: true, cap_bytes: Number.MAX_SAFE_INTEGER, used_bytes: 0, retention_hours: Number.MAX_SAFE_INTEGER });
    writeFileSync(vol(s1, 'kept.txt'), 'kept');
    assert.equal((await del(owner, s1, { root: '/', files: ['kept.txt'] })).status, 204);
    const [kept] = records(s1);
    db.prepare('UPDATE trashbin_entries SET deleted_at = ? WHERE id = ?').run(new Date(0).toISOString(), kept?.id ?? 0);
    assert.equal((await web.post('/admin/trashbin/purge-now')).status, 303);
    assert.deepEqual(records(s1).map((r) => r.path), ['kept.txt'], 'nothing is past such a retention');
    assert.doesNotMatch(panel.daemon.output(), /trash purge of a server failed/);
    db.prepare('UPDATE trashbin_server_overrides SET max_bytes = NULL, retention_hours = NULL WHERE server_id = ?').run(s1.id);
    await del(owner, s1, { root: '/.trash', files: records(s1).map((e) => String(e.id)) });
  });

  it('hard-deletes while the addon is switched off and keeps the existing trash', async () => {
    writeFileSync(vol(s1, 'kept.txt'), 'kept');
    await del(owner, s1, { root: '/', files: ['kept.txt'] });
    await saveSettings({ enabled: false });
    writeFileSync(vol(s1, 'off.txt'), 'off');
    assert.equal((await del(owner, s1, { root: '/', files: ['off.txt'] })).status, 204);
    assert.ok(!existsSync(vol(s1, 'off.txt')));
    assert.deepEqual(records(s1).map((r) => r.path), ['kept.txt']);
    assert.equal((await trashList(owner, s1)).length, 1);
    const q = (await panel.api(owner, 'GET', `${files(s1)}/trash-quota`)).body as Item;
    assert.equal(q.attributes.enabled, false);
    assert.equal((await del(owner, s1, { root: '/', files: ['.trash'] })).status, 400, 'the guard still protects the kept trash');
    await saveSettings({ enabled: true });
  });

  it('lets subusers without trashbin.access delete into the trash but not see or manage it', async () => {
    writeFileSync(vol(s1, 'sub.txt'), 's');
    assert.equal((await del(deleter, s1, { root: '/', files: ['sub.txt'] })).status, 204);
    const id = records(s1).find((r) => r.path === 'sub.txt')?.id ?? 0;
    assert.ok(existsSync(vol(s1, '.trash', String(id))));
    const denied = [
      await panel.api(deleter, 'GET', `${files(s1)}/list?directory=/.trash`),
      await panel.api(deleter, 'POST', `${files(s1)}/restore`, { files: [id] }),
      await panel.api(deleter, 'POST', `${files(s1)}/trash/empty`),
      await del(deleter, s1, { root: '/.trash', files: [String(id)] }),
    ];
    assert.deepEqual(denied.map((r) => r.status), [403, 403, 403, 403]);
    assert.equal((await panel.api(deleter, 'GET', `${files(s1)}/trash-quota`)).status, 200, 'the quota needs file.read only');
    assert.equal((await panel.api(deleter, 'GET', `${files(s1)}/list?directory=/`)).status, 200);

    assert.deepEqual((await trashList(keeper, s1)).map((e) => e.attributes.trash_id).includes(id), true);
    assert.equal((await panel.api(keeper, 'POST', `${files(s1)}/restore`, { files: [id] })).status, 204);
    assert.ok(existsSync(vol(s1, 'sub.txt')));
    const stranger = await panel.api(deleter, 'GET', `${files(s2)}/trash-quota`);
    assert.equal(stranger.status, 404, 'a server the user has no access to');
  });

  describe('the trash folder on the core file routes', () => {
    let n: number;
    // Each client file route with each spelling of a path under .trash: slashes doubled, `.` and
    // `..` components, no leading slash, every character percent-encoded, and through symlinks to
    // the trash folder made inside the volume outside the API (as the game server could): `t` a
    // relative one, `abs` an absolute one.
    const LINKS = ['t', 'abs'];
    const pct = (p: string): string => [...p].map((c) => `%${c.charCodeAt(0).toString(16).padStart(2, '0')}`).join('');
    const trashRoutes = (key: string): [string, () => Promise<Response>][] => {
      const calls: [string, () => Promise<Response>][] = [];
      const folders = [`/.trash/${n}`, `.trash/${n}`, `//.trash//${n}/`, `/./.trash/./${n}`, `/docs/../.trash/${n}`, ...LINKS.map((l) => `/${l}/${n}`)];
      for (const dir of folders) {
        const file = `${dir}/secret.txt`;
        calls.push(
          [`list ${dir}`, () => panel.api(key, 'GET', `${files(s1)}/list?directory=${encodeURIComponent(dir)}`)],
          [`contents ${file}`, () => panel.api(key, 'GET', `${files(s1)}/contents?file=${encodeURIComponent(file)}`)],
          [`write ${file}`, () => panel.api(key, 'POST', `${files(s1)}/write?file=${encodeURIComponent(file)}`, 'overwritten', { 'content-type': 'text/plain' })],
          [`rename ${file}`, () => panel.api(key, 'PUT', `${files(s1)}/rename`, { root: '/', files: [{ from: file, to: 'stolen.txt' }] })],
          [`create-folder ${dir}`, () => panel.api(key, 'POST', `${files(s1)}/create-folder`, { root: dir, name: 'made' })],
          [`delete ${file}`, () => del(key, s1, { root: '/', files: [file], permanent: true })],
        );
      }
      calls.push(
        ['list percent-encoded', () => panel.api(key, 'GET', `${files(s1)}/list?directory=${pct(`/.trash/${n}`)}`)],
        ['contents percent-encoded', () => panel.api(key, 'GET', `${files(s1)}/contents?file=${pct(`/.trash/${n}/secret.txt`)}`)],
        ['write percent-encoded', () => panel.api(key, 'POST', `${files(s1)}/write?file=${pct(`/.trash/${n}/secret.txt`)}`, 'overwritten', { 'content-type': 'text/plain' })],
        ['list the trash', () => panel.api(key, 'GET', `${files(s1)}/list?directory=${encodeURIComponent('//.trash/.')}`)],
        ['rename into the trash', () => panel.api(key, 'PUT', `${files(s1)}/rename`, { root: '/', files: [{ from: 'mine.txt', to: '.trash/mine.txt' }] })],
        ['rename out of the trash root', () => panel.api(key, 'PUT', `${files(s1)}/rename`, { root: '/.trash', files: [{ from: String(n), to: '../stolen' }] })],
        ['rename the trash folder', () => panel.api(key, 'PUT', `${files(s1)}/rename`, { root: '/', files: [{ from: './.trash', to: 'bin' }] })],
        ['create-folder by name', () => panel.api(key, 'POST', `${files(s1)}/create-folder`, { root: '/docs/..', name: '.trash/made' })],
        ['delete trash ids', () => del(key, s1, { root: '/.trash', files: [String(n)] })],
        ['delete relative to another folder', () => del(key, s1, { root: '/docs', files: [`../.trash/${n}`], permanent: true })],
      );
      for (const l of LINKS) {
        calls.push(
          [`list the trash through ${l}`, () => panel.api(key, 'GET', `${files(s1)}/list?directory=/${l}`)],
          [`rename out of the trash through ${l}`, () => panel.api(key, 'PUT', `${files(s1)}/rename`, { root: '/', files: [{ from: `${l}/${n}`, to: 'stolen' }] })],
          [`rename into the trash through ${l}`, () => panel.api(key, 'PUT', `${files(s1)}/rename`, { root: '/', files: [{ from: 'mine.txt', to: `${l}/mine.txt` }] })],
          [`delete through ${l}`, () => del(key, s1, { root: `/${l}`, files: [String(n)] })],
          [`delete for good through ${l}`, () => del(key, s1, { root: '/', files: [`${l}/${n}`], permanent: true })],
        );
      }
      return calls;
    };
    const untouched = (): void => {
      assert.equal(readFileSync(vol(s1, '.trash', String(n), 'secret.txt'), 'utf8'), 'classified');
      assert.ok(records(s1).some((r) => r.id === n));
      for (const p of ['stolen.txt', 'stolen', 'bin', '.trash/mine.txt', `.trash/${n}/made`, '.trash/made']) assert.ok(!existsSync(vol(s1, p)), p);
      assert.ok(existsSync(vol(s1, 'mine.txt')));
    };

    before(async () => {
      mkdirSync(vol(s1, 'docs'));
      writeFileSync(vol(s1, 'docs', 'secret.txt'), 'classified');
      writeFileSync(vol(s1, 'mine.txt'), 'mine');
      assert.equal((await del(owner, s1, { root: '/', files: ['docs'] })).status, 204);
      n = records(s1).find((r) => r.path === 'docs')?.id ?? 0;
      symlinkSync('.trash', vol(s1, 't'));
      symlinkSync(vol(s1, '.trash'), vol(s1, 'abs'));
    });
    after(() => {
      for (const l of LINKS) rmSync(vol(s1, l), { force: true });
    });

    it('answers 403 on every route and spelling to a subuser without trashbin.access, protect_trash_dir on or off', async () => {
      for (const protect of [true, false]) {
        await saveSettings({ protect_trash_dir: protect });
        for (const [label, request] of trashRoutes(peeker)) {
          const r = await request();
          assert.equal(r.status, 403, `${label} (protect ${protect}): ${r.text}`);
          assert.equal(firstError(r)?.code, 'AccessDeniedHttpException', label);
          assert.match(firstError(r)?.detail ?? '', /trashbin\.access/, label);
        }
        untouched();
      }
      await saveSettings({ protect_trash_dir: true });
      // The same subuser keeps every other folder, and `.TRASH` is another folder on a case-sensitive volume.
      assert.equal((await panel.api(peeker, 'POST', `${files(s1)}/write?file=/.TRASH/note.txt`, 'n', { 'content-type': 'text/plain' })).status, 204);
      assert.equal((await panel.api(peeker, 'GET', `${files(s1)}/contents?file=/.TRASH/note.txt`)).text, 'n');
      assert.equal((await panel.api(peeker, 'GET', `${files(s1)}/contents?file=/mine.txt`)).text, 'mine');
      assert.equal((await del(peeker, s1, { root: '/', files: ['.TRASH'], permanent: true })).status, 204);
    });

    it('lets a subuser with trashbin.access and the owner read there, and change there only while protect_trash_dir is off', async () => {
      for (const key of [curator, owner]) {
        const listing = await panel.api(key, 'GET', `${files(s1)}/list?directory=${encodeURIComponent(`//.trash/${n}/`)}`);
        assert.equal(listing.status, 200, listing.text);
        assert.deepEqual((listing.body as { data: Item[] }).data.map((f) => f.attributes.name), ['secret.txt'], 'a trashed folder lists from the volume');
        assert.equal((await panel.api(key, 'GET', `${files(s1)}/contents?file=${pct(`/.trash/${n}/secret.txt`)}`)).text, 'classified');
        assert.ok((await trashList(key, s1)).some((e) => e.attributes.trash_id === n));
        for (const l of LINKS) {
          const through = await panel.api(key, 'GET', `${files(s1)}/list?directory=/${l}`);
          assert.equal(through.status, 200, through.text);
          assert.ok((through.body as { data: Item[] }).data.some((e) => e.attributes.trash_id === n), `a link to the trash lists the records (${l})`);
          assert.equal((await panel.api(key, 'GET', `${files(s1)}/contents?file=/${l}/${n}/secret.txt`)).text, 'classified');
        }
      }
      // protect_trash_dir on: the routes that change refuse as before, to holders of trashbin.access too.
      const changes = trashRoutes(curator).filter(([label]) => !label.startsWith('list') && !label.startsWith('contents') && label !== 'delete trash ids');
      for (const [label, request] of changes) {
        const r = await request();
        assert.equal(r.status, 400, `${label}: ${r.text}`);
        assert.equal(firstError(r)?.code, 'DisplayException', label);
      }
      untouched();

      await saveSettings({ protect_trash_dir: false });
      const inside = `/.trash/${n}`;
      assert.equal((await panel.api(curator, 'POST', `${files(s1)}/write?file=${encodeURIComponent(`${inside}/added.txt`)}`, 'added', { 'content-type': 'text/plain' })).status, 204);
      assert.equal((await panel.api(curator, 'PUT', `${files(s1)}/rename`, { root: inside, files: [{ from: 'added.txt', to: 'moved.txt' }] })).status, 204);
      assert.equal((await panel.api(curator, 'POST', `${files(s1)}/create-folder`, { root: inside, name: 'made' })).status, 204);
      assert.equal((await del(curator, s1, { root: inside, files: ['moved.txt'], permanent: true })).status, 204);
      assert.deepEqual(readdirSync(vol(s1, '.trash', String(n))).sort(), ['made', 'secret.txt']);
      await saveSettings({ protect_trash_dir: true });

      assert.equal((await panel.api(curator, 'POST', `${files(s1)}/restore`, { files: [n] })).status, 204);
      assert.equal(readFileSync(vol(s1, 'docs', 'secret.txt'), 'utf8'), 'classified');
      assert.ok(existsSync(vol(s1, 'docs', 'made')));
      assert.equal((await del(owner, s1, { root: '/', files: ['docs', 'mine.txt'], permanent: true })).status, 204);
    });
  });

  it('limits restore and empty to 10 requests a minute', async () => {
    for (const path of ['restore', 'trash/empty']) {
      const body = path === 'restore' ? { files: [999_999] } : undefined;
      for (let i = 0; i < 10; i++) assert.equal((await panel.api(keeper, 'POST', `${files(s2)}/${path}`, body)).status, 204, `${path} ${i}`);
      const limited = await panel.api(keeper, 'POST', `${files(s2)}/${path}`, body);
      assert.equal(limited.status, 429, path);
      assert.equal(firstError(limited)?.code, 'TooManyRequestsHttpException');
    }
    const res = await fetch(`${panel.url}${files(s2)}/restore`, { method: 'POST', headers: { authorization: `Bearer ${keeper}`, 'content-type': 'application/json' }, body: '{"files":[1]}' });
    assert.equal(res.status, 429);
    assert.match(res.headers.get('retry-after') ?? '', /^\d+$/);
  });

  it('empties a server trash whatever the retention', async () => {
    writeFileSync(vol(s2, 'e1.txt'), '1');
    writeFileSync(vol(s2, 'e2.txt'), '2');
    await del(owner, s2, { root: '/', files: ['e1.txt', 'e2.txt'] });
    const ids = records(s2).map((r) => r.id);
    assert.equal(ids.length, 2);
    assert.equal((await panel.api(owner, 'POST', `${files(s2)}/trash/empty`)).status, 204);
    assert.deepEqual(records(s2), []);
    assert.deepEqual(await trashList(owner, s2), []);
    for (const id of ids) assert.ok(!existsSync(vol(s2, '.trash', String(id))));
    assert.ok(events(s2, 'server:trashbin.empty').length >= 1);
  });

  it('removes orphan items without a record on delete by id and on empty, and keeps them their retention in the purge', async () => {
    // Named like entries, with no record: the reverse of a ghost (a crash, a database restored from a backup).
    mkdirSync(vol(s2, '.trash', '900002'), { recursive: true });
    writeFileSync(vol(s2, '.trash', '900001'), 'orphan one');
    writeFileSync(vol(s2, '.trash', '900002', 'inner.txt'), 'orphan two');
    writeFileSync(vol(s2, '.trash', 'notes.txt'), 'never an entry');
    writeFileSync(vol(s2, 'kept.txt'), 'k');
    await del(owner, s2, { root: '/', files: ['kept.txt'] });
    const kept = records(s2)[0]?.id ?? 0;

    // Moved in just now: the purge keeps an orphan for its retention, like an entry.
    assert.equal((await web.post('/admin/trashbin/purge-now')).status, 303);
    assert.ok(existsSync(vol(s2, '.trash', '900001')) && existsSync(vol(s2, '.trash', '900002')));
    assert.deepEqual(records(s2).map((r) => r.id), [kept]);

    assert.equal((await del(owner, s2, { root: '/.trash', files: ['900001'] })).status, 204);
    assert.ok(!existsSync(vol(s2, '.trash', '900001')));
    assert.ok(existsSync(vol(s2, '.trash', '900002')) && existsSync(vol(s2, '.trash', String(kept))));
    assert.deepEqual(lastEvent(s2, 'server:trashbin.delete'), { ids: [], files: [], orphans: [900001] });

    assert.equal((await panel.api(owner, 'POST', `${files(s2)}/trash/empty`)).status, 204);
    assert.deepEqual(records(s2), []);
    assert.deepEqual(readdirSync(vol(s2, '.trash')), ['notes.txt'], 'a name the trash bin never gives stays');
    assert.deepEqual(lastEvent(s2, 'server:trashbin.empty'), { count: 1, bytes: 1, orphans: [900002] });
    rmSync(vol(s2, '.trash', 'notes.txt'));
  });

  it('never takes a .trash link for the trash folder: nothing moved into, restored from or deleted under it', async () => {
    mkdirSync(vol(s2, 'saves'));
    for (const n of ['1', '2', '3']) writeFileSync(vol(s2, 'saves', n), `save ${n}`);
    writeFileSync(vol(s2, 'saves', 'kept.txt'), 'k');
    writeFileSync(vol(s2, 'live.txt'), 'live');
    await del(owner, s2, { root: '/', files: ['live.txt'] });
    const id = records(s2)[0]?.id ?? 0;
    renameSync(vol(s2, '.trash'), vol(s2, 'trash-away'));
    symlinkSync('saves', vol(s2, '.trash'));
    try {
      const refused = (r: { status: number; body: unknown; text: string }, what: string): void => {
        assert.equal(r.status, 400, `${what}: ${r.text}`);
        assert.equal(firstError(r)?.code, 'DisplayException', what);
        assert.match(firstError(r)?.detail ?? '', /\/\.trash is a link to \/saves, not the trash folder/, what);
      };
      writeFileSync(vol(s2, 'next.txt'), 'next');
      refused(await del(owner, s2, { root: '/', files: ['next.txt'] }), 'delete into the trash');
      refused(await panel.api(owner, 'POST', `${files(s2)}/trash/empty`), 'empty');
      refused(await del(owner, s2, { root: '/.trash', files: ['1', String(id)] }), 'delete by id');
      refused(await panel.api(owner, 'POST', `${files(s2)}/restore`, { files: [id] }), 'restore');
      assert.equal((await web.post('/admin/trashbin/purge-now')).status, 303);
      assert.deepEqual(readdirSync(vol(s2, 'saves')).sort(), ['1', '2', '3', 'kept.txt'], 'the linked folder keeps every file');
      assert.ok(existsSync(vol(s2, 'next.txt')));
      assert.deepEqual(records(s2).map((r) => r.id), [id]);
    } finally {
      rmSync(vol(s2, '.trash'));
      renameSync(vol(s2, 'trash-away'), vol(s2, '.trash'));
    }
    assert.equal((await panel.api(owner, 'POST', `${files(s2)}/restore`, { files: [id] })).status, 204);
    assert.equal(readFileSync(vol(s2, 'live.txt'), 'utf8'), 'live');
    rmSync(vol(s2, 'saves'), { recursive: true });
    rmSync(vol(s2, 'live.txt'));
    rmSync(vol(s2, 'next.txt'));
  });

  it('refuses to restore through a folder that became a link into the trash, and keeps the entry', async () => {
    mkdirSync(vol(s2, 'g'));
    writeFileSync(vol(s2, 'g', '500'), 'precious');
    await del(owner, s2, { root: '/', files: ['g/500'] });
    const id = records(s2)[0]?.id ?? 0;
    rmSync(vol(s2, 'g'), { recursive: true });
    symlinkSync('.trash', vol(s2, 'g'));
    const r = await panel.api(owner, 'POST', `${files(s2)}/restore`, { files: [id] });
    assert.equal(r.status, 400, r.text);
    assert.match(firstError(r)?.detail ?? '', /\/g\/500 now leads into the trash folder \(\/\.trash\/500\)/);
    assert.deepEqual(records(s2).map((x) => x.id), [id], 'the entry stays');
    assert.ok(!existsSync(vol(s2, '.trash', '500')));
    rmSync(vol(s2, 'g'));
    assert.equal((await panel.api(owner, 'POST', `${files(s2)}/restore`, { files: [id] })).status, 204);
    assert.equal(readFileSync(vol(s2, 'g', '500'), 'utf8'), 'precious');
    rmSync(vol(s2, 'g'), { recursive: true });
  });

  it('restores a name at the 255-byte limit under a shortened (restored) name', async () => {
    const name = 'n'.repeat(250);
    writeFileSync(vol(s2, name), 'old');
    await del(owner, s2, { root: '/', files: [name] });
    const id = records(s2)[0]?.id ?? 0;
    writeFileSync(vol(s2, name), 'new');
    assert.equal((await panel.api(owner, 'POST', `${files(s2)}/restore`, { files: [id] })).status, 204);
    assert.equal(readFileSync(vol(s2, `${'n'.repeat(244)} (restored)`), 'utf8'), 'old');
    rmSync(vol(s2, name));
    rmSync(vol(s2, `${'n'.repeat(244)} (restored)`));
  });

  it('says the volume root cannot be deleted, and shows an escaping path with single slashes', async () => {
    for (const f of ['', '.', '/', 'dir/..']) {
      const r = await del(owner, s2, { root: '/', files: [f] });
      assert.equal(r.status, 400, `${JSON.stringify(f)}: ${r.text}`);
      assert.equal(firstError(r)?.detail, 'the volume root cannot be deleted', JSON.stringify(f));
    }
    const out = await del(owner, s2, { root: '/', files: ['../../etc/passwd'] });
    assert.equal(out.status, 403, out.text);
    assert.match(firstError(out)?.detail ?? '', /^"\/\.\.\/\.\.\/etc\/passwd" leads outside/);
  });

  it('purges only entries past their effective retention, clamped to at least an hour', async () => {
    const trashAged = async (s: Server, name: string, hoursAgo: number): Promise<number> => {
      writeFileSync(vol(s, name), name);
      assert.equal((await del(owner, s, { root: '/', files: [name] })).status, 204);
      const id = records(s).find((r) => r.path === name)?.id ?? 0;
      db.prepare('UPDATE trashbin_entries SET deleted_at = ? WHERE id = ?').run(new Date(Date.now() - hoursAgo * 3_600_000).toISOString(), id);
      return id;
    };
    await saveSettings({ retention_hours: 1 });
    // s1: server override retention 0 (clamped to 1 h) over the egg's 48 h; s2 follows the global 1 h.
    db.prepare('UPDATE trashbin_server_overrides SET retention_hours = 0 WHERE server_id = ?').run(s1.id);
    const fresh1 = await trashAged(s1, 'fresh.txt', 0.5);
    const old1 = await trashAged(s1, 'old.txt', 2);
    const fresh2 = await trashAged(s2, 'fresh.txt', 0.5);
    const old2 = await trashAged(s2, 'old.txt', 1.5);
    const purged = await web.post('/admin/trashbin/purge-now');
    assert.equal(purged.status, 303);
    assert.ok(records(s1).some((r) => r.id === fresh1) && !records(s1).some((r) => r.id === old1));
    assert.deepEqual(records(s2).map((r) => r.id), [fresh2]);
    assert.ok(!existsSync(vol(s1, '.trash', String(old1))) && !existsSync(vol(s2, '.trash', String(old2))));
    assert.ok(existsSync(vol(s1, '.trash', String(fresh1))));
    assert.match((await web.get('/admin/trashbin')).text, /Purged 2 entries past their retention/);
    assert.ok(events(s1, 'server:trashbin.purge').length === 1);

    // Without the server override the egg's 48 h apply.
    db.prepare('DELETE FROM trashbin_server_overrides WHERE server_id = ?').run(s1.id);
    const aged = await trashAged(s1, 'aged.txt', 30);
    await web.post('/admin/trashbin/purge-now');
    assert.ok(records(s1).some((r) => r.id === aged));
    db.prepare('UPDATE trashbin_entries SET deleted_at = ? WHERE id = ?').run(new Date(Date.now() - 49 * 3_600_000).toISOString(), aged);
    await web.post('/admin/trashbin/purge-now');
    assert.ok(!records(s1).some((r) => r.id === aged));
    await saveSettings({ retention_hours: 24 });
  });

  it('stops the activity entries when logging_enabled is off, not the moves', async () => {
    await saveSettings({ logging_enabled: false });
    const before_ = events(s1, 'server:trashbin.').length;
    writeFileSync(vol(s1, 'quiet.txt'), 'q');
    assert.equal((await del(owner, s1, { root: '/', files: ['quiet.txt'] })).status, 204);
    assert.ok(records(s1).some((r) => r.path === 'quiet.txt'));
    assert.equal(events(s1, 'server:trashbin.').length, before_);
    await saveSettings({ logging_enabled: true });
  });

  it('reads settings through a 300 s cache that admin writes clear at once', async () => {
    writeFileSync(vol(s1, 'cached.txt'), 'c');
    assert.equal((await panel.api(owner, 'GET', `${files(s1)}/trash-quota`)).status, 200, 'reads the settings once');
    db.prepare("UPDATE trashbin_settings SET value = '0' WHERE key = 'enabled'").run();
    assert.equal((await del(owner, s1, { root: '/', files: ['cached.txt'] })).status, 204);
    assert.ok(records(s1).some((r) => r.path === 'cached.txt'), 'a direct edit of the row is not seen yet');
    await saveSettings({ enabled: true });
    const q = (await panel.api(owner, 'GET', `${files(s1)}/trash-quota`)).body as Item;
    assert.equal(q.attributes.enabled, true);
    assert.equal((db.prepare("SELECT value FROM trashbin_settings WHERE key = 'enabled'").get() as { value: string }).value, '1', 'booleans are stored as 1/0');
  });

  it('serves the admin settings page, validates, resets and manages egg overrides', async () => {
    const page = await web.get('/admin/trashbin');
    assert.equal(page.status, 200);
    assert.match(page.text, /href="\/admin\/trashbin"/, 'the nav entry');
    assert.match(page.text, /id="trash-fleet"/);
    assert.match(page.text, /id="trash-effective">[^<]*a server’s trash has no size limit unless/, 'the default of 0 MB read as a limit');
    assert.match(page.text, /id="trash-top-servers"[\s\S]*One/);
    assert.match(page.text, /id="trash-egg-overrides"[\s\S]*Paper[\s\S]*48 h[\s\S]*unlimited/);
    assert.match((await web.get('/admin')).text, /Trash Bin/);
    // Purging deletes files for good: the button only opens the question, the form under it acts.
    assert.match(page.text, /<details class="confirm"><summary class="button">Purge expired entries now<\/summary><form method="post" action="\/admin\/trashbin\/purge-now"[^>]*><input type="hidden" name="_csrf" value="[^"]+"><p>Delete every trash entry past its retention now, on every server\? Purged files cannot be restored\.<\/p><button type="submit" class="danger">Yes, purge expired entries now<\/button><\/form><\/details>/);

    const bad = await web.post('/admin/trashbin', { retention_hours: '0', default_max_mb_per_server: '10485761', max_files_per_delete: '10001', purge_batch_size: '49' });
    assert.equal(bad.status, 422);
    for (const field of ['retention_hours', 'default_max_mb_per_server', 'max_files_per_delete', 'purge_batch_size']) assert.match(bad.text, new RegExp(`the ${field} field`), field);

    await saveSettings({ retention_hours: 100, default_max_mb_per_server: 3, max_files_per_delete: 7, purge_batch_size: 60, logging_enabled: false, protect_trash_dir: false, enabled: false });
    const stored = Object.fromEntries((db.prepare('SELECT key, value FROM trashbin_settings').all() as { key: string; value: string }[]).map((r) => [r.key, r.value]));
    assert.deepEqual(stored, { enabled: '0', retention_hours: '100', default_max_bytes_per_server: String(3 * MIB), max_files_per_delete: '7', purge_batch_size: '60', logging_enabled: '0', protect_trash_dir: '0' });
    const entries = records(s1).length;
    assert.equal((await web.post('/admin/trashbin/reset')).status, 303);
    settings = { ...DEFAULT_FORM };
    const reset = Object.fromEntries((db.prepare('SELECT key, value FROM trashbin_settings').all() as { key: string; value: string }[]).map((r) => [r.key, r.value]));
    assert.deepEqual(reset, { enabled: '1', retention_hours: '24', default_max_bytes_per_server: '0', max_files_per_delete: '100', purge_batch_size: '200', logging_enabled: '1', protect_trash_dir: '1' });
    assert.equal(records(s1).length, entries, 'the trash is untouched');
    assert.equal((db.prepare('SELECT COUNT(*) AS n FROM trashbin_egg_overrides').get() as { n: number }).n, 1, 'overrides are untouched');

    assert.equal((await web.post('/admin/trashbin/egg', { egg_id: String(eggB), retention_hours: '', max_mb: '5' })).status, 303);
    const eggRow = (): unknown => ({ ...db.prepare('SELECT retention_hours, max_bytes FROM trashbin_egg_overrides WHERE egg_id = ?').get(eggB) });
    assert.deepEqual(eggRow(), { retention_hours: null, max_bytes: 5 * MIB });
    assert.equal((await web.post('/admin/trashbin/egg', { egg_id: String(eggB), retention_hours: '12', max_mb: '' })).status, 303);
    assert.deepEqual(eggRow(), { retention_hours: 12, max_bytes: null });
    const badEgg = await web.post('/admin/trashbin/egg', { egg_id: '9999', retention_hours: '8761', max_mb: '-1' });
    assert.equal(badEgg.status, 422);
    assert.match(badEgg.text, /the retention_hours field/);
    assert.match(badEgg.text, /the max_mb field/);
    assert.match((await web.post('/admin/trashbin/egg', { egg_id: '9999' })).text, /the selected egg does not exist/);
    assert.equal((await web.post(`/admin/trashbin/egg/${eggB}/delete`)).status, 303);
    assert.equal(db.prepare('SELECT 1 FROM trashbin_egg_overrides WHERE egg_id = ?').get(eggB), undefined);
  });

  it('keeps the admin routes away from API keys and requests without the CSRF token', async () => {
    for (const [method, path] of [['GET', '/admin/trashbin'], ['POST', '/admin/trashbin/purge-now'], ['POST', '/admin/trashbin/reset']] as const) {
      const r = await fetch(`${panel.url}${path}`, { method, redirect: 'manual', headers: { authorization: `Bearer ${admin}`, accept: 'application/json' } });
      assert.ok(r.status === 401 || r.status === 403 || r.status === 302 || r.status === 303, `${method} ${path}: ${r.status}`);
    }
    const noCsrf = await fetch(`${panel.url}/admin/trashbin/reset`, { method: 'POST', redirect: 'manual' });
    assert.equal(noCsrf.status, 403);
  });

  it('removes trash records and the override with the server, and the egg override with the egg', async () => {
    writeFileSync(vol(s2, 'last.txt'), 'l');
    await del(owner, s2, { root: '/', files: ['last.txt'] });
    db.prepare('INSERT INTO trashbin_server_overrides (server_id, max_bytes, retention_hours) VALUES (?, 5, 5)').run(s2.id);
    assert.deepEqual(records(s2).map((r) => r.path), ['fresh.txt', 'last.txt']);
    assert.equal((await panel.api(admin, 'DELETE', `/api/application/servers/${s2.id}`)).status, 204);
    assert.deepEqual(records(s2), []);
    assert.equal(db.prepare('SELECT 1 FROM trashbin_server_overrides WHERE server_id = ?').get(s2.id), undefined);

    assert.equal((await web.post('/admin/trashbin/egg', { egg_id: String(eggB), retention_hours: '5', max_mb: '' })).status, 303);
    assert.equal((await panel.api(admin, 'DELETE', `/api/application/nests/${nestId}/eggs/${eggB}`)).status, 204);
    assert.equal(db.prepare('SELECT 1 FROM trashbin_egg_overrides WHERE egg_id = ?').get(eggB), undefined);
  });
});

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { openDatabase } from '../../../src/lib/sqlite.ts';
import { insertServerFixture } from '../test-context.ts';
import { allocationSpellingTwins, CORE_MIGRATIONS } from './migrations.ts';
import { DATABASE_FILE, openPanelStore } from './store.ts';

test('migration 3 stores allocation addresses in one spelling and merges the twins it finds', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'hk-panel-migrate-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const store = openPanelStore(dir);
  const { node, server } = await insertServerFixture(store);
  // Rows as an older panel wrote them, then migration 3 made pending again.
  const { db } = store.sqlite;
  const add = db.prepare('INSERT INTO allocations (node_id, ip, port, server_id) VALUES (?, ?, ?, ?)');
  const rows: [string, number, number | null][] = [
    ['0:0:0:0:0:0:0:1', 1, null],
    ['::ffff:10.0.0.1', 2, null],
    ['::1', 3, null],
    ['0::1', 3, server.id],
    ['FE80::1', 4, null],
    ['fe80:0::1', 4, null],
    ['::1', 5, server.id],
    ['0:0::1', 5, server.id],
    ['10.0.0.2', 6, null],
  ];
  for (const [ip, port, serverId] of rows) add.run(node.id, ip, port, serverId);
  db.prepare('DELETE FROM schema_migrations WHERE version = 3').run();
  store.close();

  const migrated = openPanelStore(dir);
  t.after(() => migrated.close());
  assert.deepEqual(migrated.sqlite.applied, [3]);
  const after = migrated.sqlite.db.prepare('SELECT ip, port, server_id FROM allocations ORDER BY port, ip').all().map((r) => [r['ip'], r['port'], r['server_id']]);
  assert.deepEqual(after, [
    ['::1', 1, null],
    ['10.0.0.1', 2, null],
    // The twin a server uses is the one kept.
    ['::1', 3, server.id],
    ['fe80::1', 4, null],
    // Two servers' rows on one endpoint are left for the operator.
    ['0:0::1', 5, server.id],
    ['::1', 5, server.id],
    ['10.0.0.2', 6, null],
  ]);
  // What `panel serve` then warns about: the one endpoint left in two spellings.
  const twins = allocationSpellingTwins(migrated.sqlite.db);
  assert.equal(twins.length, 1);
  assert.equal(twins[0]?.endpoint, '[::1]:5');
  assert.equal(twins[0]?.allocation_ids.length, 2);
});

test('migration 4 adds external ids to the users and servers of a database at version 3: none set, each unique when set', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'hk-panel-migrate-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const old = openDatabase({ path: join(dir, DATABASE_FILE), migrations: CORE_MIGRATIONS.filter((m) => m.version <= 3) });
  const at = new Date().toISOString();
  const row = (table: string, values: Record<string, string | number | null>): number =>
    Number(old.db.prepare(`INSERT INTO ${table} (${Object.keys(values).join(', ')}) VALUES (${Object.keys(values).map(() => '?').join(', ')})`).run(...Object.values(values)).lastInsertRowid);
  const users = ['a', 'b'].map((name) => row('users', { uuid: `uuid-${name}`, username: name, email: `${name}@x`, password: 'x', created_at: at, updated_at: at }));
  const location = row('locations', { short: 'l', created_at: at, updated_at: at });
  const node = row('nodes', { uuid: 'n', name: 'n', location_id: location, fqdn: 'x', token_id: 'x', token_hash: 'x', token_encrypted: 'x', created_at: at, updated_at: at });
  const nest = row('nests', { uuid: 'ne', name: 'ne', created_at: at, updated_at: at });
  const egg = row('eggs', { uuid: 'e', nest_id: nest, name: 'e', docker_image: 'i', startup: 's', created_at: at, updated_at: at });
  for (const [i, owner] of users.entries()) row('servers', { uuid: `s${i}`, identifier: `s${i}`, name: `s${i}`, owner_id: owner, node_id: node, nest_id: nest, egg_id: egg, created_at: at, updated_at: at });
  old.close();

  const store = openPanelStore(dir);
  t.after(() => store.close());
  assert.deepEqual(store.sqlite.applied, [4]);
  assert.deepEqual((await store.users.all()).map((u) => [u.username, u.external_id]), [['a', null], ['b', null]]);
  assert.deepEqual((await store.servers.all()).map((s) => [s.name, s.external_id]), [['s0', null], ['s1', null]]);
  const [a, b] = await store.users.all();
  const [s0, s1] = await store.servers.all();
  await store.users.update(a?.id ?? 0, { external_id: 'whmcs-1' });
  await store.servers.update(s0?.id ?? 0, { external_id: 'whmcs-1' });
  assert.equal((await store.users.findBy({ external_id: 'whmcs-1' }))?.username, 'a');
  assert.equal((await store.servers.findBy({ external_id: 'whmcs-1' }))?.name, 's0', 'users and servers are unique apart');
  await assert.rejects(store.users.update(b?.id ?? 0, { external_id: 'whmcs-1' }), (err: Error & { cause?: { field?: string } }) => err.cause?.field === 'external_id');
  await assert.rejects(store.servers.update(s1?.id ?? 0, { external_id: 'whmcs-1' }), (err: Error & { cause?: { field?: string } }) => err.cause?.field === 'external_id');
  assert.equal((await store.users.findBy({ external_id: 'WHMCS-1' })), undefined, 'compared exactly, as stored');
});

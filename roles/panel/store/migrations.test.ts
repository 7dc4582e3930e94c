import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { openPanelStore } from './store.ts';

test('migration 3 stores allocation addresses in one spelling and merges the twins it finds', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'hk-panel-migrate-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const store = openPanelStore(dir);
  const at = new Date().toISOString();
  const user = await store.users.insert({ uuid: randomUUID(), username: 'u', email: 'u@x', password: 'x', created_at: at, updated_at: at });
  const loc = await store.locations.insert({ short: 'l', created_at: at, updated_at: at });
  const node = await store.nodes.insert({ uuid: randomUUID(), name: 'n', location_id: loc.id, fqdn: 'x', token_id: 'x', token_hash: 'x', token_encrypted: 'x', created_at: at, updated_at: at });
  const nest = await store.nests.insert({ uuid: randomUUID(), name: 'ne', created_at: at, updated_at: at });
  const egg = await store.eggs.insert({ uuid: randomUUID(), nest_id: nest.id, name: 'e', docker_image: 'i', startup: 's', created_at: at, updated_at: at });
  const server = await store.createServer({
    uuid: randomUUID(), identifier: 'abcd1234', name: 's', description: '', owner_id: user.id, node_id: node.id, allocation_id: null, nest_id: nest.id, egg_id: egg.id,
    memory: 0, swap: 0, disk: 0, io: 500, cpu: 0, threads: null, oom_disabled: 1, databases: 0, allocations: 0, backups: 0, startup: '', image: '', suspended: 0, created_at: at, updated_at: at,
  });
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
});

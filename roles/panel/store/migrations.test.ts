import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { insertServerFixture } from '../test-context.ts';
import { allocationSpellingTwins } from './migrations.ts';
import { openPanelStore } from './store.ts';

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

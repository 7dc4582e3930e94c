/**
 * The node health snapshots over an in-memory store, with times the test picks (the integration
 * tests cannot wait out the 10-minute interval): one snapshot per node graded from its records,
 * the history newest first and capped at 48, pruning past health_retention_days, and the
 * OPS_BULK_SYNC switch read from the environment given.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createActivityLog } from '../../services/activity.ts';
import { openPanelStore } from '../../store/store.ts';
import { createTestContext } from '../../test-context.ts';
import { bulkSync } from './bulk.ts';
import { OPS_MIGRATIONS } from './migrations.ts';
import { createOpsService, HISTORY } from './service.ts';
import { createOpsStore } from './store.ts';

test('snapshots grade every node, keep the newest 48 in the history and prune past the retention', async (t) => {
  const store = openPanelStore(':memory:', OPS_MIGRATIONS);
  const base = createTestContext();
  base.store.close();
  t.after(() => store.close());
  const ctx = { ...base, store, activity: createActivityLog(store, (err) => { throw err; }) };
  const service = createOpsService(ctx, createOpsStore(store.sqlite));

  const at = new Date().toISOString();
  const user = await store.users.insert({ uuid: randomUUID(), username: 'u', email: 'u@x', password: 'x', created_at: at, updated_at: at });
  const loc = await store.locations.insert({ short: 'l', created_at: at, updated_at: at });
  const node = async (name: string, memory: number): Promise<number> =>
    (await store.nodes.insert({ uuid: randomUUID(), name, location_id: loc.id, fqdn: 'x', memory, token_id: randomUUID(), token_hash: 'x', token_encrypted: 'x', created_at: at, updated_at: at })).id;
  const busy = await node('busy', 1000);
  const idle = await node('idle', 0);
  const allocations = await Promise.all([25565, 25566, 25567, 25568].map((port) => store.allocations.insert({ node_id: busy, ip: '127.0.0.1', port })));
  const nest = await store.nests.insert({ uuid: randomUUID(), name: 'n', created_at: at, updated_at: at });
  const egg = await store.eggs.insert({ uuid: randomUUID(), nest_id: nest.id, name: 'e', docker_image: 'i', startup: 's', created_at: at, updated_at: at });
  for (const [i, memory] of [400, 400, 100].entries()) {
    const uuid = randomUUID();
    await store.createServer({
      uuid, identifier: uuid.slice(0, 8), name: `s${i}`, description: '', owner_id: user.id, node_id: busy, allocation_id: allocations[i]?.id ?? null, nest_id: nest.id, egg_id: egg.id,
      memory, swap: 0, disk: 0, io: 500, cpu: 0, threads: null, oom_disabled: 1, databases: 0, allocations: 0, backups: 0, startup: '', image: '', suspended: 0, created_at: at, updated_at: at,
    });
  }

  const start = Date.UTC(2026, 0, 1);
  assert.equal(await service.snapshotHealth(new Date(start)), 2);
  const [first] = await service.store.history(busy, HISTORY);
  assert.deepEqual(
    first && { ...first, id: 0 },
    { id: 0, node_id: busy, snapshot_at: new Date(start).toISOString(), health_score: 10, status: 'critical', allocation_used_pct: 75, memory_used_pct: 90, allocations_total: 4, allocations_used: 3, memory_total: 1000, memory_assigned: 900 },
  );
  assert.equal((await service.store.history(idle, HISTORY))[0]?.status, 'healthy');

  // Fifty more runs ten minutes apart: the history returns the newest 48, newest first.
  for (let i = 1; i <= 50; i++) await service.snapshotHealth(new Date(start + i * 600_000));
  const history = await service.store.history(busy, HISTORY);
  assert.equal(history.length, 48);
  assert.equal(history[0]?.snapshot_at, new Date(start + 50 * 600_000).toISOString());
  const health = await service.nodeHealth(busy);
  assert.equal((health.history as unknown[]).length, 48);
  assert.equal((health.latest as { snapshot_at: string }).snapshot_at, history[0]?.snapshot_at);

  // Thirty-one days later (retention 30 days) only the new run is left.
  await service.snapshotHealth(new Date(start + 31 * 86_400_000));
  assert.equal((await service.store.history(busy, 100)).length, 1);
  assert.equal((await service.store.latestSnapshots()).length, 2);
});

test('OPS_BULK_SYNC is read from the environment it is given', () => {
  assert.equal(bulkSync({}), false);
  for (const v of ['true', '1', 'TRUE', 'yes', 'on']) assert.equal(bulkSync({ OPS_BULK_SYNC: v }), true, v);
  for (const v of ['false', '0', '', 'no']) assert.equal(bulkSync({ OPS_BULK_SYNC: v }), false, v);
});

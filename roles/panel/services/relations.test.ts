/**
 * The `?include=` relations load a whole page at once: a page of 100 servers with every include
 * costs one query per include and related table, not one per server, and each record gets its own.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import type { ServerRow } from '../store/records.ts';
import type { Repository, Row } from '../store/repository.ts';
import { openPanelStore, type PanelStore } from '../store/store.ts';
import { locationAttributes, nodeAttributes } from './infrastructure.ts';
import { createRelations, type Related } from './relations.ts';
import { userAttributes } from './users.ts';

/** The i-th entry, which the test made. */
function nth<T>(list: readonly T[], i: number): T {
  const v = list[i];
  assert.ok(v !== undefined);
  return v;
}

/** The attributes of a to-many relation's records. */
function listed(r: Related | undefined): Record<string, unknown>[] {
  assert.ok(r !== undefined && 'list' in r);
  return r.list;
}

/** `store` whose repositories count the calls that reach the database. */
function counted(store: PanelStore): { store: PanelStore; calls: string[] } {
  const calls: string[] = [];
  const wrap = <T extends Row>(name: string, repo: Repository<T>): Repository<T> =>
    Object.fromEntries(
      Object.entries(repo).map(([method, fn]) => [method, (...args: unknown[]) => (calls.push(`${name}.${method}`), (fn as (...a: unknown[]) => unknown)(...args))]),
    ) as unknown as Repository<T>;
  const { users, nodes, locations, allocations, nests, eggs, servers, subusers } = store;
  return {
    store: { ...store, users: wrap('users', users), nodes: wrap('nodes', nodes), locations: wrap('locations', locations), allocations: wrap('allocations', allocations), nests: wrap('nests', nests), eggs: wrap('eggs', eggs), servers: wrap('servers', servers), subusers: wrap('subusers', subusers) },
    calls,
  };
}

test('a page of 100 servers with every include costs one query per include and table, and each server gets its own records', async (t) => {
  const store = openPanelStore(':memory:');
  t.after(() => store.close());
  const at = new Date().toISOString();
  const stamp = { created_at: at, updated_at: at };
  const users = await Promise.all([...Array(10).keys()].map((i) => store.users.insert({ uuid: randomUUID(), username: `u${i}`, email: `u${i}@x`, password: 'x', ...stamp })));
  const locs = [await store.locations.insert({ short: 'fra', ...stamp }), await store.locations.insert({ short: 'ams', ...stamp })];
  const nodes = await Promise.all(locs.map((l, i) => store.nodes.insert({ uuid: randomUUID(), name: `n${i}`, location_id: l.id, fqdn: 'x', token_id: `t${i}`, token_hash: 'x', token_encrypted: 'x', ...stamp })));
  const nest = await store.nests.insert({ uuid: randomUUID(), name: 'ne', ...stamp });
  const egg = await store.eggs.insert({ uuid: randomUUID(), nest_id: nest.id, name: 'e', docker_image: 'i', startup: 's', ...stamp });
  const servers: ServerRow[] = [];
  for (let i = 0; i < 100; i++) {
    const node = nth(nodes, i % 2);
    const alloc = await store.allocations.insert({ node_id: node.id, ip: '10.0.0.1', port: 20000 + i });
    const uuid = randomUUID();
    servers.push(
      await store.createServer({
        uuid, identifier: uuid.slice(0, 8), name: `s${i}`, description: '', owner_id: nth(users, i % 10).id, node_id: node.id, allocation_id: alloc.id, nest_id: nest.id, egg_id: egg.id,
        memory: 0, swap: 0, disk: 0, io: 500, cpu: 0, threads: null, oom_disabled: 1, databases: 0, allocations: 0, backups: 0, startup: '', image: '', suspended: 0, ...stamp,
      }),
    );
  }
  await store.subusers.insert({ user_id: nth(users, 1).id, server_id: nth(servers, 0).id, permissions: '["file.read"]', ...stamp });

  const { store: watched, calls } = counted(store);
  const relations = createRelations(watched).server;
  const loaded = Object.fromEntries(await Promise.all(Object.entries(relations).map(async ([name, load]) => [name, await load(servers)] as const)));
  assert.deepEqual(calls.sort(), ['allocations.all', 'eggs.all', 'locations.all', 'nests.all', 'nodes.all', 'nodes.all', 'subusers.all', 'users.all'], 'the location goes through the node: two queries');

  const of = (name: string, i: number): Related | undefined => loaded[name]?.(nth(servers, i));
  assert.deepEqual(of('user', 3), { object: 'user', one: userAttributes(nth(users, 3)) });
  assert.deepEqual(of('node', 3), { object: 'node', one: nodeAttributes(nth(nodes, 1)) });
  assert.deepEqual(of('location', 3), { object: 'location', one: locationAttributes(nth(locs, 1)) });
  assert.deepEqual(of('location', 4), { object: 'location', one: locationAttributes(nth(locs, 0)) });
  assert.deepEqual(listed(of('allocations', 7)).map((a) => a['port']), [20007]);
  assert.deepEqual(listed(of('subusers', 0)), [
    { id: 1, user_id: users[1]?.id, server_id: servers[0]?.id, permissions: ['file.read'], created_at: at, updated_at: at },
  ]);
  assert.deepEqual(listed(of('subusers', 1)), []);

  // One record (a show route) is one filtered query per table.
  calls.length = 0;
  const one = await relations.user?.([nth(servers, 5)]);
  assert.deepEqual(calls, ['users.all']);
  assert.deepEqual(one?.(nth(servers, 5)), { object: 'user', one: userAttributes(nth(users, 5)) });

  // A location's servers are those of its nodes, in id order.
  const byLocation = await createRelations(store).location.servers?.(locs);
  assert.equal(listed(byLocation?.(nth(locs, 0))).length, 50);
  assert.deepEqual(listed(byLocation?.(nth(locs, 1))).slice(0, 2).map((s) => s['name']), ['s1', 's3']);

  // The repository's list filter: any of the values, and nothing for an empty list.
  assert.deepEqual((await store.servers.all({ id: [nth(servers, 2).id, nth(servers, 9).id, 1_000_000] })).map((s) => s.name), ['s2', 's9']);
  assert.deepEqual(await store.servers.all({ id: [] }), []);
});

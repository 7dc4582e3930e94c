/**
 * The trash service's purge over a real volume folder and an in-memory store, with a clock the
 * test moves forward (the integration tests cannot wait out an hour of retention): entries and
 * orphan items (named like an entry, without a record) go once their retention has passed, the
 * orphans dated by their last status change; other names in the trash folder stay.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import type { FileCall } from '../../context.ts';
import { createActivityLog } from '../../services/activity.ts';
import { openPanelStore } from '../../store/store.ts';
import { createTestContext, insertServerFixture } from '../../test-context.ts';
import { TRASHBIN_MIGRATIONS } from './migrations.ts';
import { createTrashService } from './service.ts';
import { createTrashStore } from './store.ts';

const HOUR = 3_600_000;

test('the purge removes entries and orphan items once their retention has passed, and no other names', async (t) => {
  const volumes = mkdtempSync(join(tmpdir(), 'hk-trash-service-'));
  const store = openPanelStore(':memory:', TRASHBIN_MIGRATIONS);
  const base = createTestContext({ volumes_dir: volumes });
  base.store.close();
  t.after(() => {
    store.close();
    rmSync(volumes, { recursive: true, force: true });
  });
  const ctx = { ...base, store, activity: createActivityLog(store, (err) => { throw err; }) };

  const { user, server } = await insertServerFixture(store);
  const vol = (...p: string[]): string => join(volumes, server.uuid, ...p);
  mkdirSync(vol('.trash', '41'), { recursive: true });
  writeFileSync(vol('.trash', '41', 'inner.txt'), 'orphan');
  writeFileSync(vol('.trash', 'notes.txt'), 'never an entry');
  writeFileSync(vol('kept.txt'), 'kept');

  let clock = Date.now();
  const service = createTrashService(ctx, createTrashStore(store.sqlite), () => clock);
  const call: FileCall = { access: { server, isOwner: true, permissions: new Set(['*']) }, actor: { type: 'user', id: user.id }, ip: '127.0.0.1' };
  await service.trash(call, ['kept.txt']);
  const [entry] = await createTrashStore(store.sqlite).entries(server.id);
  assert.ok(entry !== undefined);

  assert.equal(await service.purge(), 0, 'within the default 24 h nothing goes');
  assert.deepEqual(readdirSync(vol('.trash')).sort(), ['41', String(entry.id), 'notes.txt'].sort());

  clock += 25 * HOUR;
  assert.equal(await service.purge(), 2, 'the entry and the orphan');
  assert.deepEqual(readdirSync(vol('.trash')), ['notes.txt']);
  assert.ok(!existsSync(vol('kept.txt')));
  const logged = await store.activity.all({ event: 'server:trashbin.purge' });
  assert.deepEqual(logged.map((r) => JSON.parse(r.properties) as unknown), [{ count: 1, orphans: [41] }]);
});

test('start purges at once, not only an hour later, and the log says how many went', async (t) => {
  const volumes = mkdtempSync(join(tmpdir(), 'hk-trash-service-'));
  const store = openPanelStore(':memory:', TRASHBIN_MIGRATIONS);
  const base = createTestContext({ volumes_dir: volumes });
  base.store.close();
  const lines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
  const ctx = { ...base, store, logger, activity: createActivityLog(store, (err) => { throw err; }) };
  const { user, server } = await insertServerFixture(store);
  mkdirSync(join(volumes, server.uuid), { recursive: true });
  writeFileSync(join(volumes, server.uuid, 'old.txt'), 'old');
  let clock = Date.now();
  const service = createTrashService(ctx, createTrashStore(store.sqlite), () => clock);
  t.after(async () => {
    await service.stop();
    store.close();
    rmSync(volumes, { recursive: true, force: true });
  });
  await service.trash({ access: { server, isOwner: true, permissions: new Set(['*']) }, actor: { type: 'user', id: user.id }, ip: '127.0.0.1' }, ['old.txt']);
  clock += 25 * HOUR;

  service.start();
  await service.stop();
  assert.deepEqual(await createTrashStore(store.sqlite).entries(server.id), [], 'the expired entry is gone');
  const purged = lines.map((l) => JSON.parse(l) as { msg: string; removed?: number }).find((l) => l.msg.startsWith('trash purge removed'));
  assert.equal(purged?.removed, 1);
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createEventBus } from './event-bus.ts';
import type { ProxyEvent } from './recent-events.ts';

const ev = (n: number): ProxyEvent => ({ kind: 'quota_exceeded', time: '', site: 's', window_start: '', bytes: n, limit: 0 });

test('events arrive in order on a later turn; beyond the capacity they are dropped and counted', async () => {
  const bus = createEventBus(3, (err) => assert.fail(String(err)));
  const got: number[] = [];
  bus.subscribe((e) => got.push(e.kind === 'quota_exceeded' ? e.bytes : -1));
  for (let n = 0; n < 5; n++) bus.publish(ev(n));
  assert.deepEqual(got, [], 'never delivered synchronously');
  assert.equal(bus.dropped(), 2);
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(got, [0, 1, 2]);
  bus.publish(ev(9));
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(got, [0, 1, 2, 9]);
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createConnectionSlots } from './connection-slots.ts';
import { SharedTable } from './shared-table.ts';

test('slots count per IP and per site, a refusal holds nothing, and a release gives back once', () => {
  const slots = createConnectionSlots(SharedTable.create({ slots: 64 }));
  const a1 = slots.tryAcquire('s', '10.0.0.1', 2, 3);
  const a2 = slots.tryAcquire('s', '10.0.0.1', 2, 3);
  assert.equal(typeof a1, 'function');
  assert.equal(typeof a2, 'function');
  assert.equal(slots.tryAcquire('s', '10.0.0.1', 2, 3), 'per_ip');
  assert.equal(slots.site('s'), 2);
  const b1 = slots.tryAcquire('s', '10.0.0.2', 2, 3);
  assert.equal(typeof b1, 'function');
  // The site is full: the new IP's slot taken on the way is given back.
  assert.equal(slots.tryAcquire('s', '10.0.0.3', 2, 3), 'per_site');
  assert.equal(slots.site('s'), 3);
  (b1 as () => void)();
  (b1 as () => void)();
  assert.equal(slots.site('s'), 2);
  const c1 = slots.tryAcquire('s', '10.0.0.3', 2, 3);
  assert.equal(typeof c1, 'function', '10.0.0.3 holds no slot from its refusal');
  assert.equal(typeof slots.tryAcquire('s', '10.0.0.3', 2, 4), 'function');
  // Other sites count on their own; a tunnel's acquire is never refused.
  assert.equal(typeof slots.tryAcquire('t', '10.0.0.1', 1, 1), 'function');
  const tunnel = slots.acquire('t', '10.0.0.1');
  assert.equal(slots.site('t'), 2);
  tunnel();
  for (const release of [a1, a2, c1]) (release as () => void)();
  assert.equal(slots.site('s'), 1);
  assert.equal(slots.site('t'), 1);
});

test('unlimited slots are still counted', () => {
  const slots = createConnectionSlots(SharedTable.create({ slots: 64 }));
  const releases = Array.from({ length: 5 }, () => slots.tryAcquire('s', '10.0.0.1', 0, 0) as () => void);
  assert.equal(slots.site('s'), 5);
  for (const r of releases) r();
  assert.equal(slots.site('s'), 0);
});

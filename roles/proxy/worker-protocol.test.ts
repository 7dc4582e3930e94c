import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MessageChannel } from 'node:worker_threads';
import type { PlaneRequestEvent, RequestEvent } from './recent-events.ts';
import { EventPacker, isoTime, unpackEvents, type PackedEvents } from './worker-protocol.ts';

const plane = (n: number, over: Partial<PlaneRequestEvent> = {}): PlaneRequestEvent => ({
  kind: 'request',
  time: Date.UTC(2026, 10, 26, 1, 2, 3) + n * 7,
  site: 'shop',
  client_ip: n % 2 ? '203.0.113.7' : '2001:db8::1',
  method: 'GET',
  host: 'shop.example',
  path: `/item/${n}?q=ü`,
  status: 200,
  bytes_in: n,
  bytes_out: 1000 + n,
  duration_ms: 0.125 * n,
  rule: null,
  ...over,
});

/** What the main thread gets for a batch after a real structured clone with the buffer transferred. */
async function roundTrip(batch: PackedEvents): Promise<{ events: RequestEvent[]; refs: number[] }> {
  const { port1, port2 } = new MessageChannel();
  const received = new Promise<PackedEvents>((resolve) => port2.once('message', resolve));
  port1.postMessage(batch, [batch.fields.buffer]);
  const packed = await received;
  port1.close();
  const events: RequestEvent[] = [];
  const refs: number[] = [];
  unpackEvents(packed, (e, ref) => {
    events.push(e);
    refs.push(ref);
  });
  return { events, refs };
}

test('a batch arrives whole: every field, null site and rule, tunnel refs, times as RFC 3339', async () => {
  const packer = new EventPacker(16);
  const sent = [plane(0), plane(1, { site: null, rule: 'route.no_site', status: 421 }), plane(2, { status: 101 }), plane(3, { rule: 'waf.sqli', status: 403 })];
  for (const [i, e] of sent.entries()) assert.equal(packer.add(e, i === 2 ? 5 : 0), false);
  const { events, refs } = await roundTrip(packer.take());
  assert.deepEqual(
    events,
    sent.map((e) => ({ ...e, time: new Date(e.time).toISOString() })),
  );
  assert.deepEqual(refs, [0, 0, 5, 0]);
});

test('each distinct string travels once per batch and the packer starts over after take()', () => {
  const packer = new EventPacker(16);
  for (let n = 0; n < 4; n++) packer.add(plane(0), 0);
  const first = packer.take();
  assert.deepEqual(first.strings, ['shop', '2001:db8::1', 'GET', 'shop.example', '/item/0?q=ü']);
  assert.equal(first.fields.length, 4 * 12);
  assert.equal(packer.count, 0);
  packer.add(plane(1), 0);
  const second = packer.take();
  assert.deepEqual(second.strings, ['shop', '203.0.113.7', 'GET', 'shop.example', '/item/1?q=ü']);
  assert.equal(second.fields.length, 12);
  assert.equal(packer.take().fields.length, 0);
});

test('add() says when the batch is full', () => {
  const packer = new EventPacker(3);
  assert.equal(packer.add(plane(0), 0), false);
  assert.equal(packer.add(plane(1), 0), false);
  assert.equal(packer.add(plane(2), 0), true);
});

test('isoTime formats like toISOString across seconds and milliseconds', () => {
  const base = Date.UTC(2026, 11, 31, 23, 59, 58);
  for (const ms of [base, base + 1, base + 9, base + 10, base + 99, base + 100, base + 999, base + 1000, base + 2001, 0]) {
    assert.equal(isoTime(ms), new Date(ms).toISOString());
  }
});

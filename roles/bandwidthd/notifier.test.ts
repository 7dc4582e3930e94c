/**
 * The notifier's gate and retry pass against real receivers on loopback: live deliveries and the
 * retry pass share chat_a's pace and a 429's hold, a long Retry-After defers instead of blocking,
 * a retry pass is single, bounded and ended at once by a stop, and a URL that cannot be sent
 * fails its delivery without throwing.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import pino from 'pino';
import { stringify } from 'yaml';
import type { BandwidthdConfig } from '../../src/contracts/types.ts';
import { startReceiver, type Answer, type Platform, type Receiver } from '../../test/integration/bandwidthd/receivers.ts';
import { loadBandwidthdConfig } from './config.ts';
import { bodyFor, createNotifier, destinationsOf, sendOnce, type Notifier } from './notifier.ts';
import { openBandwidthdStore, type BandwidthdStore } from './store.ts';

const dir = mkdtempSync(join(tmpdir(), 'hk-bwd-notifier-'));
const logger = pino({ level: 'silent' });
const open: Receiver[] = [];
const notifiers: Notifier[] = [];
let n = 0;

after(async () => {
  for (const x of notifiers) await x.stop();
  for (const r of open) await r.close();
});

function configOf(doc: Record<string, unknown>): BandwidthdConfig {
  const file = join(dir, `c${n++}.yaml`);
  writeFileSync(file, stringify({ database: { path: ':memory:' }, ...doc }));
  return loadBandwidthdConfig(file).config;
}

async function receiver(platform: Platform, fallback: Answer = 200): Promise<Receiver> {
  const r = await startReceiver(platform, fallback);
  open.push(r);
  return r;
}

function notifierOf(config: BandwidthdConfig, opts: { store?: BandwidthdStore; timeoutMs?: number; pace?: { messages: number; windowMs: number } } = {}): Notifier {
  const x = createNotifier({ config, store: opts.store ?? null, logger, requestTimeoutMs: opts.timeoutMs ?? 10_000, ...(opts.pace ? { chatAPace: opts.pace } : {}) });
  notifiers.push(x);
  return x;
}

const memStore = (): BandwidthdStore => openBandwidthdStore({ path: ':memory:', journal_mode: 'MEMORY', synchronous: 'OFF', cache_size_kb: 1000, auto_migrate: true });

/** A stored delivery as the live path would have stored it: the destination's body for one notice. */
function storeFor(store: BandwidthdStore, config: BandwidthdConfig, name: string, message: string): void {
  const dest = destinationsOf(config).find((d) => d.dest.name === name)?.dest;
  assert.ok(dest);
  store.enqueue(name, bodyFor(dest, [{ event: 'error', timestamp: new Date().toISOString(), message, data: {} }]), Date.now());
}

const endpoint = (name: string, url: string, type: Platform = 'generic'): Record<string, unknown> => ({ name, url, type, enabled: true });

test('the retry pass and live deliveries share the chat_a pace of one webhook', async () => {
  const r = await receiver('chat_a');
  const store = memStore();
  const config = configOf({ webhook: { enabled: true, max_retries: 1, endpoints: [endpoint('ca', r.url, 'chat_a')] }, notifications: { batch_window: '10ms' } });
  const x = notifierOf(config, { store, pace: { messages: 2, windowMs: 800 } });
  storeFor(store, config, 'ca', 's1');
  storeFor(store, config, 'ca', 's2');
  storeFor(store, config, 'ca', 's3');
  // Two stored messages use up the pace; the third is left to a later pass (waiting here would have sent it).
  assert.deepEqual(await x.retryStored(), { delivered: 2, left: 1 });
  assert.equal(r.received.length, 2);
  // A live notification now waits until the window has room again.
  x.notify('error', 'live');
  await x.idle();
  assert.equal(r.received.length, 3);
  const gap = (r.received[2]?.at as number) - (r.received[0]?.at as number);
  assert.ok(gap >= 750, `live message ${gap} ms after the first stored one`);
  // And a pass right after finds the pace used up by the live message.
  assert.deepEqual(await x.retryStored(), { delivered: 0, left: 1 });
  assert.equal(r.received.length, 3);
  assert.deepEqual(r.received.map((q) => q.problems), [[], [], []]);
});

test('a Retry-After beyond 60 s on a stored destination defers the delivery to the outbox at once, and the retry pass honours it', async () => {
  const r = await receiver('generic');
  r.script = [429];
  r.retryAfter = 120;
  const store = memStore();
  const config = configOf({ webhook: { enabled: true, max_retries: 3, backoff_base: '100ms', endpoints: [endpoint('ep', r.url)] }, notifications: { batch_window: '10ms' } });
  const x = notifierOf(config, { store });
  const t0 = Date.now();
  x.notify('error', 'slow down');
  await x.idle();
  assert.ok(Date.now() - t0 < 2000, `live delivery held its worker ${Date.now() - t0} ms`);
  assert.equal(r.received.length, 1);
  assert.equal(store.outboxCount(), 1);
  assert.equal(x.stats().stored, 1);
  // The platform asked for 120 s: the pass sends nothing to it before then.
  assert.deepEqual(await x.retryStored(), { delivered: 0, left: 1 });
  assert.equal(r.received.length, 1);
});

test('a 429 met by the retry pass holds live deliveries to the same destination', async () => {
  const r = await receiver('generic');
  r.script = [429];
  r.retryAfter = 120;
  const store = memStore();
  const config = configOf({ webhook: { enabled: true, max_retries: 3, backoff_base: '100ms', endpoints: [endpoint('ep', r.url)] }, notifications: { batch_window: '10ms' } });
  const x = notifierOf(config, { store });
  storeFor(store, config, 'ep', 'stored');
  assert.deepEqual(await x.retryStored(), { delivered: 0, left: 1 });
  assert.equal(store.outbox('ep', 10)[0]?.attempts, 1);
  x.notify('error', 'live');
  await x.idle();
  assert.equal(r.received.length, 1, 'nothing sent while held');
  assert.equal(store.outboxCount(), 2);
});

test('a destination without an outbox waits out a long Retry-After in its own worker; a stop ends the wait at once', async () => {
  const r = await receiver('chat_a');
  r.script = [429];
  r.retryAfter = 120;
  const x = notifierOf(configOf({ notifications: { retry: { max_retries: 3, backoff_base: '100ms' }, batch_window: '10ms', chat_a: { enabled: true, webhook_url: r.url } } }));
  x.notify('error', 'e');
  await r.waitFor(1);
  await delay(300);
  assert.equal(r.received.length, 1);
  assert.equal(x.stats().failed, 0, 'still waiting, not given up');
  const t0 = Date.now();
  await x.stop();
  assert.ok(Date.now() - t0 < 2000, `stop took ${Date.now() - t0} ms`);
  assert.equal(r.received.length, 1);
  assert.deepEqual(x.stats(), { queued: 0, dropped: 0, delivered: 0, failed: 1, stored: 0 });
});

test('one retry pass at a time, one failed request per destination, the others unaffected, ended at once by a stop', async () => {
  const dead = await receiver('generic', 'hang');
  const alive = await receiver('generic');
  const store = memStore();
  const config = configOf({ webhook: { enabled: true, endpoints: [endpoint('dead', dead.url), endpoint('alive', alive.url)] } });
  const x = notifierOf(config, { store });
  for (const m of ['d1', 'd2', 'd3']) storeFor(store, config, 'dead', m);
  for (const m of ['a1', 'a2']) storeFor(store, config, 'alive', m);
  store.enqueue('gone', '{}', Date.now());
  const first = x.retryStored();
  assert.equal(x.retryStored(), first, 'a call during a pass gets that pass');
  await alive.waitFor(2);
  await dead.waitFor(1);
  await delay(200);
  assert.equal(dead.received.length, 1);
  const t0 = Date.now();
  await x.stop();
  assert.ok(Date.now() - t0 < 2000, `stop took ${Date.now() - t0} ms`);
  assert.deepEqual(await first, { delivered: 2, left: 3 });
  assert.deepEqual(store.outboxDestinations(), ['dead'], 'the unconfigured destination is dropped, the dead one kept');
});

test('credentials with a malformed percent escape fail the delivery with a reason instead of throwing', async () => {
  const r = await receiver('generic');
  const base = configOf({ notifications: { batch_window: '10ms', generic: [{ name: 'g', enabled: true, url: r.url }] } });
  const g = base.notifications.generic[0] as BandwidthdConfig['notifications']['generic'][number];
  // A URL that never met the config check (the check refuses it: config.test.ts).
  const config = { ...base, notifications: { ...base.notifications, generic: [{ ...g, url: r.url.replace('http://', 'http://user:p%zz@') }] } };
  const x = notifierOf(config);
  x.notify('error', 'e');
  await x.idle();
  assert.deepEqual(x.stats(), { queued: 0, dropped: 0, delivered: 0, failed: 1, stored: 0 });
  assert.equal(r.received.length, 0);
  const dest = destinationsOf(config)[0]?.dest;
  assert.ok(dest);
  const res = await sendOnce(dest, '{}');
  assert.equal(res.ok, false);
  assert.equal(res.permanent, true);
  assert.match(res.error ?? '', /malformed percent escape/);
});

/**
 * Webhook delivery against real receivers on loopback: each platform's shape and limits (with
 * over-long input truncated, never refused), batching, retries with backoff, 429 Retry-After,
 * 401 not retried, time-outs, the bounded queue, the persisted outbox and the events maps; the
 * gate and the retry pass: live deliveries and the retry pass share chat_a's pace and a 429's
 * hold, a long Retry-After defers instead of blocking, a retry pass is single, bounded and ended at
 * once by a stop, and a URL that cannot be sent fails its delivery without throwing; a full queue
 * and a failed retry pass are logged without flooding.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { stringify } from 'yaml';
import pino from 'pino';
import { loadBandwidthdConfig } from '../../../roles/bandwidthd/config.ts';
import { bodyFor, createNotifier, destinationsOf, sendOnce, type Notifier } from '../../../roles/bandwidthd/notifier.ts';
import { openBandwidthdStore, type BandwidthdStore } from '../../../roles/bandwidthd/store.ts';
import type { BandwidthdConfig } from '../../../src/contracts/types.ts';
import { startReceiver, type Platform, type Receiver } from './receivers.ts';

const dir = mkdtempSync(join(tmpdir(), 'hk-bwd-notify-'));
const logger = pino({ level: 'silent' });
const open: { close(): Promise<void> }[] = [];
const notifiers: Notifier[] = [];
let n = 0;

after(async () => {
  for (const x of notifiers) await x.stop();
  for (const r of open) await r.close();
});

function configOf(doc: Record<string, unknown>): BandwidthdConfig {
  const file = join(dir, `c${n++}.yaml`);
  writeFileSync(file, stringify({ database: { path: join(dir, 'unused.db') }, ...doc }));
  return loadBandwidthdConfig(file).config;
}

async function receiver(platform: 'chat_a' | 'chat_b' | 'generic', fallback: 200 | 401 | 429 | 500 | 'hang' = 200): Promise<Receiver> {
  const r = await startReceiver(platform, fallback);
  open.push(r);
  return r;
}

function notifierOf(config: BandwidthdConfig, opts: { store?: ReturnType<typeof openBandwidthdStore>; timeoutMs?: number; pace?: { messages: number; windowMs: number }; stopGraceMs?: number } = {}): Notifier {
  const x = createNotifier({ config, store: opts.store ?? null, logger, requestTimeoutMs: opts.timeoutMs ?? 2000, ...(opts.pace ? { chatAPace: opts.pace } : {}), ...(opts.stopGraceMs ? { stopGraceMs: opts.stopGraceMs } : {}) });
  notifiers.push(x);
  return x;
}

const fast = { retry: { max_retries: 3, backoff_base: '100ms' }, batch_window: '200ms' };

test('chat_a: embeds with the table colour, emoji, ISO timestamp and footer; over-long input is truncated to the limits', async () => {
  const r = await receiver('chat_a');
  const x = notifierOf(configOf({ notifications: { ...fast, chat_a: { enabled: true, webhook_url: r.url } } }));
  const long = 'c'.repeat(5000);
  x.notify('quota_exceeded', 'm'.repeat(10_000), { container: long, interface: 'veth1', direction: 'rx', current_mbps: 1, limit_mbps: 1, usage_pct: 100.2, extra: 'v'.repeat(3000) });
  const [got] = await r.waitFor(1);
  assert.deepEqual(got?.problems, []);
  assert.equal(got?.answered, 200);
  const embed = (got?.body as { embeds: { title: string; color: number; description: string; footer: { text: string }; fields: { name: string; value: string }[] }[] }).embeds[0];
  assert.equal(embed?.color, 0xed4245);
  assert.match(embed?.title ?? '', /⛔ Quota exceeded/);
  assert.match(embed?.footer.text ?? '', /quota_exceeded/);
  assert.equal(embed?.description.length, 4096);
  assert.ok(embed?.description.endsWith('…'));
  await x.idle();
  assert.equal(x.stats().delivered, 1);
});

test('chat_a: events within batch_window go out as one message of several embeds, at most 6000 characters', async () => {
  const r = await receiver('chat_a');
  const x = notifierOf(configOf({ notifications: { ...fast, chat_a: { enabled: true, webhook_url: r.url } } }));
  for (let i = 0; i < 3; i++) x.notify('container_found', `container ${i} ${'d'.repeat(3000)}`, { container: `c${i}` });
  await x.idle();
  assert.equal(r.received.length, 1);
  assert.deepEqual(r.received[0]?.problems, []);
  const embeds = (r.received[0]?.body as { embeds: { color: number }[] }).embeds;
  assert.equal(embeds.length, 3);
  assert.ok(embeds.every((e) => e.color === 0x5865f2));
});

test('chat_b: attachments with the colour bar and blocks, channel and username; section text cut at 3000', async () => {
  const r = await receiver('chat_b');
  const x = notifierOf(configOf({ notifications: { ...fast, chat_b: { enabled: true, webhook_url: r.url, channel: '#ops', username: 'bw' } } }));
  x.notify('quota_warning', 'w'.repeat(5000), { container: 'web', usage_pct: 91 });
  const [got] = await r.waitFor(1);
  assert.deepEqual(got?.problems, []);
  const body = got?.body as { channel: string; username: string; attachments: { color: string; blocks: { type: string; text?: { text: string } }[] }[] };
  assert.equal(body.channel, '#ops');
  assert.equal(body.username, 'bw');
  assert.equal(body.attachments[0]?.color, '#faa61a');
  const section = body.attachments[0]?.blocks.find((b) => b.type === 'section');
  assert.equal(Array.from(section?.text?.text ?? '').length, 3000);
});

test('generic: {event, timestamp, daemon_version, data}, configured headers and basic auth from the URL', async () => {
  const r = await receiver('generic');
  const url = r.url.replace('http://', 'http://user:p%40ss@');
  const x = notifierOf(configOf({ notifications: { ...fast, generic: [{ name: 'ops', enabled: true, url, headers: { 'X-Token': 'abc' } }] } }));
  x.notify('container_removed', 'gone', { container: 'web', interface: 'veth9' });
  x.notify('container_found', 'back', { container: 'web' });
  await r.waitFor(2);
  const [a, b] = r.received;
  assert.deepEqual(a?.problems, []);
  assert.equal((a?.body as { event: string }).event, 'container_removed');
  assert.equal((b?.body as { event: string }).event, 'container_found');
  assert.equal((a?.body as { data: { container: string } }).data.container, 'web');
  assert.equal(a?.headers['x-token'], 'abc');
  assert.equal(a?.headers['authorization'], `Basic ${Buffer.from('user:p@ss').toString('base64')}`);
});

test('500 is retried with base x 2^(n-1); 401 is not retried', async () => {
  const r = await receiver('generic');
  r.script = [500, 500, 200];
  const bad = await receiver('generic', 401);
  const x = notifierOf(
    configOf({ notifications: { ...fast, generic: [{ name: 'flaky', enabled: true, url: r.url }, { name: 'revoked', enabled: true, url: bad.url }] } }),
  );
  x.notify('error', 'boom');
  await r.waitFor(3);
  await x.idle();
  const [t1, t2, t3] = r.received.map((q) => q.at);
  assert.ok((t2 as number) - (t1 as number) >= 90, `first wait ${(t2 as number) - (t1 as number)} ms`);
  assert.ok((t3 as number) - (t2 as number) >= 190, `second wait ${(t3 as number) - (t2 as number)} ms`);
  assert.equal(bad.received.length, 1);
  assert.deepEqual(x.stats(), { queued: 0, dropped: 0, delivered: 1, failed: 1, stored: 0 });
});

test('429 waits for Retry-After before the next attempt', async () => {
  const r = await receiver('chat_a');
  r.script = [429, 200];
  r.retryAfter = 1;
  const x = notifierOf(configOf({ notifications: { ...fast, chat_a: { enabled: true, webhook_url: r.url } } }));
  x.notify('error', 'slow down');
  await r.waitFor(2);
  const waited = (r.received[1]?.at as number) - (r.received[0]?.at as number);
  assert.ok(waited >= 950, `waited ${waited} ms`);
});

test('time-outs exhaust the retries; webhook.endpoints failures are stored and the retry job delivers them', async () => {
  const r = await receiver('generic', 'hang');
  const store = openBandwidthdStore({ path: ':memory:', journal_mode: 'MEMORY', synchronous: 'OFF', cache_size_kb: 1000, auto_migrate: true });
  const config = configOf({
    webhook: { enabled: true, max_retries: 2, backoff_base: '100ms', endpoints: [{ name: 'ep', url: r.url, type: 'generic', enabled: true }] },
    notifications: { batch_window: '10ms' },
  });
  const x = notifierOf(config, { store, timeoutMs: 300 });
  x.notify('quota_exceeded', 'over', { container: 'a' });
  await r.waitFor(2);
  await x.idle();
  assert.equal(store.outboxCount(), 1);
  assert.equal(x.stats().stored, 1);
  r.fallback = 200;
  assert.deepEqual(await x.retryStored(), { delivered: 1, left: 0 });
  assert.equal((r.received[2]?.body as { event: string }).event, 'quota_exceeded');
  store.close();
});

test('a stop with an endpoint that never answers ends within its grace and stores every queued notification instead of losing them', async () => {
  const r = await receiver('generic', 'hang');
  const store = openBandwidthdStore({ path: ':memory:', journal_mode: 'MEMORY', synchronous: 'OFF', cache_size_kb: 1000, auto_migrate: true });
  const config = configOf({ webhook: { enabled: true, max_retries: 1, endpoints: [{ name: 'ep', url: r.url, type: 'generic', enabled: true }] }, notifications: { batch_window: '0s' } });
  const x = notifierOf(config, { store, timeoutMs: 3000, stopGraceMs: 500 });
  for (const e of ['container_found', 'daemon_started', 'daemon_stopped'] as const) x.notify(e, e);
  await r.waitFor(1);
  const t0 = Date.now();
  await x.stop();
  assert.ok(Date.now() - t0 < 1500, `the stop took ${Date.now() - t0} ms`);
  assert.deepEqual(store.outbox('ep', 10).map((row) => (JSON.parse(row.body) as { event: string }).event), ['container_found', 'daemon_started', 'daemon_stopped']);
  assert.equal(r.received.length, 1, 'nothing sent after the grace');
  store.close();
});

test('a full queue drops new notifications and counts them', async () => {
  const r = await receiver('generic', 'hang');
  const x = notifierOf(configOf({ webhook: { queue_size: 2 }, notifications: { retry: { max_retries: 1, backoff_base: '100ms' }, batch_window: '10ms', generic: [{ name: 'g', enabled: true, url: r.url }] } }), { timeoutMs: 300 });
  for (let i = 0; i < 5; i++) x.notify('error', `e${i}`);
  assert.equal(x.stats().dropped, 3);
  assert.equal(x.stats().queued, 2);
  await x.idle();
});

test('a full queue warns at most once a minute, naming the event and destination dropped and how many were dropped since', async () => {
  const r = await receiver('generic', 'hang');
  const lines: { msg: string; event?: string; destination?: string; dropped?: number }[] = [];
  const clock = { t: Date.parse('2026-03-01T10:00:00Z') };
  const x = createNotifier({
    config: configOf({ webhook: { queue_size: 2 }, notifications: { retry: { max_retries: 1, backoff_base: '100ms' }, batch_window: '10ms', generic: [{ name: 'g', enabled: true, url: r.url }] } }),
    store: null,
    logger: pino({ level: 'warn' }, { write: (l: string) => void lines.push(JSON.parse(l) as (typeof lines)[number]) }),
    now: () => new Date(clock.t),
    requestTimeoutMs: 300,
  });
  notifiers.push(x);
  const full = (): typeof lines => lines.filter((l) => l.msg.startsWith('webhook queue full'));
  for (let i = 0; i < 5; i++) x.notify('error', `e${i}`);
  assert.deepEqual(full().map((l) => [l.event, l.destination, l.dropped]), [['error', 'g', 1]]);
  assert.match(full()[0]?.msg ?? '', /^webhook queue full \(2\): error for g dropped, 1 dropped since the last such warning$/);
  clock.t += 59_000;
  x.notify('quota_warning', 'still within the minute');
  assert.equal(full().length, 1);
  clock.t += 1_000;
  x.notify('quota_exceeded', 'a minute later');
  assert.deepEqual(full().map((l) => [l.event, l.destination, l.dropped]), [['error', 'g', 1], ['quota_exceeded', 'g', 4]]);
  assert.equal(x.stats().dropped, 5);
  await x.idle();
});

test('events maps: defaults of §6.2 apply, a platform can switch an event off or on', async () => {
  const a = await receiver('generic');
  const b = await receiver('generic');
  const x = notifierOf(
    configOf({
      notifications: {
        ...fast,
        generic: [
          { name: 'defaults', enabled: true, url: a.url },
          { name: 'custom', enabled: true, url: b.url, events: { reset: true, error: false } },
        ],
      },
    }),
  );
  x.notify('reset', 'r');
  x.notify('error', 'e');
  await x.idle();
  assert.deepEqual(a.received.map((q) => (q.body as { event: string }).event), ['error']);
  assert.deepEqual(b.received.map((q) => (q.body as { event: string }).event), ['reset']);
});

test('chat_a is paced under its message rate (here 2 per 600 ms instead of 30 per minute)', async () => {
  const r = await receiver('chat_a');
  const x = notifierOf(configOf({ notifications: { retry: { max_retries: 1, backoff_base: '100ms' }, batch_window: '10ms', chat_a: { enabled: true, webhook_url: r.url } } }), { pace: { messages: 2, windowMs: 600 } });
  for (let i = 0; i < 3; i++) {
    x.notify('error', `e${i}`);
    await x.idle();
  }
  const [a, , c] = r.received.map((q) => q.at);
  assert.equal(r.received.length, 3);
  assert.ok((c as number) - (a as number) >= 580, `third message after ${(c as number) - (a as number)} ms`);
});

test('${ENV} secrets in URLs and headers are resolved at load; an unset one fails the delivery naming it, and nothing is sent', async () => {
  const r = await receiver('generic');
  process.env['HK_BWD_TEST_TOKEN'] = 's3cret';
  delete process.env['HK_BWD_TEST_UNSET'];
  delete process.env['HK_BWD_TEST_PASS'];
  const config = configOf({
    notifications: {
      ...fast,
      generic: [
        { name: 'ok', enabled: true, url: r.url, headers: { Authorization: 'Bearer ${HK_BWD_TEST_TOKEN}' } },
        { name: 'unset', enabled: true, url: `${r.url.replace('http://', 'http://ops:${HK_BWD_TEST_PASS}@')}?k=\${HK_BWD_TEST_UNSET}`, headers: { Authorization: 'Bearer ${HK_BWD_TEST_UNSET}' } },
      ],
    },
  });
  const x = notifierOf(config);
  x.notify('error', 'e');
  await x.idle();
  assert.deepEqual(
    r.received.map((q) => [q.path, q.headers['authorization']]),
    [['/hook', 'Bearer s3cret']],
  );
  assert.deepEqual(x.stats(), { queued: 0, dropped: 0, delivered: 1, failed: 1, stored: 0 });
  const dest = destinationsOf(config).find((d) => d.dest.name === 'unset')?.dest;
  assert.ok(dest);
  const res = await sendOnce(dest, '{}');
  assert.deepEqual(res, { ok: false, permanent: true, error: 'environment variables HK_BWD_TEST_PASS, HK_BWD_TEST_UNSET are not set: ${HK_BWD_TEST_PASS}, ${HK_BWD_TEST_UNSET} would be sent literally in the URL or headers' });
  assert.equal(r.received.length, 1);
});

const memStore = (): BandwidthdStore => openBandwidthdStore({ path: ':memory:', journal_mode: 'MEMORY', synchronous: 'OFF', cache_size_kb: 1000, auto_migrate: true });

/** A stored delivery as the live path would have stored it: the destination's body for one notice. */
function storeFor(store: BandwidthdStore, config: BandwidthdConfig, name: string, message: string): void {
  const dest = destinationsOf(config).find((d) => d.dest.name === name)?.dest;
  assert.ok(dest);
  store.enqueue(name, bodyFor(dest, [{ event: 'error', timestamp: new Date().toISOString(), message, data: {} }]), Date.now());
}

const endpoint = (name: string, url: string, type: Platform = 'generic'): Record<string, unknown> => ({ name, url, type, enabled: true });

test('a switched-off destination gets none of its stored deliveries; they wait until it is switched on again', async () => {
  const r = await receiver('generic');
  const store = openBandwidthdStore({ path: ':memory:', journal_mode: 'MEMORY', synchronous: 'OFF', cache_size_kb: 1000, auto_migrate: true });
  const on = configOf({ webhook: { enabled: true, endpoints: [endpoint('ep', r.url), endpoint('other', r.url)] } });
  storeFor(store, on, 'ep', 'stored while enabled');
  storeFor(store, on, 'other', 'stored while enabled');
  const master = notifierOf(configOf({ webhook: { enabled: false, endpoints: [endpoint('ep', r.url), endpoint('other', r.url)] } }), { store });
  assert.deepEqual(await master.retryStored(), { delivered: 0, left: 2 });
  const one = notifierOf(configOf({ webhook: { enabled: true, endpoints: [{ ...endpoint('ep', r.url), enabled: false }, endpoint('other', r.url)] } }), { store });
  assert.deepEqual(await one.retryStored(), { delivered: 1, left: 1 });
  assert.equal(r.received.length, 1, 'only the enabled destination was sent to');
  assert.deepEqual(await notifierOf(on, { store }).retryStored(), { delivered: 1, left: 0 });
  store.close();
});

test('the retry pass and live deliveries share the chat_a pace of one webhook', async () => {
  const r = await receiver('chat_a');
  const store = memStore();
  const config = configOf({ webhook: { enabled: true, max_retries: 1, endpoints: [endpoint('ca', r.url, 'chat_a')] }, notifications: { batch_window: '10ms' } });
  // One message per window: the pace's state right after any send is certain, whatever the timing.
  const x = notifierOf(config, { store, pace: { messages: 1, windowMs: 800 } });
  storeFor(store, config, 'ca', 's1');
  storeFor(store, config, 'ca', 's2');
  // The first stored message uses up the pace; the other is left to a later pass (waiting here would have sent it).
  assert.deepEqual(await x.retryStored(), { delivered: 1, left: 1 });
  assert.equal(r.received.length, 1);
  // A live notification now waits until the window has room again.
  x.notify('error', 'live');
  await x.idle();
  assert.equal(r.received.length, 2);
  const gap = (r.received[1]?.at as number) - (r.received[0]?.at as number);
  assert.ok(gap >= 750, `live message ${gap} ms after the stored one`);
  // And a pass right after finds the pace used up by the live message.
  assert.deepEqual(await x.retryStored(), { delivered: 0, left: 1 });
  assert.equal(r.received.length, 2);
  assert.deepEqual(r.received.map((q) => q.problems), [[], []]);
});

/** A generic endpoint `ep` with an outbox whose first answer is a 429 asking for 120 s. */
async function heldEndpoint(): Promise<{ r: Receiver; store: BandwidthdStore; config: BandwidthdConfig; x: Notifier }> {
  const r = await receiver('generic');
  r.script = [429];
  r.retryAfter = 120;
  const store = memStore();
  const config = configOf({ webhook: { enabled: true, max_retries: 3, backoff_base: '100ms', endpoints: [endpoint('ep', r.url)] }, notifications: { batch_window: '10ms' } });
  return { r, store, config, x: notifierOf(config, { store }) };
}

test('a Retry-After beyond 60 s on a stored destination defers the delivery to the outbox at once, and the retry pass honours it', async () => {
  const { r, store, x } = await heldEndpoint();
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
  const { r, store, config, x } = await heldEndpoint();
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

test('a retry pass that fails on a stored delivery warns once per destination and pass, with the error and how many are left', async () => {
  const dead = await receiver('generic', 500);
  const alive = await receiver('generic');
  const store = memStore();
  const config = configOf({ webhook: { enabled: true, endpoints: [endpoint('dead', dead.url), endpoint('alive', alive.url)] } });
  const lines: { msg: string; destination?: string; status?: number; deliveries?: number }[] = [];
  const x = createNotifier({ config, store, logger: pino({ level: 'warn' }, { write: (l: string) => void lines.push(JSON.parse(l) as (typeof lines)[number]) }) });
  notifiers.push(x);
  for (const m of ['d1', 'd2', 'd3']) storeFor(store, config, 'dead', m);
  storeFor(store, config, 'alive', 'a1');
  const warned = (): typeof lines => lines.filter((l) => l.msg.startsWith('stored webhook not delivered'));
  assert.deepEqual(await x.retryStored(), { delivered: 1, left: 3 });
  assert.deepEqual(warned().map((l) => [l.destination, l.status, l.deliveries]), [['dead', 500, 3]]);
  assert.match(warned()[0]?.msg ?? '', /^stored webhook not delivered by the retry job, 3 left for a later pass: HTTP 500/);
  await x.retryStored();
  assert.equal(warned().length, 2, 'one line per pass');
  assert.equal(dead.received.length, 2);
  store.close();
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

test('a redirect is not followed and not retried: the failure names where it points', async () => {
  const moved = createServer((_req, res) => res.writeHead(301, { location: 'https://hooks.example.test/new' }).end());
  await new Promise<void>((r) => moved.listen(0, '127.0.0.1', r));
  open.push({ close: () => new Promise<void>((r) => moved.close(() => r())) });
  const url = `http://127.0.0.1:${(moved.address() as { port: number }).port}/old`;
  const dest = destinationsOf(configOf({ notifications: { generic: [{ name: 'g', enabled: true, url }] } }))[0]?.dest;
  assert.ok(dest);
  const res = await sendOnce(dest, '{}');
  assert.deepEqual([res.ok, res.permanent, res.status], [false, true, 301]);
  assert.equal(res.error, 'HTTP 301: the endpoint redirects to https://hooks.example.test/new; put that URL in the config (redirects are not followed)');
});

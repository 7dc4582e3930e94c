import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino, { type Logger } from 'pino';
import { stringify } from 'yaml';
import type { BandwidthdConfig } from '../../src/contracts/types.ts';
import type { ContainerInfo, ContainerSource } from '../../src/lib/docker.ts';
import { localRequest } from '../../src/lib/local-socket.ts';
import type { InterfaceRef, InterfaceShape, TrafficControl } from '../../src/lib/tc.ts';
import { GIB } from '../../src/lib/units.ts';
import type { HostVeth, IfaceCounters } from '../../src/lib/veth.ts';
import { startReceiver, type Receiver } from '../../test/integration/bandwidthd/receivers.ts';
import { createLocalApi } from './api.ts';
import { loadBandwidthdConfig } from './config.ts';
import { createDaemon, displayGb, evaluateQuota, JOBS, quotaBytesOf, type Daemon } from './daemon.ts';
import { bodyFor, createNotifier, destinationsOf, type Notifier } from './notifier.ts';
import type { EventName } from './payloads.ts';
import { createReloader } from './reload.ts';
import { openBandwidthdStore, type BandwidthdStore } from './store.ts';

const dir = mkdtempSync(join(tmpdir(), 'hk-bwd-unit-'));
const silent = pino({ level: 'silent' });
const running: Daemon[] = [];
const notifiers: Notifier[] = [];
const receivers: Receiver[] = [];
after(async () => {
  for (const d of running) await d.stop();
  for (const x of notifiers) await x.stop();
  for (const r of receivers) await r.close();
});

test('quotaBytesOf: the label in GB (GiB) wins, a bad label falls back to the default', () => {
  assert.deepEqual(quotaBytesOf({ 'bandwidth.daily_quota': '0.5' }, 500), { bytes: GIB / 2 });
  assert.deepEqual(quotaBytesOf({ 'bandwidth.daily_quota': '0' }, 500), { bytes: 0 });
  assert.deepEqual(quotaBytesOf({}, 2), { bytes: 2 * GIB });
  assert.deepEqual(quotaBytesOf({ 'bandwidth.daily_quota': 'lots' }, 1), { bytes: GIB, bad: 'lots' });
  assert.deepEqual(quotaBytesOf({ 'bandwidth.daily_quota': '-1' }, 1), { bytes: GIB, bad: '-1' });
});

test('quotaBytesOf: only decimal notation is read, and a positive quota is never rounded down to none', () => {
  assert.deepEqual(quotaBytesOf({ 'bandwidth.daily_quota': ' 2.5 ' }, 1), { bytes: 2.5 * GIB });
  assert.deepEqual(quotaBytesOf({ 'bandwidth.daily_quota': '.5' }, 1), { bytes: GIB / 2 });
  for (const bad of ['0x10', '0b1', '0o7', '1e3', '1e-12', 'Infinity', '1_000', '+1', '']) {
    assert.deepEqual(quotaBytesOf({ 'bandwidth.daily_quota': bad }, 1), { bytes: GIB, bad }, bad);
  }
  assert.deepEqual(quotaBytesOf({ 'bandwidth.daily_quota': '0.000000000001' }, 1), { bytes: 1 });
  assert.deepEqual(quotaBytesOf({}, 1e-12), { bytes: 1 });
  assert.deepEqual(quotaBytesOf({ 'bandwidth.daily_quota': 'x' }, 1e-12), { bytes: 1, bad: 'x' });
});

test('evaluateQuota: warning once below 100 %, exceeded at 100 %, nothing without a quota', () => {
  assert.deepEqual(evaluateQuota(90, 100, 90, false, false), { warn: true, exceed: false, pct: 90 });
  assert.deepEqual(evaluateQuota(95, 100, 90, true, false), { warn: false, exceed: false, pct: 95 });
  assert.deepEqual(evaluateQuota(100, 100, 90, false, false), { warn: false, exceed: true, pct: 100 });
  assert.deepEqual(evaluateQuota(200, 100, 90, true, true), { warn: false, exceed: false, pct: 200 });
  assert.deepEqual(evaluateQuota(50, 100, 0, false, false), { warn: false, exceed: false, pct: 50 });
  assert.deepEqual(evaluateQuota(5, 0, 90, false, false), { warn: false, exceed: false, pct: 0 });
});

interface Rig {
  daemon: Daemon;
  config: BandwidthdConfig;
  store: BandwidthdStore;
  notifier: Notifier;
  counters: Map<string, IfaceCounters>;
  applied: InterfaceShape[][];
  removed: InterfaceRef[][];
  sent: EventName[];
  clock: { t: number };
  containers: ContainerInfo[];
  sweeps: { n: number };
  /** The host veth of a pid when not `veth<pid>` (shared namespaces, a reconnected network). */
  veths: Map<number, HostVeth>;
}

/** The real notifier, for a rig whose notifications go to receivers on loopback. */
function realNotifier(config: BandwidthdConfig, store: BandwidthdStore): Notifier {
  const x = createNotifier({ config, store, logger: silent });
  notifiers.push(x);
  return x;
}

async function receiver(fallback: 200 | 'hang' = 200): Promise<Receiver> {
  const r = await startReceiver('generic', fallback);
  receivers.push(r);
  return r;
}

/** Config for a rig whose every default-on event goes to `hook` at once. */
const toHook = (hook: Receiver): Record<string, unknown> => ({ notifications: { batch_window: '0s', generic: [{ name: 'hook', enabled: true, url: hook.url }] } });
const hookEvents = (hook: Receiver): string[] => hook.received.map((q) => (q.body as { event: string }).event);

function rig(over: Record<string, unknown>, opts: { store?: BandwidthdStore; t?: number; notifier?: (config: BandwidthdConfig, store: BandwidthdStore) => Notifier; tc?: Partial<TrafficControl>; logger?: Logger } = {}): Rig {
  const file = join(dir, `c${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(file, stringify({ database: { path: ':memory:' }, timezone: 'Asia/Tokyo', scheduler: { check_interval: '1s' }, docker: { watch_events: false }, ...over }));
  const { config } = loadBandwidthdConfig(file);
  const store = opts.store ?? openBandwidthdStore({ ...config.database, journal_mode: 'MEMORY' });
  const counters = new Map<string, IfaceCounters>();
  const applied: InterfaceShape[][] = [];
  const removed: InterfaceRef[][] = [];
  const sent: EventName[] = [];
  const sweeps = { n: 0 };
  const clock = { t: opts.t ?? Date.parse('2026-03-01T03:00:00Z') };
  const veths = new Map<number, HostVeth>();
  const containers: ContainerInfo[] = [{ id: 'a'.repeat(64), name: 'web', labels: { 'bandwidth.daily_quota': '0.001' }, running: true, pid: 101, networkMode: 'default' }];
  const source: ContainerSource = { list: () => Promise.resolve(containers), watch: () => () => undefined, inspect: () => Promise.resolve(null), version: () => Promise.resolve('1.44') };
  const tc: TrafficControl = {
    apply: (s) => (applied.push(s), Promise.resolve({ applied: s.length, unchanged: 0, failed: [] })),
    remove: (r) => (removed.push(r), Promise.resolve({ applied: r.length, unchanged: 0, failed: [] })),
    prepare: () => Promise.resolve({ applied: 0, unchanged: 0, failed: [] }),
    verify: () => Promise.resolve([]),
    forget: () => undefined,
    sweepOrphanIfbs: () => (sweeps.n++, Promise.resolve(0)),
    rootDrops: () => Promise.resolve(new Map()),
    ...opts.tc,
  };
  const notifier: Notifier = opts.notifier?.(config, store) ?? {
    notify: (e) => void sent.push(e),
    retryStored: () => Promise.resolve({ delivered: 0, left: 0 }),
    stats: () => ({ queued: 0, dropped: 0, delivered: 0, failed: 0, stored: 0 }),
    idle: () => Promise.resolve(),
    stop: () => Promise.resolve(),
  };
  const daemon = createDaemon({
    config,
    store,
    source,
    tc,
    notifier,
    logger: opts.logger ?? silent,
    hostVethOf: (pid) => Promise.resolve(veths.get(pid) ?? { iface: `veth${pid}`, ifindex: pid }),
    readCounters: (ifaces) => Promise.resolve(new Map(ifaces.filter((i) => counters.has(i)).map((i) => [i, counters.get(i) as IfaceCounters]))),
    now: () => clock.t,
  });
  running.push(daemon);
  return { daemon, config, store, notifier, counters, applied, removed, sent, clock, containers, sweeps, veths };
}

const KB = 1024;

test('usage into the container (host veth TX) counts as its rx; warning once, then exceeded speeds', async () => {
  const r = rig({ quota: { warning_percent: 50, exceeded_speed_rx_mbps: 2, exceeded_speed_tx_mbps: 3 }, bandwidth: { default_rx_mbps: 10, default_tx_mbps: 20, default_ceil_mbps: 30 } });
  r.counters.set('veth101', { rxBytes: 0, txBytes: 0 });
  await r.daemon.start();
  assert.deepEqual(r.sent, ['container_found']);
  const first = r.applied.at(-1)?.[0];
  assert.equal(first?.down?.rateBps, 10e6);
  assert.equal(first?.up?.rateBps, 20e6);
  assert.equal(first?.down?.ceilBps, 30e6);

  r.counters.set('veth101', { rxBytes: 10 * KB, txBytes: 600 * KB }); // 610 KiB of 1.07 MB
  await r.daemon.cycle();
  await r.daemon.cycle();
  const s = r.daemon.status().containers[0];
  assert.equal(s?.rx_day_bytes, 600 * KB);
  assert.equal(s?.tx_day_bytes, 10 * KB);
  assert.deepEqual(r.sent, ['container_found', 'quota_warning']);

  r.counters.set('veth101', { rxBytes: 10 * KB, txBytes: 1200 * KB });
  await r.daemon.cycle();
  assert.deepEqual(r.sent, ['container_found', 'quota_warning', 'quota_exceeded']);
  const slow = r.applied.at(-1)?.[0];
  assert.equal(slow?.down?.rateBps, 2e6);
  assert.equal(slow?.up?.rateBps, 3e6);
  assert.equal(r.daemon.status().containers[0]?.mode, 'exceeded');
});

test('the quota warning and the exceeded quota are both logged, with usage and quota, not only sent', async () => {
  const lines: { level: number; msg: string; container?: string; usage_bytes?: number; quota_bytes?: number }[] = [];
  const logger = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l) as (typeof lines)[number]) });
  const r = rig({ quota: { warning_percent: 50 } }, { logger });
  r.counters.set('veth101', { rxBytes: 0, txBytes: 0 });
  await r.daemon.start();
  r.counters.set('veth101', { rxBytes: 0, txBytes: 600 * KB });
  await r.daemon.cycle();
  r.counters.set('veth101', { rxBytes: 0, txBytes: 1200 * KB });
  await r.daemon.cycle();
  const quota = lines.filter((l) => l.msg.startsWith('daily quota'));
  assert.deepEqual(
    quota.map((l) => [l.level, l.msg.replace(/[\d.]+%/, 'N%'), l.container, l.quota_bytes]),
    [
      [30, 'daily quota warning: N% used', 'web', r.daemon.status().containers[0]?.quota_bytes],
      [40, 'daily quota exceeded: throttled to 1/1 Mbit/s', 'web', r.daemon.status().containers[0]?.quota_bytes],
    ],
  );
  assert.equal(quota[0]?.usage_bytes, 600 * KB);
});

test('a store that refuses writes (full disk): the exceeded quota is still told, and the repeating poll failure is one error event', async () => {
  const store = openBandwidthdStore({ path: ':memory:', journal_mode: 'MEMORY', synchronous: 'OFF', cache_size_kb: 1000, auto_migrate: true });
  const full = { on: false };
  const failing: BandwidthdStore = {
    ...store,
    upsert: (row) => {
      if (full.on) throw new Error('database or disk is full');
      store.upsert(row);
    },
  };
  const r = rig({ bandwidth: { poll_interval: '50ms' } }, { store: failing });
  r.counters.set('veth101', { rxBytes: 0, txBytes: 0 });
  await r.daemon.start();
  full.on = true;
  r.counters.set('veth101', { rxBytes: 0, txBytes: 2 * 1024 * KB });
  const end = Date.now() + 5000;
  while (!r.sent.includes('error') && Date.now() < end) await new Promise((res) => setTimeout(res, 50));
  await new Promise((res) => setTimeout(res, 300)); // several more failing polls
  assert.equal(r.daemon.status().containers[0]?.exceeded, true);
  assert.deepEqual(r.sent, ['container_found', 'quota_exceeded', 'error'], 'one error event for the repeating failure');
});

test('disconnect_on_exceeded removes every rule of the exceeded container', async () => {
  const r = rig({ quota: { disconnect_on_exceeded: true } });
  r.counters.set('veth101', { rxBytes: 0, txBytes: 0 });
  await r.daemon.start();
  r.counters.set('veth101', { rxBytes: 0, txBytes: 2 * 1024 * KB });
  await r.daemon.cycle();
  assert.deepEqual(r.removed.at(-1), [{ iface: 'veth101', ifindex: 101 }]);
  assert.equal(r.daemon.status().containers[0]?.mode, 'none');
});

test('reset_cron fires at midnight of `timezone`: counters, warning and exceeded cleared, default rules back', async () => {
  // 23:59:58 in Tokyo.
  const r = rig({ scheduler: { check_interval: '1s' }, status: { history_size: 2, update_interval: '1s' } }, { t: Date.parse('2026-03-01T14:59:58Z') });
  r.counters.set('veth101', { rxBytes: 0, txBytes: 0 });
  await r.daemon.start();
  r.counters.set('veth101', { rxBytes: 0, txBytes: 2 * 1024 * KB });
  await r.daemon.cycle();
  assert.equal(r.daemon.status().containers[0]?.exceeded, true);
  assert.equal(r.daemon.status().next_reset_at, '2026-03-01T15:00:00.000Z');
  r.clock.t = Date.parse('2026-03-01T15:00:01Z');
  const end = Date.now() + 5000;
  while (r.daemon.status().containers[0]?.exceeded && Date.now() < end) await new Promise((res) => setTimeout(res, 100));
  const s = r.daemon.status();
  assert.equal(s.containers[0]?.exceeded, false);
  assert.equal(s.containers[0]?.rx_day_bytes, 0);
  assert.equal(s.last_reset_at, '2026-03-01T15:00:01.000Z');
  assert.equal(r.applied.at(-1)?.[0]?.down?.rateBps, 100e6);
  assert.ok(s.history.length >= 1 && s.history.length <= 2);
});

test('a reset that fell due while the daemon was stopped happens at start', async () => {
  const store = openBandwidthdStore({ path: ':memory:', journal_mode: 'MEMORY', synchronous: 'OFF', cache_size_kb: 1000, auto_migrate: true });
  store.upsert({ id: 'a'.repeat(64), name: 'web', iface: 'veth101', rx_day: 5000, tx_day: 7, last_rx: 0, last_tx: 0, warned: 1, exceeded: 1, first_seen_at: 0, last_seen_at: 0 });
  store.setMeta('last_reset', String(Date.parse('2026-02-27T15:00:00Z')));
  const r = rig({}, { store, t: Date.parse('2026-03-01T03:00:00Z') });
  r.counters.set('veth101', { rxBytes: 0, txBytes: 0 });
  await r.daemon.start();
  const s = r.daemon.status().containers[0];
  assert.equal(s?.rx_day_bytes, 0);
  assert.equal(s?.exceeded, false);
  assert.equal(s?.mode, 'default');
});

test('bandwidth reset of one container by name; unknown names are an error', async () => {
  const r = rig({});
  r.counters.set('veth101', { rxBytes: 0, txBytes: 0 });
  await r.daemon.start();
  r.counters.set('veth101', { rxBytes: 0, txBytes: 2 * 1024 * KB });
  await r.daemon.cycle();
  assert.deepEqual(await r.daemon.reset('web'), ['web']);
  assert.equal(r.daemon.status().containers[0]?.exceeded, false);
  assert.ok(r.sent.includes('reset'));
  await assert.rejects(r.daemon.reset('nope'), /no managed container nope$/);
  await assert.rejects(r.daemon.reset('ed0'), /no managed container ed0 \(a name matches whole; an id prefix needs at least 4 characters\)/);
});

test('a container that goes away is container_removed; its row stays until cleanup forgets it', async () => {
  const r = rig({ cleanup: { stale_container_hours: 1, compact_db: false } });
  await r.daemon.start();
  r.containers.length = 0;
  await r.daemon.cycle();
  assert.deepEqual(r.sent, ['container_found', 'container_removed']);
  assert.equal(r.store.containers().length, 1);
  // A graceful stop deletes the IFB the container left, as the next start would.
  const before = r.sweeps.n;
  await r.daemon.stop();
  assert.equal(r.sweeps.n, before + 1);
  assert.match(await r.daemon.runJob('cleanup'), /forgot 0 stale/);
  r.clock.t += 2 * 3_600_000;
  assert.match(await r.daemon.runJob('cleanup'), /forgot 1 stale/);
  assert.equal(r.store.containers().length, 0);
});

test('a container recreated under its name keeps the usage of the day and its exceeded state', async () => {
  const r = rig({ quota: { exceeded_speed_rx_mbps: 2, exceeded_speed_tx_mbps: 3 } });
  r.counters.set('veth101', { rxBytes: 0, txBytes: 0 });
  await r.daemon.start();
  r.counters.set('veth101', { rxBytes: 0, txBytes: 1200 * KB });
  await r.daemon.cycle();
  assert.equal(r.daemon.status().containers[0]?.mode, 'exceeded');
  // docker rm -f web && docker run --name web ...: a new id, pid and veth.
  r.containers.splice(0, 1, { id: 'b'.repeat(64), name: 'web', labels: { 'bandwidth.daily_quota': '0.001' }, running: true, pid: 202, networkMode: 'default' });
  r.counters.set('veth202', { rxBytes: 0, txBytes: 0 });
  await r.daemon.cycle();
  const now = r.daemon.status().containers.find((c) => c.id === 'b'.repeat(64));
  assert.equal(now?.rx_day_bytes, 1200 * KB);
  assert.equal(now?.mode, 'exceeded');
  assert.equal(r.applied.at(-1)?.find((a) => a.iface === 'veth202')?.down?.rateBps, 2e6, 'throttled from its first cycle');
  assert.equal(r.sent.filter((e) => e === 'quota_exceeded').length, 1, 'no second quota_exceeded for the same day');
});

test('a running container renamed keeps its day under the new name; a new container given the old name starts from zero', async () => {
  const r = rig({});
  r.counters.set('veth101', { rxBytes: 0, txBytes: 0 });
  await r.daemon.start();
  r.counters.set('veth101', { rxBytes: 0, txBytes: 600 * KB });
  await r.daemon.cycle();
  // docker rename web web-old, then docker stop web-old and docker run --name web ...
  r.containers.splice(0, 1, { ...(r.containers[0] as ContainerInfo), name: 'web-old' });
  await r.daemon.cycle();
  assert.equal(r.store.container('a'.repeat(64))?.name, 'web-old');
  r.containers.splice(0, 1, { ...(r.containers[0] as ContainerInfo), running: false, pid: 0 }, { id: 'b'.repeat(64), name: 'web', labels: {}, running: true, pid: 202, networkMode: 'default' });
  r.counters.set('veth202', { rxBytes: 0, txBytes: 0 });
  await r.daemon.cycle();
  assert.equal(r.daemon.status().containers.find((c) => c.id === 'b'.repeat(64))?.rx_day_bytes, 0);
  assert.equal(r.store.container('a'.repeat(64))?.rx_day, 600 * KB);
});

test('history: hourly usage kept, yesterday exported as CSV and JSON, rows past retention removed', async () => {
  const exportPath = join(dir, 'exports');
  const r = rig({ history: { export_enabled: true, export_path: exportPath, retention_days: 2 }, timezone: 'UTC' }, { t: Date.parse('2026-03-01T10:30:00Z') });
  r.counters.set('veth101', { rxBytes: 0, txBytes: 0 });
  await r.daemon.start();
  r.counters.set('veth101', { rxBytes: 100, txBytes: 300 });
  await r.daemon.cycle();
  r.clock.t = Date.parse('2026-03-02T00:05:00Z');
  assert.match(await r.daemon.runJob('history'), /removed 0 history rows.*exported 1 rows/);
  const { readFileSync } = await import('node:fs');
  assert.equal(readFileSync(join(exportPath, 'usage-2026-03-01.csv'), 'utf8'), `start,container_id,container,rx_bytes,tx_bytes\n2026-03-01T10:00:00.000Z,${'a'.repeat(64)},web,300,100\n`);
  const json = JSON.parse(readFileSync(join(exportPath, 'usage-2026-03-01.json'), 'utf8')) as { rows: unknown[] };
  assert.equal(json.rows.length, 1);
  r.clock.t = Date.parse('2026-03-05T00:05:00Z');
  assert.match(await r.daemon.runJob('history'), /removed 1 history rows/);
});

test('a history export that fell due while the daemon was stopped is written at start: the last one missed, logged', async () => {
  const { existsSync, readFileSync } = await import('node:fs');
  const id = 'a'.repeat(64);
  /** A daemon started at `t` whose last history run was at `last` (none: a store without it). */
  async function startWith(exportPath: string, t: string, last?: string): Promise<string[]> {
    const store = openBandwidthdStore({ path: ':memory:', journal_mode: 'MEMORY', synchronous: 'OFF', cache_size_kb: 1000, auto_migrate: true });
    store.upsert({ id, name: 'web', iface: 'veth101', rx_day: 0, tx_day: 0, last_rx: 0, last_tx: 0, warned: 0, exceeded: 0, first_seen_at: 0, last_seen_at: 0 });
    for (const day of ['2026-02-26', '2026-02-27', '2026-02-28']) store.addHourly(id, Date.parse(`${day}T12:00:00Z`), 10, 20);
    if (last !== undefined) store.setMeta('last_history', String(Date.parse(last)));
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (l: string) => void lines.push((JSON.parse(l) as { msg: string }).msg) });
    const r = rig({ history: { export_enabled: true, export_path: exportPath }, timezone: 'UTC' }, { store, t: Date.parse(t), logger });
    r.counters.set('veth101', { rxBytes: 0, txBytes: 0 });
    await r.daemon.start();
    return lines;
  }
  const days = (exportPath: string): string[] => ['2026-02-26', '2026-02-27', '2026-02-28'].filter((d) => existsSync(join(exportPath, `usage-${d}.csv`)));

  // Down from before the run of 02-28 00:05 until after that of 03-01 00:05: the last one (02-28) is exported.
  const late = join(dir, 'missed-late');
  const lines = await startWith(late, '2026-03-01T10:30:00Z', '2026-02-27T00:05:00Z');
  assert.deepEqual(days(late), ['2026-02-28']);
  assert.equal(readFileSync(join(late, 'usage-2026-02-28.csv'), 'utf8'), `start,container_id,container,rx_bytes,tx_bytes\n2026-02-28T12:00:00.000Z,${id},web,10,20\n`);
  assert.ok(lines.includes('a history export fell due while the daemon was stopped; exporting now'), lines.join('\n'));
  assert.ok(lines.some((l) => l.includes('exported 1 rows')), lines.join('\n'));

  // Started before the day's run: the last one missed was on 02-28 and covered 02-27.
  const early = join(dir, 'missed-early');
  await startWith(early, '2026-03-01T00:02:00Z', '2026-02-27T00:05:00Z');
  assert.deepEqual(days(early), ['2026-02-27']);

  // Nothing missed (the day's run was done), or no run recorded yet (a first start): nothing written.
  const none = join(dir, 'missed-none');
  await startWith(none, '2026-03-01T10:30:00Z', '2026-03-01T00:05:00Z');
  await startWith(none, '2026-03-01T10:30:00Z');
  assert.deepEqual(days(none), []);
});

test('a tc that fails is tc_failed once, and retried on the next poll', async () => {
  const r = rig({});
  let fail = true;
  // Only the rig's containers are reused; this daemon has a tc that throws until told otherwise.
  await r.daemon.stop();
  const file = join(dir, 'tcfail.yaml');
  writeFileSync(file, stringify({ database: { path: ':memory:' }, timezone: 'UTC', docker: { watch_events: false } }));
  const { config } = loadBandwidthdConfig(file);
  const sent: EventName[] = [];
  let applies = 0;
  const d = createDaemon({
    config,
    store: openBandwidthdStore({ ...config.database, journal_mode: 'MEMORY' }),
    source: { list: () => Promise.resolve(r.containers), watch: () => () => undefined, inspect: () => Promise.resolve(null), version: () => Promise.resolve('1.44') },
    tc: {
      apply: (s) => (applies++, fail ? Promise.reject(new Error('spawn tc ENOENT')) : Promise.resolve({ applied: s.length, unchanged: 0, failed: [] })),
      remove: () => Promise.resolve({ applied: 0, unchanged: 0, failed: [] }),
      prepare: () => Promise.resolve({ applied: 0, unchanged: 0, failed: [] }),
      verify: () => Promise.resolve([]),
      forget: () => undefined,
      sweepOrphanIfbs: () => Promise.resolve(0),
      rootDrops: () => Promise.resolve(new Map()),
    },
    notifier: { notify: (e) => void sent.push(e), retryStored: () => Promise.resolve({ delivered: 0, left: 0 }), stats: () => ({ queued: 0, dropped: 0, delivered: 0, failed: 0, stored: 0 }), idle: () => Promise.resolve(), stop: () => Promise.resolve() },
    logger: pino({ level: 'silent' }),
    hostVethOf: (pid) => Promise.resolve({ iface: `veth${pid}`, ifindex: pid }),
    readCounters: () => Promise.resolve(new Map()),
  });
  running.push(d);
  await d.start();
  await d.cycle();
  assert.deepEqual(sent, ['container_found', 'tc_failed']);
  fail = false;
  await d.cycle();
  assert.equal(applies, 3);
  assert.equal(d.status().containers[0]?.mode, 'default');
});

test('reconfigure: new default rates are applied to every container at once', async () => {
  const r = rig({ bandwidth: { default_rx_mbps: 10, default_tx_mbps: 10, default_ceil_mbps: 10 } });
  await r.daemon.start();
  assert.equal(r.applied.at(-1)?.[0]?.down?.rateBps, 10e6);
  const file = join(dir, 'reconf.yaml');
  writeFileSync(file, stringify({ database: { path: ':memory:' }, timezone: 'UTC', docker: { watch_events: false }, bandwidth: { default_rx_mbps: 20, default_tx_mbps: 30, default_ceil_mbps: 30 } }));
  await r.daemon.reconfigure(loadBandwidthdConfig(file).config);
  assert.equal(r.applied.at(-1)?.[0]?.down?.rateBps, 20e6);
  assert.equal(r.applied.at(-1)?.[0]?.up?.rateBps, 30e6);
  assert.equal(r.daemon.status().timezone, 'UTC');
});

test('after a reload that changes reset_cron, status shows the next reset the scheduler will run, not a time already past', async () => {
  const r = rig({ timezone: 'UTC' });
  await r.daemon.start();
  assert.equal(r.daemon.status().next_reset_at, '2026-03-02T00:00:00.000Z');
  r.clock.t = Date.parse('2026-03-01T05:30:10Z');
  const file = join(dir, 'reset-cron.yaml');
  writeFileSync(file, stringify({ database: { path: ':memory:' }, timezone: 'UTC', docker: { watch_events: false }, scheduler: { reset_cron: '*/15 * * * *' } }));
  await r.daemon.reconfigure(loadBandwidthdConfig(file).config);
  const s = r.daemon.status();
  assert.equal(s.next_reset_at, '2026-03-01T05:45:00.000Z');
  assert.equal(s.jobs['reset']?.next_at, s.next_reset_at);
});

test('history buckets follow history.rollup_interval', async () => {
  const r = rig({ history: { rollup_interval: '15m' }, timezone: 'UTC' }, { t: Date.parse('2026-03-01T10:40:00Z') });
  r.counters.set('veth101', { rxBytes: 0, txBytes: 0 });
  await r.daemon.start();
  r.counters.set('veth101', { rxBytes: 1, txBytes: 2 });
  await r.daemon.cycle();
  const rows = r.store.hourly(0, Date.parse('2026-03-02T00:00:00Z'));
  assert.deepEqual(rows.map((x) => new Date(x.hour).toISOString()), ['2026-03-01T10:30:00.000Z']);
});

test('scheduled cleanups are at least cleanup.interval apart', async () => {
  const r = rig({ scheduler: { check_interval: '1s', cleanup_cron: '* * * * *' }, cleanup: { interval: '1h', compact_db: false } }, { t: Date.parse('2026-03-01T10:00:30Z') });
  await r.daemon.start();
  const ran = (): string | null => r.daemon.status().jobs['cleanup']?.last_at ?? null;
  r.clock.t = Date.parse('2026-03-01T10:01:01Z');
  const end = Date.now() + 3000;
  while (ran() === null && Date.now() < end) await new Promise((res) => setTimeout(res, 100));
  assert.equal(ran(), '2026-03-01T10:01:01.000Z');
  r.clock.t = Date.parse('2026-03-01T10:02:01Z');
  await new Promise((res) => setTimeout(res, 1300));
  assert.equal(ran(), '2026-03-01T10:01:01.000Z', 'the next minute is skipped');
  assert.equal(r.daemon.status().jobs['cleanup']?.next_at, '2026-03-01T10:03:00.000Z');
});

test('a stored webhook whose endpoint never answers delays neither polling and quota enforcement nor a CLI request', async () => {
  // The stored delivery is the first request and never gets an answer; later (live) ones get 200.
  const hook = await receiver();
  hook.script = ['hang'];
  let notifier: Notifier | undefined;
  const r = rig(
    { webhook: { enabled: true, endpoints: [{ name: 'ops', url: hook.url, type: 'generic', enabled: true }] }, quota: { exceeded_speed_rx_mbps: 2, exceeded_speed_tx_mbps: 3 } },
    { notifier: (config, store) => (notifier = createNotifier({ config, store, logger: silent })) },
  );
  const dest = destinationsOf(r.config)[0]?.dest;
  assert.ok(dest && notifier);
  for (const message of ['stored 1', 'stored 2', 'stored 3']) r.store.enqueue('ops', bodyFor(dest, [{ event: 'error', timestamp: new Date().toISOString(), message, data: {} }]), Date.now());
  r.counters.set('veth101', { rxBytes: 0, txBytes: 0 });
  await r.daemon.start(); // sends the stored deliveries beside its serial work
  await hook.waitFor(1);

  const t0 = Date.now();
  r.counters.set('veth101', { rxBytes: 0, txBytes: 2 * 1024 * KB });
  await r.daemon.cycle();
  assert.equal(r.daemon.status().containers[0]?.mode, 'exceeded');
  assert.equal(r.applied.at(-1)?.[0]?.down?.rateBps, 2e6);
  assert.match(await r.daemon.runJob('health'), /all 1 interfaces as applied/);
  // `bandwidth reset web` as the CLI sends it, over the admin socket.
  const api = createLocalApi(r.daemon, {});
  const socket = join(dir, 'retry.sock');
  await api.app.listen({ path: socket });
  try {
    assert.deepEqual(await localRequest<{ reset: string[] }>(socket, 'POST', '/api/v1/reset?container=web', 'the bandwidth daemon'), { reset: ['web'] });
  } finally {
    await api.app.close();
  }
  assert.ok(Date.now() - t0 < 2000, `enforcement and the CLI took ${Date.now() - t0} ms`);
  const stored = hook.received.filter((q) => /^stored/.test(String((q.body as { data: { message: string } }).data.message)));
  assert.equal(stored.length, 1, 'the pass is still on its first delivery');

  const t1 = Date.now();
  await r.daemon.stop();
  await notifier.stop();
  assert.ok(Date.now() - t1 < 3000, `shutdown took ${Date.now() - t1} ms`);
  assert.equal(r.store.outboxCount(), 3, 'nothing stored is lost');
});

test('a stopped container is no container_removed; its return is no second container_found; its removal is container_removed', async () => {
  const hook = await receiver();
  const r = rig(toHook(hook), { notifier: realNotifier });
  await r.daemon.start();
  const web = r.containers[0] as ContainerInfo;
  const step = async (c: ContainerInfo | null): Promise<string[]> => {
    r.containers.splice(0, 1, ...(c ? [c] : []));
    await r.daemon.cycle();
    await r.notifier.idle();
    return hookEvents(hook);
  };
  assert.deepEqual(await step({ ...web, running: false, pid: 0 }), ['container_found'], 'docker stop');
  assert.deepEqual(r.daemon.status().containers, []);
  assert.deepEqual(await step({ ...web, pid: 303 }), ['container_found'], 'docker start: a new pid and veth');
  assert.equal(r.daemon.status().containers[0]?.iface, 'veth303');
  assert.deepEqual(await step({ ...web, running: true, pid: 404 }), ['container_found'], 'docker restart');
  assert.deepEqual(await step({ ...web, running: false, pid: 0 }), ['container_found']);
  assert.deepEqual(await step(null), ['container_found', 'container_removed'], 'docker rm');
  assert.equal((hook.received[1]?.body as { data: { container: string } }).data.container, 'web');
});

test('a container stopped while the daemon was down is still container_removed when it goes', async () => {
  const hook = await receiver();
  const store = openBandwidthdStore({ path: ':memory:', journal_mode: 'MEMORY', synchronous: 'OFF', cache_size_kb: 1000, auto_migrate: true });
  store.upsert({ id: 'a'.repeat(64), name: 'web', iface: 'veth101', rx_day: 0, tx_day: 0, last_rx: 0, last_tx: 0, warned: 0, exceeded: 0, first_seen_at: 0, last_seen_at: 0 });
  const r = rig(toHook(hook), { store, notifier: realNotifier });
  r.containers.splice(0, 1, { ...(r.containers[0] as ContainerInfo), running: false, pid: 0 });
  await r.daemon.start();
  r.containers.length = 0;
  await r.daemon.cycle();
  await r.notifier.idle();
  assert.deepEqual(hookEvents(hook), ['container_removed']);
  assert.deepEqual((hook.received[0]?.body as { data: Record<string, unknown> }).data, { message: 'web was removed', container: 'web', interface: 'veth101' });
});

test('quota_gb in notifications is rounded for display, without float noise', async () => {
  assert.equal(displayGb(quotaBytesOf({ 'bandwidth.daily_quota': '0.3' }, 500).bytes), 0.3);
  assert.equal(displayGb(quotaBytesOf({ 'bandwidth.daily_quota': '0.001' }, 500).bytes), 0.001);
  assert.equal(displayGb(quotaBytesOf({}, 500).bytes), 500);
  const hook = await receiver();
  const r = rig(toHook(hook), { notifier: realNotifier });
  r.containers.splice(0, 1, { ...(r.containers[0] as ContainerInfo), labels: { 'bandwidth.daily_quota': '0.3' } });
  await r.daemon.start();
  await r.notifier.idle();
  assert.equal((hook.received[0]?.body as { data: { quota_gb: number } }).data.quota_gb, 0.3);
});

test('a refused reload keeps the running config, and its error notification lists every problem with URLs redacted', async () => {
  const hook = await receiver();
  const r = rig({ ...toHook(hook), bandwidth: { default_rx_mbps: 10, default_tx_mbps: 10, default_ceil_mbps: 10 } }, { notifier: realNotifier });
  await r.daemon.start();
  const file = join(dir, 'reload.yaml');
  const reload = createReloader({ configPath: file, running: r.config, daemon: r.daemon, notifier: r.notifier, logger: silent });
  writeFileSync(
    file,
    stringify({
      database: { path: ':memory:', max_open_conns: 2 },
      bandwidth: { default_rx_mbps: 0 },
      notifications: { generic: [{ name: 'x', enabled: true, url: 'ftp://ops:s3cret@hooks.example.com/T0KEN' }] },
    }),
  );
  await reload();
  await r.notifier.idle();
  const error = hook.received.find((q) => (q.body as { event: string }).event === 'error');
  const message = (error?.body as { data: { message: string } } | undefined)?.data.message ?? '';
  assert.match(message, /config reload refused/);
  for (const path of ['/database/max_open_conns', '/bandwidth/default_rx_mbps', '/notifications/generic/0/url']) assert.ok(message.includes(path), `${path} in ${message}`);
  assert.ok(!/s3cret|T0KEN/.test(message), message);
  assert.equal(r.applied.at(-1)?.[0]?.down?.rateBps, 10e6, 'the running config stays');

  writeFileSync(file, stringify({ database: { path: ':memory:' }, timezone: 'UTC', docker: { watch_events: false }, bandwidth: { default_rx_mbps: 20, default_tx_mbps: 20, default_ceil_mbps: 20 } }));
  await reload();
  assert.equal(r.applied.at(-1)?.[0]?.down?.rateBps, 20e6);
});

test('a container in another container network namespace is not managed on its own: the shared veth is metered and shaped once', async () => {
  const r = rig({ quota: { disconnect_on_exceeded: true } });
  const web = r.containers[0] as ContainerInfo;
  // docker run --network container:web: its own pid, but web's eth0 and so web's host veth.
  r.containers.push({ id: 'c'.repeat(64), name: 'side', labels: { 'bandwidth.daily_quota': '0.0001' }, running: true, pid: 102, networkMode: `container:${web.id}` });
  r.veths.set(102, { iface: 'veth101', ifindex: 101 });
  r.counters.set('veth101', { rxBytes: 0, txBytes: 0 });
  await r.daemon.start();
  r.counters.set('veth101', { rxBytes: 0, txBytes: 200 * KB }); // over side's label, well under web's
  await r.daemon.cycle();
  const s = r.daemon.status().containers;
  assert.deepEqual(s.map((c) => [c.name, c.rx_day_bytes, c.mode]), [['web', 200 * KB, 'default']]);
  assert.deepEqual(r.sent, ['container_found']);
  assert.deepEqual(r.removed, [], 'no rule of the shared veth removed');
  assert.deepEqual(r.applied.flat().map((a) => a.iface), ['veth101']);
  r.containers.pop();
  await r.daemon.cycle();
  assert.deepEqual(r.sent, ['container_found'], 'the side container going is no event');
});

test('a daemon restart announces no container again; one removed while the daemon was down is container_removed, once', async () => {
  const store = openBandwidthdStore({ path: ':memory:', journal_mode: 'MEMORY', synchronous: 'OFF', cache_size_kb: 1000, auto_migrate: true });
  const db: ContainerInfo = { id: 'd'.repeat(64), name: 'db', labels: {}, running: true, pid: 105, networkMode: 'default' };
  const first = rig({}, { store });
  first.containers.push(db);
  first.counters.set('veth101', { rxBytes: 0, txBytes: 0 });
  await first.daemon.start();
  first.counters.set('veth101', { rxBytes: 0, txBytes: 300 * KB });
  await first.daemon.cycle();
  assert.deepEqual(first.sent, ['container_found', 'container_found']);
  await first.daemon.stop();

  // docker rm -f db while the daemon is stopped; web keeps running (and counting) on its veth.
  const second = rig({}, { store });
  second.counters.set('veth101', { rxBytes: 0, txBytes: 400 * KB });
  await second.daemon.start();
  assert.deepEqual(second.sent, ['container_removed']);
  assert.deepEqual(second.daemon.status().containers.map((c) => [c.name, c.rx_day_bytes]), [['web', 400 * KB]], 'usage kept and counted on');
  await second.daemon.stop();

  const third = rig({}, { store });
  await third.daemon.start();
  assert.deepEqual(third.sent, [], 'neither web found nor db removed a second time');
});

test('a container recreated under its name while the daemon was down keeps its usage: found for the new one, removed for the old one', async () => {
  const hook = await receiver();
  const store = openBandwidthdStore({ path: ':memory:', journal_mode: 'MEMORY', synchronous: 'OFF', cache_size_kb: 1000, auto_migrate: true });
  const first = rig({}, { store });
  first.counters.set('veth101', { rxBytes: 0, txBytes: 0 });
  await first.daemon.start();
  first.counters.set('veth101', { rxBytes: 0, txBytes: 300 * KB });
  await first.daemon.cycle();
  await first.daemon.stop();

  const second = rig(toHook(hook), { store, notifier: realNotifier });
  second.containers.splice(0, 1, { id: 'b'.repeat(64), name: 'web', labels: { 'bandwidth.daily_quota': '0.001' }, running: true, pid: 202, networkMode: 'default' });
  await second.daemon.start();
  await second.notifier.idle();
  assert.deepEqual(hookEvents(hook), ['container_found', 'container_removed']);
  assert.deepEqual(second.daemon.status().containers.map((c) => [c.id, c.rx_day_bytes]), [['b'.repeat(64), 300 * KB]]);
});

test('a running container given a new veth under the same pid (network disconnect and connect) is metered and shaped on the new one', async () => {
  const r = rig({});
  r.counters.set('veth101', { rxBytes: 0, txBytes: 0 });
  await r.daemon.start();
  r.counters.set('veth101', { rxBytes: 0, txBytes: 300 * KB });
  await r.daemon.cycle();
  // The old veth is deleted; the new one has counters of its own from the moment it was made.
  r.counters.delete('veth101');
  r.veths.set(101, { iface: 'veth901', ifindex: 901 });
  r.counters.set('veth901', { rxBytes: 7 * KB, txBytes: 50 * KB });
  await r.daemon.cycle();
  assert.deepEqual(r.daemon.status().containers.map((c) => [c.iface, c.rx_day_bytes]), [['veth901', 350 * KB]], 'the new veth counts from its creation: nothing lost');
  assert.deepEqual(r.applied.at(-1)?.map((a) => a.iface), ['veth901']);
  r.counters.set('veth901', { rxBytes: 7 * KB, txBytes: 150 * KB });
  await r.daemon.cycle();
  assert.equal(r.daemon.status().containers[0]?.rx_day_bytes, 450 * KB);
  assert.deepEqual(r.sent, ['container_found']);
});

test('a veth found at start only sets a baseline; one made later (a restart, a new container) counts from its creation', async () => {
  const r = rig({});
  r.counters.set('veth101', { rxBytes: 0, txBytes: 500 * KB }); // traffic from before this run
  await r.daemon.start();
  assert.equal(r.daemon.status().containers[0]?.rx_day_bytes, 0);
  // docker restart web: stopped, then running again with a new pid and veth that already carried traffic.
  const web = r.containers[0] as ContainerInfo;
  r.containers.splice(0, 1, { ...web, running: false, pid: 0 });
  await r.daemon.cycle();
  r.containers.splice(0, 1, { ...web, pid: 303 });
  r.containers.push({ id: 'c'.repeat(64), name: 'api', labels: {}, running: true, pid: 404, networkMode: 'default' });
  r.counters.set('veth303', { rxBytes: 0, txBytes: 200 * KB });
  r.counters.set('veth404', { rxBytes: 0, txBytes: 70 * KB });
  await r.daemon.cycle();
  assert.deepEqual(r.daemon.status().containers.map((c) => [c.name, c.rx_day_bytes]), [['web', 200 * KB], ['api', 70 * KB]]);
});

test('the health job counts a repair that tc failed as failed, not repaired', async () => {
  let fail = false;
  const r = rig(
    {},
    {
      tc: {
        verify: (shapes) => Promise.resolve(shapes.map((x) => ({ ...x, problem: 'no root qdisc' }))),
        apply: (s) => Promise.resolve({ applied: fail ? 0 : s.length, unchanged: 0, failed: fail ? s.map((x) => ({ iface: x.iface, error: 'Cannot find device' })) : [] }),
      },
    },
  );
  await r.daemon.start();
  assert.equal(await r.daemon.runJob('health'), 'repaired 1 of 1 interfaces');
  fail = true;
  assert.equal(await r.daemon.runJob('health'), 'repaired 0 of 1 interfaces, 1 failed');
  assert.deepEqual(r.sent, ['container_found', 'tc_failed']);
});

test('jobs that will not run show next_at null: scheduler.enabled false, and after a reload that turns them off', async () => {
  const next = (d: Daemon): Record<string, string | null | undefined> => Object.fromEntries(JOBS.map((j) => [j, d.status().jobs[j]?.next_at]));
  const off = rig({ scheduler: { enabled: false } });
  await off.daemon.start();
  assert.deepEqual(next(off.daemon), { reset: '2026-03-01T15:00:00.000Z', cleanup: null, history: null, health: null, webhook_retry: null });

  const on = rig({ history: { enabled: false } });
  await on.daemon.start();
  assert.equal(next(on.daemon)['history'], null);
  assert.equal(typeof next(on.daemon)['health'], 'string');
  const file = join(dir, 'scheduler-off.yaml');
  writeFileSync(file, stringify({ database: { path: ':memory:' }, timezone: 'Asia/Tokyo', docker: { watch_events: false }, scheduler: { enabled: false } }));
  await on.daemon.reconfigure(loadBandwidthdConfig(file).config);
  assert.deepEqual(next(on.daemon), { reset: '2026-03-01T15:00:00.000Z', cleanup: null, history: null, health: null, webhook_retry: null });
});

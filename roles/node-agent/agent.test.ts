/**
 * The agent's runtime decisions that need neither Docker nor the kernel: the suspend flow against
 * a panel over real HTTP (down, then answering), the 1 Mbit/s throttle after the answer, admin
 * unthrottle, and cleanup of stale servers. Discovery, counters and tc are in-process stand-ins
 * here; the real ones are exercised by test/docker and test/netns.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { validateNodeAgentConfig } from '../../src/contracts/validators.js';
import type { NodeAgentConfig } from '../../src/contracts/types.ts';
import type { InterfaceShape, TrafficControl } from '../../src/lib/tc.ts';
import { GIB } from '../../src/lib/units.ts';
import { startFakePanel } from '../../test/integration/node-agent/fake-panel.ts';
import { createAgent } from './agent.ts';
import { createPanelClient } from './panel-client.ts';
import { openAgentStore } from './store.ts';

const TOKEN = '12'.repeat(32);
const UUID = '8e4b1f0d-4a5c-4d6e-8f70-8192a3b4c5d6';

function config(dir: string): NodeAgentConfig {
  const c = { panel: { url: 'http://127.0.0.1:9', token_file: '/dev/null' }, database: { path: join(dir, 'agent.db') } };
  assert.ok(validateNodeAgentConfig(c));
  return c as unknown as NodeAgentConfig;
}

/** Records what enforcement asked for; the kernel side is test/netns's business. */
function recordingTc(): TrafficControl & { last: Map<string, InterfaceShape>; removed: string[] } {
  const last = new Map<string, InterfaceShape>();
  const removed: string[] = [];
  return {
    last,
    removed,
    apply: async (shapes) => {
      for (const s of shapes) last.set(s.iface, s);
      return { applied: shapes.length, unchanged: 0, failed: [] };
    },
    remove: async (ifaces) => {
      for (const i of ifaces) {
        last.delete(i.iface);
        removed.push(i.iface);
      }
      return { applied: ifaces.length, unchanged: 0, failed: [] };
    },
    prepare: async (refs) => ({ applied: refs.length, unchanged: 0, failed: [] }),
    verify: async () => [],
    forget: () => undefined,
    sweepOrphanIfbs: async () => 0,
    rootDrops: async () => new Map(),
  };
}

type AgentDeps = Parameters<typeof createAgent>[0];

/** An agent over `store` in `dir`: no tc, a silent log, no containers and a panel nobody answers at, unless given. */
function unitAgent(dir: string, store: AgentDeps['store'], over: Partial<AgentDeps> = {}): ReturnType<typeof createAgent> {
  return createAgent({
    config: config(dir),
    store,
    tc: null,
    logger: pino({ level: 'silent' }),
    tokenFile: join(dir, 'token'),
    panel: createPanelClient({ url: 'http://127.0.0.1:9', token: TOKEN }),
    containers: { scan: async () => [], watch: () => () => undefined, counters: async () => new Map() },
    ...over,
  });
}

const panelPromise = startFakePanel(TOKEN);
after(async () => (await panelPromise).close());

test('suspend: retried while the panel is down, then 1 Mbit/s both ways; unthrottle restores the caps', async () => {
  const panel = await panelPromise;
  panel.servers.add(UUID);
  const dir = mkdtempSync(join(tmpdir(), 'hk-agent-unit-'));
  const store = openAgentStore({ path: join(dir, 'agent.db') });
  const tc = recordingTc();
  let intoServer = 0;
  const logged: { level: number; msg: string; failed_calls?: number }[] = [];
  const agent = unitAgent(dir, store, {
    tc,
    logger: pino({ level: 'info' }, { write: (line: string) => void logged.push(JSON.parse(line) as (typeof logged)[number]) }),
    panel: createPanelClient({ url: panel.url, token: TOKEN }),
    containers: {
      scan: async () => [{ uuid: UUID, containerId: 'c1', name: UUID, iface: 'veth-a', ifindex: 41 }],
      watch: () => () => undefined,
      counters: async () => new Map([['veth-a', { rxBytes: 0, rxPackets: 0, txBytes: intoServer, txPackets: 0 }]]),
    },
  });
  await agent.rescan();
  await agent.runCycle();
  await agent.applyLimits({
    config_version: 1,
    servers: [{ uuid: UUID, enabled: true, rx_speed_mbps: 50, tx_speed_mbps: 40, rx_quota_day_gb: 1, exceed_action: 'suspend' }],
  });
  assert.equal(tc.last.get('veth-a')?.down?.rateBps, 50e6);

  panel.failWith = 503;
  intoServer = GIB + 1;
  for (let i = 0; i < 3; i++) {
    await agent.runCycle();
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(tc.last.get('veth-a')?.down?.rateBps, 50e6, 'no throttle before the panel answers');
  assert.ok(!panel.suspended.has(UUID));
  assert.equal(logged.filter((l) => l.msg.startsWith('suspend call failed')).length, 1, 'a panel outage is said once, not every cycle');

  panel.failWith = null;
  await agent.runCycle(); // the suspend call is retried
  await panel.waitFor((p) => p.suspended.has(UUID), 5000);
  await agent.runCycle();
  assert.equal(logged.find((l) => l.msg.startsWith('panel answered the suspend call'))?.failed_calls, 3);
  const shape = tc.last.get('veth-a');
  assert.deepEqual([shape?.down?.rateBps, shape?.up?.rateBps], [1e6, 1e6]);
  const stats = agent.stats()[0];
  assert.equal(stats?.throttled, true);
  assert.deepEqual(stats?.exceeded, ['rx_day']);
  const suspendCall = panel.calls.find((c) => c.path === '/suspend')?.body as { server_uuid: string; reason: string };
  assert.equal(suspendCall.server_uuid, UUID);
  assert.match(suspendCall.reason, /rx_day/);

  assert.equal(await agent.unthrottle(UUID), true);
  assert.deepEqual([tc.last.get('veth-a')?.down?.rateBps, tc.last.get('veth-a')?.up?.rateBps], [50e6, 40e6]);
  assert.deepEqual(agent.stats()[0]?.exceeded, []);
  assert.equal(await agent.unthrottle(UUID), false, 'nothing left to clear');

  await agent.flushOutbox();
  assert.deepEqual(
    panel.events.filter((e) => e.server_uuid === UUID).map((e) => e.type),
    ['speed_applied', 'quota_exceeded', 'throttled'],
  );
  await agent.stop();
  store.close();
});

test('the store survives a reopen: counters, limits, flags and overrides', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'hk-agent-unit-'));
  const make = (s: ReturnType<typeof openAgentStore>, bytes: () => number) =>
    unitAgent(dir, s, {
      panel: { register: () => new Promise(() => undefined), heartbeat: () => new Promise(() => undefined), limits: () => new Promise(() => undefined), events: async (e) => e.length, suspend: async () => true },
      containers: {
        scan: async () => [{ uuid: UUID, containerId: 'c1', name: UUID, iface: 'veth-b', ifindex: 7 }],
        watch: () => () => undefined,
        counters: async () => new Map([['veth-b', { rxBytes: 0, rxPackets: 0, txBytes: bytes(), txPackets: 0 }]]),
      },
    });
  let counter = 1000;
  let store = openAgentStore({ path: join(dir, 'agent.db') });
  let agent = make(store, () => counter);
  await agent.rescan();
  await agent.runCycle();
  await agent.applyLimits({ config_version: 5, timezone: 'Asia/Tokyo', servers: [{ uuid: UUID, rx_quota_day_gb: 1, exceed_action: 'throttle' }] });
  counter += GIB;
  await agent.runCycle();
  assert.equal(await agent.unthrottle(UUID), true);
  await agent.stop();
  store.close();

  store = openAgentStore({ path: join(dir, 'agent.db') });
  agent = make(store, () => counter + 500);
  await agent.rescan();
  await agent.runCycle();
  const s = agent.stats()[0];
  assert.equal(s?.rx_bytes_total, GIB + 500, 'continues from the stored raw counter');
  assert.deepEqual(s?.exceeded, [], 'the unthrottle override survived');
  assert.equal(agent.status().config_version, 5);
  assert.equal(agent.status().timezone, 'Asia/Tokyo');
  await agent.stop();
  store.close();
});

test('rules left on a veth by the last run go at the first enforce that wants none: limits pulled before the first scan, traffic control turned off', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'hk-agent-unit-'));
  const running = [
    { uuid: UUID, containerId: 'c1', name: UUID, iface: 'veth-c', ifindex: 9 },
    { uuid: '9f5c2e1a-5b6d-4e7f-9081-92a3b4c5d6e7', containerId: 'c2', name: 'other', iface: 'veth-d', ifindex: 10 },
  ];
  const make = (s: ReturnType<typeof openAgentStore>, tc: TrafficControl, shaping = true) =>
    unitAgent(dir, s, {
      tc,
      config: { ...config(dir), traffic_control: { enabled: shaping } },
      containers: { scan: async () => running, watch: () => () => undefined, counters: async (ifaces) => new Map(ifaces.map((i) => [i, { rxBytes: 0, rxPackets: 0, txBytes: 0, txPackets: 0 }])) },
    });
  let store = openAgentStore({ path: join(dir, 'agent.db') });
  const before = recordingTc();
  let agent = make(store, before);
  await agent.rescan();
  await agent.applyLimits({ config_version: 1, servers: [{ uuid: UUID, rx_speed_mbps: 10 }] });
  assert.equal(before.last.get('veth-c')?.down?.rateBps, 10e6);
  await agent.stop();
  store.close();

  // A new process: the kernel still holds the cap, the tc library's cache is empty.
  store = openAgentStore({ path: join(dir, 'agent.db') });
  const after = recordingTc();
  agent = make(store, after);
  await agent.applyLimits({ config_version: 2, servers: [] }); // pulled while the first scan is still out
  await agent.rescan();
  await agent.runCycle();
  assert.deepEqual(after.removed, ['veth-c'], 'the cap goes; a veth that was never shaped is left alone');
  await agent.stop();
  store.close();

  // Shaped again, then a restart with traffic_control.enabled false: nothing shaped, the cap goes.
  store = openAgentStore({ path: join(dir, 'agent.db') });
  agent = make(store, recordingTc());
  await agent.rescan();
  await agent.applyLimits({ config_version: 3, servers: [{ uuid: UUID, rx_speed_mbps: 10 }] });
  await agent.stop();
  store.close();
  store = openAgentStore({ path: join(dir, 'agent.db') });
  const off = recordingTc();
  agent = make(store, off, false);
  await agent.rescan();
  await agent.runCycle();
  assert.deepEqual([off.removed, [...off.last.keys()]], [['veth-c'], []]);
  await agent.stop();
  store.close();
});

test('history: hour and day buckets agree in a zone offset by half an hour', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'hk-agent-unit-'));
  const store = openAgentStore({ path: join(dir, 'agent.db') });
  const HOUR = 3_600_000;
  // 2026-11-27 in Asia/Kolkata (UTC+5:30) starts at 2026-11-26T18:30Z.
  const dayStart = Date.parse('2026-11-26T18:30:00Z');
  const t = dayStart + 5 * HOUR;
  const hours = [dayStart - 30 * 60_000, dayStart + 30 * 60_000, dayStart + 150 * 60_000]; // 18:00Z straddles the boundary
  store.saveCycle([], hours.map((hour, i) => ({ uuid: UUID, hour, rx: 1000 * (i + 1), tx: 0 })), []);
  const agent = unitAgent(dir, store, { config: { ...config(dir), timezone: 'Asia/Kolkata' }, now: () => t });
  const byHour = agent.history(UUID, 'day', 'hour');
  const byDay = agent.history(UUID, 'day', 'day');
  const sum = (points: { rx_bytes: number }[]): number => points.reduce((a, p) => a + p.rx_bytes, 0);
  assert.equal(byHour[0]?.t, '2026-11-26T19:00:00.000Z', 'the first whole hour of the day');
  assert.deepEqual(byDay, [{ t: '2026-11-26T18:30:00.000Z', rx_bytes: 5000, tx_bytes: 0 }]);
  assert.equal(sum(byHour), sum(byDay));
  store.close();
});

test('a hung container runtime does not hold back registration; the first heartbeat waits for the first scan', async () => {
  const panel = await panelPromise;
  const dir = mkdtempSync(join(tmpdir(), 'hk-agent-unit-'));
  const store = openAgentStore({ path: join(dir, 'agent.db') });
  let releaseScan: (() => void) | undefined;
  const scanned = new Promise<void>((resolve) => (releaseScan = resolve));
  const agent = unitAgent(dir, store, {
    panel: createPanelClient({ url: panel.url, token: TOKEN }),
    containers: { scan: () => scanned.then(() => []), watch: () => () => undefined, counters: async () => new Map() },
  });
  const since = panel.calls.length;
  const started = agent.start();
  await panel.waitFor((p) => p.calls.slice(since).some((c) => c.path === '/register'), 5000);
  assert.ok(!panel.calls.slice(since).some((c) => c.path === '/heartbeat'), 'no heartbeat before the first scan');
  releaseScan?.();
  await started;
  await panel.waitFor((p) => p.calls.slice(since).some((c) => c.path === '/heartbeat'), 5000);
  await agent.stop();
  store.close();
});

test('events the panel took but the store could not remove: a database error in status, not a panel one, and sent again', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'hk-agent-unit-'));
  const store = openAgentStore({ path: join(dir, 'agent.db') });
  store.saveCycle([], [], [{ server_uuid: UUID, type: 'throttled', period: null, direction: null, message: 'm', occurred_at: '2026-11-27T00:00:00.000Z' }]);
  const sent: number[] = [];
  let broken = true;
  const failing = Object.assign(Object.create(store) as typeof store, {
    outboxDelete(ids: readonly number[]) {
      if (broken) throw Object.assign(new Error('disk I/O error'), { code: 'ERR_SQLITE_ERROR' });
      store.outboxDelete(ids);
    },
  });
  const agent = unitAgent(dir, failing, {
    panel: { register: () => new Promise(() => undefined), heartbeat: () => new Promise(() => undefined), limits: () => new Promise(() => undefined), events: async (e) => sent.push(e.length), suspend: async () => true },
  });
  await agent.flushOutbox();
  const s = agent.status();
  assert.equal(s.panel.last_error, null, 'the panel did nothing wrong');
  assert.equal(s.database.last_error, 'disk I/O error');
  assert.equal(s.database.path, join(dir, 'agent.db'));
  assert.equal(s.outbox, 1, 'still queued');
  broken = false;
  await agent.flushOutbox();
  assert.deepEqual(sent, [1, 1], 'sent again, then removed');
  assert.equal(agent.status().outbox, 0);
  await agent.stop();
  store.close();
});

test('a stopped container loses its IFB at the first scan 5 s later, not at the hourly sweep', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'hk-agent-unit-'));
  const store = openAgentStore({ path: join(dir, 'agent.db') });
  let sweeps = 0;
  const tc = { ...recordingTc(), sweepOrphanIfbs: async () => ++sweeps };
  let running = [{ uuid: UUID, containerId: 'c1', name: UUID, iface: 'veth-a', ifindex: 41 }];
  let clock = 1_000_000;
  const agent = unitAgent(dir, store, { tc, now: () => clock, containers: { scan: async () => running, watch: () => () => undefined, counters: async () => new Map() } });
  await agent.rescan();
  running = [];
  await agent.rescan(); // the runtime reports it stopped; its veth may still be there
  clock += 4_000;
  await agent.rescan();
  assert.equal(sweeps, 0, 'not before the veth has had time to go');
  clock += 1_000;
  await agent.rescan();
  assert.equal(sweeps, 1);
  clock += 10_000;
  await agent.rescan();
  assert.equal(sweeps, 1, 'once per container that went away');
  await agent.stop();
  store.close();
});

test('one event the panel refuses is dropped alone; the rest of its batch is delivered', async () => {
  const panel = await panelPromise;
  const dir = mkdtempSync(join(tmpdir(), 'hk-agent-unit-'));
  const store = openAgentStore({ path: join(dir, 'agent.db') });
  const event = (message: string): Parameters<typeof store.saveCycle>[2][number] => ({ server_uuid: UUID, type: 'throttled', period: null, direction: null, message, occurred_at: '2026-11-27T00:00:00.000Z' });
  store.saveCycle([], [], [event('first'), event('poison'), event('third')]);
  panel.refuseEvent = (e) => e.message === 'poison';
  const agent = unitAgent(dir, store, { panel: createPanelClient({ url: panel.url, token: TOKEN }) });
  try {
    await agent.flushOutbox();
    assert.deepEqual(
      panel.events.filter((e) => ['first', 'poison', 'third'].includes(e.message)).map((e) => e.message),
      ['first', 'third'],
    );
    assert.equal(agent.status().outbox, 0, 'the refused one is not retried for ever');
  } finally {
    panel.refuseEvent = null;
    await agent.stop();
    store.close();
  }
});

test('SMART: a flood on a server with SMART on is detected, capped on the veth, ended after the hold-down, served to the panel by id, and the baseline survives a restart', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'hk-agent-unit-'));
  const clock = { t: Date.parse('2026-12-07T10:00:00Z') };
  const traffic = { packets: 0, bytes: 0 };
  const smartConfig = (): NodeAgentConfig => ({
    ...config(dir),
    smart: { ...config(dir).smart, floor_pps: 100, floor_mbps: 1, min_cap_mbps: 2, hold_down: '3s', baseline_time_constant: '1m' },
  });
  const make = (s: ReturnType<typeof openAgentStore>, tc: TrafficControl) =>
    unitAgent(dir, s, {
      tc,
      now: () => clock.t,
      config: smartConfig(),
      containers: {
        scan: async () => [{ uuid: UUID, containerId: 'c1', name: UUID, iface: 'veth-s', ifindex: 12 }],
        watch: () => () => undefined,
        counters: async () => new Map([['veth-s', { rxBytes: 0, rxPackets: 0, txBytes: traffic.bytes, txPackets: traffic.packets }]]),
      },
    });
  const second = async (agent: ReturnType<typeof createAgent>, pps: number): Promise<void> => {
    clock.t += 1000;
    traffic.packets += pps;
    traffic.bytes += pps * 200;
    await agent.runCycle();
  };
  let store = openAgentStore({ path: join(dir, 'agent.db') });
  const tc = recordingTc();
  let agent = make(store, tc);
  await agent.rescan();
  await agent.applyLimits({ config_version: 1, servers: [{ uuid: UUID, smart: true }] });
  for (let i = 0; i < 5; i++) await second(agent, 20);
  assert.equal(tc.last.size, 0, 'no rules while calm');
  await second(agent, 1000); // 10x the 100 packets/s floor: level 2
  assert.equal(tc.last.get('veth-s')?.down?.rateBps, 2e6, 'capped at the minimum cap');
  assert.equal(agent.status().smart.attacked, 1);
  await second(agent, 5000); // level 3
  for (let i = 0; i < 5; i++) await second(agent, 20);
  assert.deepEqual(tc.removed, ['veth-s'], 'the cap lifted after the hold-down');
  const page = agent.smartEvents(0, 200);
  assert.deepEqual(page.events.map((e) => `${e.type}:${e.level}`), ['attack_detected:2', 'mitigation_started:2', 'attack_escalated:3', 'mitigation_ended:3', 'attack_ended:3']);
  assert.deepEqual(page.events.map((e) => e.id), [1, 2, 3, 4, 5]);
  assert.equal(page.last_id, 5);
  assert.ok(page.events.every((e) => e.incident === 1 && e.server_uuid === UUID));
  assert.deepEqual(agent.smartEvents(3, 1).events.map((e) => e.id), [4]);
  await agent.stop();
  store.close();

  // A new process on the same store: the learned baseline and the stream are kept, incident numbers go on.
  store = openAgentStore({ path: join(dir, 'agent.db') });
  const learned = store.loadSmart().states.get(UUID);
  assert.ok(learned && learned.learned && learned.basePps > 10, `baseline kept: ${learned?.basePps}`);
  agent = make(store, recordingTc());
  await agent.rescan();
  await agent.applyLimits({ config_version: 2, servers: [{ uuid: UUID, smart: true }] });
  await second(agent, 20);
  await second(agent, 900);
  const next = agent.smartEvents(5, 200);
  assert.equal(next.stream, page.stream);
  assert.deepEqual(next.events.map((e) => `${e.id}:${e.type}:${e.incident}`), ['6:attack_detected:2', '7:mitigation_started:2']);
  // SMART turned off by the panel mid-attack: the attack ends and the cap goes.
  await agent.applyLimits({ config_version: 3, servers: [{ uuid: UUID, smart: false }] });
  assert.deepEqual(agent.smartEvents(7, 200).events.map((e) => e.type), ['mitigation_ended', 'attack_ended']);
  await agent.stop();
  store.close();
});

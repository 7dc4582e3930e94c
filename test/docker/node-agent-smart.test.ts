/**
 * SMART attack detection in the built node agent, on a real Docker engine with real tc: a real
 * UDP flood from the host against a server container is detected at L1 and escalates to L3,
 * the inbound cap is measured on the host veth while the flood goes on, and after the quiet
 * hold-down the cap goes and the attack's end is an event, all served by GET /smart/events.
 * Traffic that rises ten times over the test's span on another server raises nothing.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { hostVethOf } from '../../src/lib/veth.ts';
import type { SmartEvent, SmartEventsData } from '../../src/contracts/types.ts';
import { freePort, startHostkit, type Daemon } from '../integration/hostkit-process.ts';
import { startFakePanel, type FakePanel } from '../integration/node-agent/fake-panel.ts';
import { LIMIT_DEFAULTS } from '../../roles/node-agent/limits.ts';
import { attackerNamespace, udpFlood } from './traffic.ts';
import { startDocker, type DockerHarness, type TestContainer, type TestNetwork } from './harness.ts';

const TOKEN = 'ab'.repeat(32);
const ATTACKED = '7d3a0e9c-3f4b-4c5d-8e6f-708192a3b4c5';
const RISING = '8e4b1f0d-4a5c-4d6e-8f70-8192a3b4c5d6';
const dir = mkdtempSync(join(tmpdir(), 'hk-agent-smart-'));
/** The attacker: a network namespace on the containers' bridge, as traffic from outside the node. */
const ATTACKER_NS = 'hk-smart-atk';
const ATTACKER_VETH = 'hksatk0';
let docker: DockerHarness | undefined;
let removeAttacker: (() => void) | undefined;
let net: TestNetwork;
let attacked: TestContainer;
let rising: TestContainer;
let panel: FakePanel;
let agent: Daemon;
let apiBase: string;

async function smartEvents(after = 0): Promise<SmartEvent[]> {
  const res = await fetch(`${apiBase}/api/v1/smart/events?after=${after}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  assert.equal(res.status, 200);
  return ((await res.json()) as { data: SmartEventsData }).data.events;
}

async function until<T>(what: string, fn: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}\n${agent?.output().slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

const txBytes = (iface: string): number => Number(readFileSync(`/sys/class/net/${iface}/statistics/tx_bytes`, 'utf8'));
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

before(async () => {
  docker = await startDocker({ name: 'agentsmart' });
  net = await docker.createNetwork('hk-smart', '10.251.31.0/24');
  removeAttacker = attackerNamespace(ATTACKER_NS, ATTACKER_VETH, net.bridge, '10.251.31.250/24');
  attacked = await docker.runContainer({ name: ATTACKED, network: 'hk-smart' });
  rising = await docker.runContainer({ name: RISING, network: 'hk-smart' });
  panel = await startFakePanel(TOKEN);
  panel.heartbeatSeconds = 1;
  panel.servers.add(ATTACKED).add(RISING);
  // Both servers have SMART on, and no speed cap of their own: any rule on a veth is the detector's.
  panel.limits = { config_version: 1, timezone: 'UTC', servers: [ATTACKED, RISING].map((uuid) => ({ ...LIMIT_DEFAULTS, uuid, smart: true })) };
  const port = await freePort();
  apiBase = `http://127.0.0.1:${port}`;
  const tokenFile = join(dir, 'token');
  writeFileSync(tokenFile, TOKEN, { mode: 0o600 });
  const config = join(dir, 'config.yaml');
  writeFileSync(
    config,
    stringify({
      general: { socket_path: join(dir, 'agent.sock') },
      logging: { file: join(dir, 'agent.log'), level: 'debug' },
      database: { path: join(dir, 'agent.db') },
      docker: { discovery_interval: '1s' },
      bandwidth: { poll_interval: '1s' },
      api: { listen: '127.0.0.1', port },
      panel: { url: panel.url, token_file: tokenFile },
      // Scaled to a test: L1 at 2,000 packets/s, L2 at 4,000, L3 at 8,000; bits never decide
      // (a 1,000 Mbit/s floor); a 2 Mbit/s cap; 4 s of calm ends an attack; a baseline that
      // follows a new normal within seconds.
      smart: { floor_pps: 500, floor_mbps: 1000, min_cap_mbps: 2, hold_down: '4s', baseline_time_constant: '5s' },
    }),
  );
  agent = startHostkit(['node-agent', 'serve', '--config', config], { env: { DOCKER_HOST: docker.endpoint } });
  await agent.waitFor(/node API listening/);
  await until('SMART watching both servers', async () => {
    const out = agent.output();
    return out.includes('limits pulled from the panel') && out.includes(ATTACKED) && out.includes(RISING) ? true : undefined;
  });
  await sleep(3000); // a few calm cycles: baselines at their first samples
});

after(async () => {
  removeAttacker?.();
  await agent?.stop();
  await panel?.close();
  await docker?.stop();
});

test('a real flood: L1, escalation to L3, the cap measured on the veth, then the hold-down and the end', async () => {
  const veth = (await hostVethOf(attacked.pid))?.iface;
  assert.ok(veth);
  // 3,000 packets/s (L1) for 4 s, then 20,000 (L3) until stopped.
  const stop = udpFlood(attacked.ip, [{ seconds: 4, from: 3000, to: 3000 }, { seconds: 600, from: 20_000, to: 20_000 }], { netns: ATTACKER_NS });
  let sent = 0;
  try {
    const detected = await until('attack_detected', async () => (await smartEvents()).find((e) => e.server_uuid === ATTACKED && e.type === 'attack_detected'), 10_000);
    assert.ok(detected.level < 3, `detected below L3 first (level ${detected.level})`);
    assert.equal(detected.metrics.baseline_pps, 500);
    assert.ok(detected.metrics.pps >= 2000 && detected.metrics.ratio >= 4, JSON.stringify(detected.metrics));
    assert.deepEqual(detected.mitigation, { action: 'rate_cap', cap_mbps: 2 });
    const l3 = await until('escalation to L3', async () => (await smartEvents()).find((e) => e.type === 'attack_escalated' && e.level === 3), 15_000);
    assert.equal(l3.incident, detected.incident);
    assert.ok(l3.metrics.pps >= 8000, `L3 at ${l3.metrics.pps} packets/s`);
    // The cap on the interface: an HTB class at 2 Mbit/s, and what reaches the container near it
    // while 160 Mbit/s are sent at it.
    assert.match(execFileSync('tc', ['class', 'show', 'dev', veth], { encoding: 'utf8' }), /rate 2Mbit/);
    const b0 = txBytes(veth);
    await sleep(3000);
    const mbps = ((txBytes(veth) - b0) * 8) / 3 / 1e6;
    assert.ok(mbps < 2.6, `delivered ${mbps.toFixed(2)} Mbit/s under a 2 Mbit/s cap`);
    // Still one attack while the cap holds it down: its drops count as arriving.
    assert.equal((await smartEvents()).filter((e) => e.type === 'attack_ended').length, 0);
  } finally {
    sent = await stop();
  }
  assert.ok(sent > 50_000, `the flood sent ${sent} datagrams`);
  const calmFrom = Date.now();
  const ended = await until('attack_ended', async () => (await smartEvents()).find((e) => e.type === 'attack_ended'), 15_000);
  assert.ok(Date.now() - calmFrom >= 3500, 'not before the 4 s hold-down');
  assert.ok(ended.metrics.peak_pps >= 8000);
  assert.equal(ended.ended_at, ended.occurred_at);
  const all = (await smartEvents()).filter((e) => e.server_uuid === ATTACKED);
  assert.deepEqual(all.map((e) => e.type).filter((t) => t !== 'attack_escalated'), ['attack_detected', 'mitigation_started', 'mitigation_ended', 'attack_ended']);
  assert.ok(all.every((e) => e.incident === detected(all)));
  assert.doesNotMatch(execFileSync('tc', ['qdisc', 'show', 'dev', veth], { encoding: 'utf8' }), /htb/, 'the cap is gone');
});

function detected(events: SmartEvent[]): number {
  return events.find((e) => e.type === 'attack_detected')?.incident ?? -1;
}

test('traffic that rises ten times over the span (300 to 3,000 packets/s in 20 s) raises no alert', async () => {
  const before = (await smartEvents()).length;
  const stop = udpFlood(rising.ip, [{ seconds: 20, from: 300, to: 3000 }, { seconds: 600, from: 3000, to: 3000 }], { netns: ATTACKER_NS });
  await sleep(22_000);
  const sent = await stop();
  assert.ok(sent > 20_000, `sent ${sent}`);
  const after = (await smartEvents()).slice(before);
  assert.deepEqual(after.filter((e) => e.server_uuid === RISING), [], 'no event for the server whose traffic grew slowly');
});

/**
 * The node agent (the built executable) on a real Docker engine with real tc: discovery by name
 * and by label, metering on the host veth, a 10 Mbit/s cap in both directions measured with real
 * traffic, rules back after `docker restart`, a quota crossed by pushing more than 1 GiB that
 * throttles the server, and the restore when the quota is raised above the use (a quota time
 * zone switch is no rollover, so period rollovers are accounting.test.ts's, on a given clock).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { ifbName } from '../../src/lib/tc.ts';
import { hostVethOf } from '../../src/lib/veth.ts';
import type { ServerStatsRecord } from '../../src/contracts/types.ts';
import { freePort, startHostkit, type Daemon } from '../integration/hostkit-process.ts';
import { startFakePanel, type FakePanel } from '../integration/node-agent/fake-panel.ts';
import { LIMIT_DEFAULTS } from '../../roles/node-agent/limits.ts';
import { measureDown, measureUp, push } from './traffic.ts';
import { sinkCommand, startDocker, type DockerHarness, type TestContainer, type TestNetwork } from './harness.ts';

const TOKEN = 'cd'.repeat(32);
const BY_NAME = '5b1e8c7a-1d2f-4a3b-9c4d-5e6f7a8b9c01';
const BY_LABEL = '6c2f9d8b-2e3a-4b4c-8d5e-6f7a8b9c0d12';
const SINK = 9000;
const GIB = 1024 ** 3;
const dir = mkdtempSync(join(tmpdir(), 'hk-agent-docker-'));
let docker: DockerHarness | undefined;
let net: TestNetwork;
let byName: TestContainer;
let byLabel: TestContainer;
let panel: FakePanel;
let agent: Daemon;
let apiBase: string;

function limitsEntry(uuid: string, over: Record<string, unknown> = {}): Record<string, unknown> {
  // Every field sent, as the panel does.
  return { ...LIMIT_DEFAULTS, uuid, throttle_rx_mbps: 10, throttle_tx_mbps: 10, ...over };
}

let version = 1;
/** Pushes limits as the panel does: the panel serves the same set, so heartbeats find no difference. */
async function putLimits(servers: Record<string, unknown>[], timezone = 'UTC'): Promise<{ applied: number; failed: number }> {
  const payload = { config_version: version++, timezone, servers };
  panel.limits = payload as unknown as FakePanel['limits'];
  const res = await fetch(`${apiBase}/api/v1/limits`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(payload),
  });
  const body = (await res.json()) as { data: { applied: number; failed: number } };
  assert.equal(res.status, 200);
  return body.data;
}

async function stats(): Promise<ServerStatsRecord[]> {
  const res = await fetch(`${apiBase}/api/v1/stats`, { headers: { authorization: `Bearer ${TOKEN}` } });
  return ((await res.json()) as { data: { servers: ServerStatsRecord[] } }).data.servers;
}

async function until<T>(what: string, fn: () => Promise<T | undefined> | T | undefined, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}\n${agent?.output().slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}





function qdiscs(iface: string): string {
  return execFileSync('tc', ['qdisc', 'show', 'dev', iface], { encoding: 'utf8' });
}

function classes(iface: string): string {
  return execFileSync('tc', ['class', 'show', 'dev', iface], { encoding: 'utf8' });
}

const within10 = (mbps: number): boolean => mbps > 9 && mbps < 11;

before(async () => {
  docker = await startDocker({ name: 'nodeagent' });
  net = await docker.createNetwork('hk-agent', '10.251.30.0/24');
  byName = await docker.runContainer({ name: BY_NAME, network: 'hk-agent', cmd: sinkCommand(SINK) });
  byLabel = await docker.runContainer({ name: 'game-by-label', labels: { 'hostkit.server_uuid': BY_LABEL }, network: 'hk-agent', cmd: sinkCommand(SINK) });
  await docker.runContainer({ name: 'unrelated-web', network: 'hk-agent', cmd: sinkCommand(SINK) });

  panel = await startFakePanel(TOKEN);
  panel.heartbeatSeconds = 1;
  panel.servers.add(BY_NAME).add(BY_LABEL);
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
      scheduler: { check_interval: '1s' },
      api: { listen: '127.0.0.1', port },
      panel: { url: panel.url, token_file: tokenFile },
    }),
  );
  agent = startHostkit(['node-agent', 'serve', '--config', config], { env: { DOCKER_HOST: docker.endpoint } });
  await agent.waitFor(/node API listening/);
});

after(async () => {
  await agent?.stop();
  await panel?.close();
  await docker?.stop();
});

test('discovery: a container named by UUID and one labelled with a UUID are managed, others are not', async () => {
  const servers = await until('both servers online', async () => {
    const s = await stats();
    return s.filter((x) => x.online).length === 2 ? s : undefined;
  });
  assert.deepEqual(servers.map((s) => s.uuid).sort(), [BY_NAME, BY_LABEL].sort());
  assert.equal(servers.find((s) => s.uuid === BY_NAME)?.container_id, byName.id);
  const health = (await (await fetch(`${apiBase}/api/v1/health`)).json()) as { data: { containers: number } };
  assert.equal(health.data.containers, 2);
});

test('metering: bytes sent to the server count as its RX on the host veth', async () => {
  const before = (await stats()).find((s) => s.uuid === BY_NAME)?.rx_bytes_total as number;
  await push(byName, SINK, 50 * 1024 * 1024);
  const after = await until('RX counted', async () => {
    const s = (await stats()).find((x) => x.uuid === BY_NAME);
    return s && s.rx_bytes_total - before >= 50 * 1024 * 1024 ? s : undefined;
  });
  assert.ok(after.rx_bytes_total - before < 52 * 1024 * 1024, 'no double counting');
  assert.ok(after.rx_used_day_bytes >= 50 * 1024 * 1024);
});

test('a 10 Mbit/s cap holds within 10% in both directions', async () => {
  const r = await putLimits([limitsEntry(BY_NAME, { rx_speed_mbps: 10, tx_speed_mbps: 10 }), limitsEntry(BY_LABEL)]);
  assert.deepEqual(r, { applied: 2, failed: 0 });
  const down = await measureDown(byName, SINK);
  assert.ok(within10(down), `down ${down.toFixed(2)} Mbit/s`);
  const up = await measureUp(docker!, net, byName);
  assert.ok(within10(up), `up ${up.toFixed(2)} Mbit/s`);
  const free = await measureDown(byLabel, SINK, 2);
  assert.ok(free > 50, `the uncapped server is not shaped (${free.toFixed(0)} Mbit/s)`);
  await panel.waitFor((p) => p.events.some((e) => e.server_uuid === BY_NAME && e.type === 'speed_applied'));
});

test('rules come back within a cycle after docker restart (new veth); the old veth IFB goes', async () => {
  const old = await hostVethOf(byName.pid);
  const oldVeth = old?.iface;
  const oldIfb = `/sys/class/net/${ifbName(old?.ifindex as number)}`;
  assert.ok(existsSync(oldIfb), 'the shaped veth has its IFB');
  await docker!.cli(['restart', BY_NAME]);
  const pid = Number((await docker!.cli(['inspect', '-f', '{{.State.Pid}}', BY_NAME])).trim());
  byName = { ...byName, pid };
  const veth = (await hostVethOf(pid))?.iface;
  assert.ok(veth && veth !== oldVeth, 'restart gave a new veth');
  await until('htb on the new veth', () => (qdiscs(veth).includes('htb') ? true : undefined), 10_000);
  const down = await measureDown(byName, SINK);
  assert.ok(within10(down), `down after restart ${down.toFixed(2)} Mbit/s`);
  // Swept by the first discovery scan 5 s after the container stopped, not by the hourly sweep.
  await until('the IFB of the old veth removed', () => (existsSync(oldIfb) ? undefined : true), 15_000);
});

test('crossing a 1 GiB daily quota throttles; raising the quota above the use restores full speed', async () => {
  await putLimits([limitsEntry(BY_LABEL, { rx_quota_day_gb: 1, throttle_rx_mbps: 10, throttle_tx_mbps: 10 })]);
  const start = (await stats()).find((s) => s.uuid === BY_LABEL)?.rx_used_day_bytes as number;
  await push(byLabel, SINK, Math.max(0, GIB - start) + 64 * 1024 * 1024);
  const throttled = await until('throttled', async () => {
    const s = (await stats()).find((x) => x.uuid === BY_LABEL);
    return s?.throttled ? s : undefined;
  });
  assert.deepEqual(throttled.exceeded, ['rx_day']);
  await panel.waitFor((p) => ['quota_exceeded', 'throttled'].every((type) => p.events.some((e) => e.server_uuid === BY_LABEL && e.type === type)));
  const slow = await measureDown(byLabel, SINK);
  assert.ok(within10(slow), `throttled to ${slow.toFixed(2)} Mbit/s`);

  // A quota raised above the day's use lifts the throttle at once (a period rollover does the
  // same; accounting.test.ts holds the calendar cases, which need no container).
  await putLimits([limitsEntry(BY_LABEL, { rx_quota_day_gb: 100, throttle_rx_mbps: 10, throttle_tx_mbps: 10 })]);
  const restored = await until('restored', async () => {
    const s = (await stats()).find((x) => x.uuid === BY_LABEL);
    return s && !s.throttled ? s : undefined;
  });
  assert.deepEqual(restored.exceeded, []);
  assert.ok(restored.rx_used_day_bytes >= GIB, 'the day counter keeps its count');
  await panel.waitFor((p) => p.events.some((e) => e.server_uuid === BY_LABEL && e.type === 'restored'));
  const veth = (await hostVethOf(byLabel.pid))?.iface as string;
  await until('throttle rules removed', () => (qdiscs(veth).includes('htb') ? undefined : true), 10_000);
  const fast = await measureDown(byLabel, SINK, 2);
  assert.ok(fast > 50, `full speed again (${fast.toFixed(0)} Mbit/s); ${veth}: ${qdiscs(veth)}`);
});

test('a server leaving the limits set loses its rules', async () => {
  await putLimits([]);
  const veth = (await hostVethOf(byName.pid))?.iface as string;
  await until('rules removed', () => (qdiscs(veth).includes('htb') ? undefined : true), 10_000);
  const fast = await measureDown(byName, SINK, 2);
  assert.ok(fast > 50, `unshaped (${fast.toFixed(0)} Mbit/s)`);
});

test('a shaped server that stops loses its IFB within seconds', async () => {
  await putLimits([limitsEntry(BY_LABEL, { rx_speed_mbps: 10, tx_speed_mbps: 10 })]);
  const veth = await hostVethOf(byLabel.pid);
  const ifb = `/sys/class/net/${ifbName(veth?.ifindex as number)}`;
  await until('the IFB made', () => (existsSync(ifb) ? true : undefined), 10_000);
  await docker!.cli(['stop', '-t', '1', 'game-by-label']);
  await until('the IFB removed', () => (existsSync(ifb) ? undefined : true), 15_000);
  // A stop (and the restart before) is said as one, never as a container without a network.
  assert.match(agent.output(), new RegExp(`"server":"${BY_LABEL}","msg":"server container no longer running"`));
  assert.doesNotMatch(agent.output(), /no host veth found/);
});

test('a container in a server network namespace is not managed on its own; a server reconnected to its network is shaped on its new veth', async () => {
  const SIDE = '0b1c2d3e-4f50-4617-8829-3a4b5c6d7e8f';
  panel.servers.add(SIDE);
  await putLimits([limitsEntry(BY_NAME, { rx_speed_mbps: 10, tx_speed_mbps: 10 }), limitsEntry(SIDE, { rx_speed_mbps: 1, tx_speed_mbps: 1 })]);
  const old = (await hostVethOf(byName.pid))?.iface as string;
  await until('the server shaped', () => (qdiscs(old).includes('htb') ? true : undefined), 10_000);
  await docker!.runContainer({ name: 'sidecar', labels: { 'hostkit.server_uuid': SIDE }, network: `container:${byName.id}` });
  await new Promise((r) => setTimeout(r, 2500)); // two discovery scans
  assert.ok(!(await stats()).some((s) => s.uuid === SIDE && s.online), 'the sidecar is not a server of its own');
  assert.match(classes(old), /rate 10Mbit/, 'the sidecar limits never land on the server veth');

  await docker!.cli(['network', 'disconnect', net.name, byName.id]);
  await docker!.cli(['network', 'connect', net.name, byName.id]);
  const now = await until('the server on its new veth', async () => {
    const v = await hostVethOf(byName.pid);
    return v && v.iface !== old && qdiscs(v.iface).includes('htb') ? v.iface : undefined;
  });
  assert.match(classes(now), /rate 10Mbit/);
});

/**
 * The container bandwidth daemon on a real Docker engine with real tc: every running container
 * with a host veth gets the default rate in both directions (measured), a container whose
 * `bandwidth.daily_quota` label is crossed is measured at the exceeded speed, `bandwidth reset`
 * restores it, the health job repairs a rule someone deleted, and after a restart with
 * `disconnect_on_exceeded` an exceeded container loses its rules; a restart finds no container
 * again and reports one removed meanwhile; a stop is no removal, a `docker rm` is; a container in
 * another's network namespace is not managed on its own; a network reconnect leaves no entry on
 * the deleted veth. Webhooks go to a receiver on loopback.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { hostkitArgv, startHostkit, type Daemon } from '../integration/hostkit-process.ts';
import { startReceiver, type Receiver } from '../integration/bandwidthd/receivers.ts';
import { measureDown, measureUp, push } from './traffic.ts';
import { sinkCommand, startDocker, type DockerHarness, type TestContainer, type TestNetwork } from './harness.ts';

const SINK = 9000;
const MB = 1024 * 1024;
const dir = mkdtempSync(join(tmpdir(), 'hk-bwd-docker-'));
const configFile = join(dir, 'config.yaml');
let docker: DockerHarness | undefined;
let net: TestNetwork;
let plain: TestContainer;
let quota: TestContainer;
let cut: TestContainer;
let hook: Receiver;
let daemon: Daemon;

interface Status {
  containers: { id: string; name: string; iface: string; exceeded: boolean; warned: boolean; mode: string; rx_day_bytes: number }[];
}

function writeConfig(over: Record<string, unknown> = {}): void {
  writeFileSync(
    configFile,
    stringify({
      general: { socket_path: join(dir, 'bw.sock'), lock_file: join(dir, 'bw.lock'), pid_file: join(dir, 'bw.pid') },
      logging: { file: join(dir, 'bw.log'), level: 'debug' },
      database: { path: join(dir, 'bw.db') },
      docker: { endpoint: docker?.endpoint, discovery_interval: '1s' },
      bandwidth: { default_rx_mbps: 10, default_tx_mbps: 10, default_ceil_mbps: 10, default_burst_mbps: 0.5, poll_interval: '1s' },
      quota: { default_quota_gb: 500, exceeded_speed_rx_mbps: 4, exceeded_speed_tx_mbps: 4, warning_percent: 50, ...over },
      scheduler: { check_interval: '1s' },
      timezone: 'UTC',
      notifications: { batch_window: '100ms', generic: [{ name: 'ops', enabled: true, url: hook.url }] },
    }),
  );
}

/** A CLI command without blocking this process (the receiver lives here). */
function bw(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const [cmd, ...pre] = hostkitArgv();
  return new Promise((resolve) => {
    execFile(cmd as string, [...pre, 'bandwidthd', ...args, '--config', configFile], { timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

async function status(): Promise<Status> {
  const r = await bw('status', '--json');
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout) as Status;
}

async function until<T>(what: string, fn: () => Promise<T | undefined> | T | undefined, ms = 30_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}\n${daemon?.output().slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 300));
  }
}





const qdiscs = (iface: string): string => execFileSync('tc', ['qdisc', 'show', 'dev', iface], { encoding: 'utf8' });
const near = (mbps: number, want: number): boolean => mbps > want * 0.9 && mbps < want * 1.1;
const events = (): string[] => hook.received.map((q) => `${(q.body as { event: string }).event}:${String((q.body as { data: { container?: string } }).data.container ?? '')}`);

before(async () => {
  docker = await startDocker({ name: 'bandwidthd' });
  net = await docker.createNetwork('hk-bwd', '10.251.50.0/24');
  plain = await docker.runContainer({ name: 'bwd-plain', network: 'hk-bwd', cmd: sinkCommand(SINK) });
  // 0.01 GB is about 10.7 MB: crossed in about 9 s at the 10 Mbit/s default.
  quota = await docker.runContainer({ name: 'bwd-quota', labels: { 'bandwidth.daily_quota': '0.01' }, network: 'hk-bwd', cmd: sinkCommand(SINK) });
  cut = await docker.runContainer({ name: 'bwd-cut', labels: { 'bandwidth.daily_quota': '0.01' }, network: 'hk-bwd', cmd: sinkCommand(SINK) });
  await docker.runContainer({ name: 'bwd-nonet' }); // --network none: no host veth, not managed
  hook = await startReceiver('generic');
  writeConfig();
  daemon = startHostkit(['bandwidthd', 'serve', '--config', configFile]);
  await daemon.waitFor(/bandwidth daemon running/, 30_000);
});

after(async () => {
  await daemon?.stop();
  await hook?.close();
  await docker?.stop();
});

test('every running container with a host veth is managed, with HTB on its veth', async () => {
  const s = await until('three containers', async () => {
    const x = await status();
    return x.containers.length === 3 ? x : undefined;
  });
  assert.deepEqual(s.containers.map((c) => c.name).sort(), ['bwd-cut', 'bwd-plain', 'bwd-quota']);
  for (const c of s.containers) assert.match(qdiscs(c.iface), /htb/);
  await until('container_found x3', () => (events().filter((e) => e.startsWith('container_found')).length === 3 ? true : undefined));
});

test('a container in another container network namespace is not managed on its own; the owner keeps its rules', async () => {
  // Its label would exceed at once: were it managed on bwd-plain's veth, bwd-plain would lose its rules.
  const side = await docker!.runContainer({ name: 'bwd-side', labels: { 'bandwidth.daily_quota': '0.000001' }, network: `container:${plain.id}` });
  await new Promise((r) => setTimeout(r, 3000)); // discovery runs every second and on the start event
  const s = await status();
  assert.deepEqual(s.containers.map((c) => c.name).sort(), ['bwd-cut', 'bwd-plain', 'bwd-quota']);
  assert.ok(!events().includes('container_found:bwd-side'));
  const iface = s.containers.find((c) => c.name === 'bwd-plain')?.iface as string;
  assert.match(qdiscs(iface), /htb/);
  await docker!.cli(['rm', '-f', side.id]);
  await new Promise((r) => setTimeout(r, 2000));
  assert.match(qdiscs(iface), /htb/);
  assert.ok(!events().includes('container_removed:bwd-side'));
});

test('the default 10 Mbit/s holds within 10% in both directions', async () => {
  const down = await measureDown(plain, SINK);
  assert.ok(near(down, 10), `down ${down.toFixed(2)} Mbit/s`);
  const up = await measureUp(docker!, net, plain);
  assert.ok(near(up, 10), `up ${up.toFixed(2)} Mbit/s`);
});

test('over its daily quota label a container is measured at the exceeded speed; reset restores it', async () => {
  await push(quota, SINK, 12 * MB);
  const over = await until('exceeded', async () => (await status()).containers.find((c) => c.name === 'bwd-quota' && c.exceeded));
  assert.equal(over.mode, 'exceeded');
  await until('quota webhooks', () => (['quota_warning:bwd-quota', 'quota_exceeded:bwd-quota'].every((e) => events().includes(e)) ? true : undefined));
  const slow = await measureDown(quota, SINK);
  assert.ok(near(slow, 4), `exceeded speed ${slow.toFixed(2)} Mbit/s`);

  const r = await bw('reset', 'bwd-quota');
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /reset: bwd-quota/);
  const back = (await status()).containers.find((c) => c.name === 'bwd-quota');
  assert.equal(back?.exceeded, false);
  assert.ok((back?.rx_day_bytes ?? 1) < MB);
  const fast = await measureDown(quota, SINK, 2);
  assert.ok(near(fast, 10), `after reset ${fast.toFixed(2)} Mbit/s`);
});

test('the health job repairs a rule someone removed', async () => {
  const iface = (await status()).containers.find((c) => c.name === 'bwd-plain')?.iface as string;
  execFileSync('tc', ['qdisc', 'del', 'dev', iface, 'root']);
  assert.doesNotMatch(qdiscs(iface), /htb/);
  const r = await bw('run-job', 'health');
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /repaired 1 of 3 interfaces/);
  assert.match(qdiscs(iface), /htb/);
  assert.match((await bw('run-job', 'health')).stdout, /all 3 interfaces as applied/);
});

test('after a restart nothing is found again, a container removed meanwhile is container_removed, and with disconnect_on_exceeded an exceeded container runs without rules', async () => {
  const downtime = await docker!.runContainer({ name: 'bwd-downtime', network: 'hk-bwd', cmd: sinkCommand(SINK) });
  await until('container_found for bwd-downtime', () => (events().includes('container_found:bwd-downtime') ? true : undefined));
  const found = events().filter((e) => e.startsWith('container_found')).length;
  assert.equal(await daemon.stop(), 0);
  await docker!.cli(['rm', '-f', downtime.id]);
  writeConfig({ disconnect_on_exceeded: true });
  daemon = startHostkit(['bandwidthd', 'serve', '--config', configFile]);
  await daemon.waitFor(/bandwidth daemon running/, 30_000);
  await until('three containers again', async () => ((await status()).containers.length === 3 ? true : undefined));
  await until('container_removed for bwd-downtime', () => (events().includes('container_removed:bwd-downtime') ? true : undefined));
  await push(cut, SINK, 12 * MB);
  const over = await until('exceeded', async () => (await status()).containers.find((c) => c.name === 'bwd-cut' && c.exceeded && c.mode === 'none'));
  await until('rules removed', () => (qdiscs(over.iface).includes('htb') ? undefined : true), 10_000);
  const free = await measureDown(cut, SINK, 2);
  assert.ok(free > 50, `unrestricted (${free.toFixed(0)} Mbit/s)`);
  // The others keep their default rules.
  const iface = (await status()).containers.find((c) => c.name === 'bwd-plain')?.iface as string;
  assert.match(qdiscs(iface), /htb/);
  assert.equal(events().filter((e) => e.startsWith('container_found')).length, found, 'the restart found no container again');
});

test('a stopped container sends no container_removed and is managed again when it starts; a removed one sends container_removed', async () => {
  const gone = await docker!.runContainer({ name: 'bwd-gone', network: 'hk-bwd', cmd: sinkCommand(SINK) });
  const managed = async (): Promise<boolean> => (await status()).containers.some((c) => c.name === 'bwd-gone');
  await until('bwd-gone managed', async () => ((await managed()) ? true : undefined));
  const count = (event: string): number => events().filter((e) => e === `${event}:bwd-gone`).length;
  await until('container_found for bwd-gone', () => (count('container_found') === 1 ? true : undefined));

  await docker!.cli(['stop', gone.id]);
  await until('bwd-gone no longer managed', async () => ((await managed()) ? undefined : true));
  await docker!.cli(['start', gone.id]);
  await until('bwd-gone managed again', async () => ((await managed()) ? true : undefined));
  await new Promise((r) => setTimeout(r, 500)); // a batch window and more for a stray event
  assert.equal(count('container_removed'), 0, 'a stop is not a removal');
  assert.equal(count('container_found'), 1, 'coming back is not a new container');

  await docker!.cli(['rm', '-f', gone.id]);
  await until('container_removed for bwd-gone', () => (count('container_removed') === 1 ? true : undefined));
});

test('after a network disconnect and connect the container is managed and shaped on its new veth (eth1 inside)', async () => {
  const moved = await docker!.runContainer({ name: 'bwd-move', network: 'hk-bwd', cmd: sinkCommand(SINK) });
  const old = await until('bwd-move managed', async () => (await status()).containers.find((c) => c.name === 'bwd-move')?.iface);
  await docker!.cli(['network', 'disconnect', net.name, moved.id]);
  await docker!.cli(['network', 'connect', net.name, moved.id]);
  assert.ok(!existsSync(`/sys/class/net/${old}`), 'the engine deleted the old veth');
  const now = await until('bwd-move on a new veth', async () => {
    const iface = (await status()).containers.find((c) => c.name === 'bwd-move')?.iface;
    return iface !== undefined && iface !== old ? iface : undefined;
  });
  await until('rules on the new veth', () => (qdiscs(now).includes('htb') ? true : undefined));
});

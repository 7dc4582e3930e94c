/**
 * Real traffic between the host and a test container, measured where the shaping shows: on the
 * host veth's counter for host -> container, at a host receiver for container -> host. Used by
 * the Docker tests of every role that shapes container traffic.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { execFileSync, spawn } from 'node:child_process';
import { connect, createServer, type Socket } from 'node:net';
import { ifbName } from '../../src/lib/tc.ts';
import { hostVethOf } from '../../src/lib/veth.ts';
import type { DockerHarness, TestContainer, TestNetwork } from './harness.ts';

function counter(iface: string, which: 'rx_bytes' | 'tx_bytes'): number {
  return Number(readFileSync(`/sys/class/net/${iface}/statistics/${which}`, 'utf8'));
}

/** Host -> container sink on `port` for `seconds` after a 1 s warm-up; Mbit/s measured on the host veth. */
export async function measureDown(c: TestContainer, port: number, seconds = 3): Promise<number> {
  const veth = (await hostVethOf(c.pid))?.iface;
  assert.ok(veth, 'container has a host veth');
  const sock = connect({ host: c.ip, port });
  await new Promise<void>((resolve, reject) => sock.once('connect', resolve).once('error', reject));
  const chunk = Buffer.alloc(64 * 1024);
  let open = true;
  const pump = (): void => {
    while (open && sock.write(chunk));
  };
  sock.on('drain', pump);
  sock.on('error', () => undefined);
  pump();
  await new Promise((r) => setTimeout(r, 1000));
  const start = counter(veth, 'tx_bytes');
  const t0 = Date.now();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const bytes = counter(veth, 'tx_bytes') - start;
  const elapsed = (Date.now() - t0) / 1000;
  open = false;
  sock.destroy();
  return (bytes * 8) / elapsed / 1e6;
}

/**
 * Container -> a host receiver on the network's gateway for `seconds` after a 1 s warm-up; Mbit/s
 * measured where the shaping of that direction shows: leaving the shaper, on the tx counter of the
 * host veth's IFB device (so the container must be shaped). Counting TCP payload at the receiver
 * instead reads about 4.5% low, as the shaper counts whole frames.
 */
export async function measureUp(docker: DockerHarness, net: TestNetwork, c: TestContainer, seconds = 3): Promise<number> {
  const veth = await hostVethOf(c.pid);
  assert.ok(veth, 'container has a host veth');
  const ifb = ifbName(veth.ifindex);
  assert.ok(existsSync(`/sys/class/net/${ifb}`), `the container's traffic is shaped through ${ifb}`);
  const conns = new Set<Socket>();
  const server = createServer((s) => {
    conns.add(s);
    s.resume().on('error', () => undefined);
  });
  await new Promise<void>((r) => server.listen(0, net.gateway, r));
  const port = (server.address() as { port: number }).port;
  const sender = docker.exec(c.name, ['sh', '-c', `timeout ${seconds + 2} nc ${net.gateway} ${port} < /dev/zero`], { timeoutMs: (seconds + 10) * 1000 });
  await new Promise((r) => setTimeout(r, 1000));
  const start = counter(ifb, 'tx_bytes');
  const t0 = Date.now();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const bytes = counter(ifb, 'tx_bytes') - start;
  const elapsed = (Date.now() - t0) / 1000;
  await sender;
  // The killed nc's FIN waits in the container behind what the shaper still holds; a container
  // restarted or removed before it drains never sends it, and the open connection would keep the
  // test process alive after its last test.
  for (const s of conns) s.destroy();
  server.close();
  return (bytes * 8) / elapsed / 1e6;
}

/** Pushes `bytes` host -> container sink on `port` as fast as the path allows. */
export async function push(c: TestContainer, port: number, bytes: number): Promise<void> {
  const sock = connect({ host: c.ip, port });
  await new Promise<void>((resolve, reject) => sock.once('connect', resolve).once('error', reject));
  const chunk = Buffer.alloc(1024 * 1024);
  let sent = 0;
  await new Promise<void>((resolve, reject) => {
    sock.on('error', reject);
    const pump = (): void => {
      while (sent < bytes) {
        sent += chunk.length;
        if (!sock.write(chunk)) return;
      }
      sock.end(resolve);
    };
    sock.on('drain', pump);
    pump();
  });
}

/**
 * Sends `bytes` container -> a host receiver on the network's gateway as fast as the path allows,
 * or fewer when `stopWhen` (checked every 200 ms) turns true first, as a quota enforced on the
 * way does. The receiver hangs up either way, so a throttle that lands meanwhile cannot stretch
 * the run. Returns the bytes received.
 */
export async function pushUp(docker: DockerHarness, net: TestNetwork, c: TestContainer, bytes: number, opts: { stopWhen?: () => Promise<boolean>; timeoutS?: number } = {}): Promise<number> {
  const timeoutS = opts.timeoutS ?? 60;
  let received = 0;
  let stop: () => void = () => undefined;
  const stopped = new Promise<void>((r) => (stop = r));
  const conns = new Set<Socket>();
  const server = createServer((s) => {
    conns.add(s);
    s.on('data', (d: Buffer) => {
      received += d.length;
      if (received >= bytes) stop();
    }).on('error', () => undefined);
  });
  await new Promise<void>((r) => server.listen(0, net.gateway, r));
  const port = (server.address() as { port: number }).port;
  const sender = docker.exec(c.name, ['sh', '-c', `timeout ${timeoutS} nc ${net.gateway} ${port} < /dev/zero`], { timeoutMs: (timeoutS + 10) * 1000 });
  let watching = opts.stopWhen !== undefined;
  const watch = async (): Promise<void> => {
    while (watching) {
      if (await opts.stopWhen?.()) return stop();
      await new Promise((r) => setTimeout(r, 200));
    }
  };
  const watcher = watch();
  await Promise.race([stopped, sender]);
  watching = false;
  for (const s of conns) s.destroy();
  server.close();
  await sender;
  await watcher;
  return received;
}

/** One stretch of a flood: `seconds` long, the rate going from `from` to `to` packets/s geometrically. */
export interface FloodPhase {
  seconds: number;
  from: number;
  to: number;
}

// Runs in its own process: paced every 10 ms, prints the datagrams sent when told to stop.
const FLOOD_SCRIPT = `
const [ip, size, phases] = [process.argv[1], Number(process.argv[2]), JSON.parse(process.argv[3])];
const sock = require('node:dgram').createSocket('udp4');
const payload = Buffer.alloc(size);
const t0 = Date.now();
let sent = 0, owed = 0, last = t0;
function rate(s) {
  for (const p of phases) {
    if (s < p.seconds) return p.from * (p.to / p.from) ** (s / p.seconds);
    s -= p.seconds;
  }
  return 0;
}
const timer = setInterval(() => {
  const now = Date.now();
  owed += rate((now - t0) / 1000) * (now - last) / 1000;
  last = now;
  for (; owed >= 1; owed--, sent++) sock.send(payload, 9, ip);
}, 10);
process.on('SIGTERM', () => { clearInterval(timer); process.stdout.write(String(sent)); process.exit(0); });
`;

/**
 * A UDP flood of `size`-byte datagrams to a closed port of `ip`, following `phases` until
 * stopped; from the network namespace `netns` when given (traffic that reaches a shaped veth from
 * outside, as an attack does: sent from the host itself, a cap would push back on the sending
 * socket instead of dropping). The stop function resolves with the datagrams sent.
 */
export function udpFlood(ip: string, phases: FloodPhase[], opts: { netns?: string; size?: number } = {}): () => Promise<number> {
  const argv = [process.execPath, '-e', FLOOD_SCRIPT, ip, String(opts.size ?? 1000), JSON.stringify(phases)];
  const child = opts.netns ? spawn('ip', ['netns', 'exec', opts.netns, ...argv]) : spawn(argv[0] as string, argv.slice(1));
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  return async () => {
    child.kill('SIGTERM');
    await exited;
    return Number(out) || 0;
  };
}

/**
 * A network namespace `ns` plugged into the bridge of a test network at `ip`, through a veth whose
 * host end is `veth`: a sender outside the node, as an attacker is (see udpFlood). Returns the
 * function that removes both.
 */
export function attackerNamespace(ns: string, veth: string, bridge: string, ip: string): () => void {
  const run = (...args: string[]): string => execFileSync('ip', args, { encoding: 'utf8' });
  const remove = (): void => {
    for (const args of [['link', 'del', veth], ['netns', 'del', ns]]) {
      try {
        execFileSync('ip', args, { stdio: 'ignore' });
      } catch {
        // not made
      }
    }
  };
  run('netns', 'add', ns);
  run('link', 'add', veth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns);
  run('link', 'set', veth, 'master', bridge, 'up');
  run('-n', ns, 'addr', 'add', ip, 'dev', 'eth0');
  run('-n', ns, 'link', 'set', 'eth0', 'up');
  return remove;
}

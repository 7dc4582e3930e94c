/**
 * src/lib/docker.ts and src/lib/veth.ts against a real dockerd (test/docker/harness.ts): discovery
 * by UUID name or label, the event stream, host veths and their counters with real traffic, and a
 * restart that moves the container to a new veth. The reconnect logic is also driven by a small
 * real HTTP server on a unix socket that plays an engine going away, which needs no dockerd.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { connect, createServer, type Server } from 'node:net';
import { readlink, rm } from 'node:fs/promises';
import { basename } from 'node:path';
import { existsSync } from 'node:fs';
import pino from 'pino';
import { createContainerSource, serverUuidOf, type ContainerEvent, type ContainerSource } from '../../src/lib/docker.ts';
import { hostVethOf, readCounters } from '../../src/lib/veth.ts';
import { sinkCommand, startDocker, type DockerHarness, type TestContainer, type TestNetwork } from './harness.ts';

const logger = pino({ level: process.env.HOSTKIT_TEST_LOG ?? 'silent' });
const UUID_A = '3f2c9a1e-7b4d-4e8a-9c1f-0a1b2c3d4e5f';
const UUID_B = 'A0B1C2D3-E4F5-4A6B-8C7D-9E0F1A2B3C4D';
const SINK_PORT = 9000;

async function waitFor<T>(what: string, fn: () => T | undefined | Promise<T | undefined>, ms = 10_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Sends `bytes` zero bytes to host:port, retrying while the sink is not listening yet. */
async function send(host: string, port: number, bytes: number): Promise<void> {
  const end = Date.now() + 10_000;
  for (;;) {
    try {
      await new Promise<void>((resolve, reject) => {
        const sock = connect({ host, port }, () => sock.end(Buffer.alloc(bytes)));
        sock.once('error', reject);
        sock.once('close', (hadError) => (hadError ? undefined : resolve()));
      });
      return;
    } catch (err) {
      if (Date.now() > end) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

async function counters(iface: string): Promise<{ rxBytes: number; txBytes: number }> {
  const c = (await readCounters([iface])).get(iface);
  assert.ok(c, `no counters for ${iface}`);
  return c;
}

describe('container source and veths on a real dockerd', () => {
  let h: DockerHarness;
  let net: TestNetwork;
  let source: ContainerSource;
  let a: TestContainer;
  let b: TestContainer;
  let c: TestContainer;
  const events: ContainerEvent[] = [];
  let unwatch: (() => void) | undefined;

  before(async () => {
    h = await startDocker({ name: 'doclib' });
    source = createContainerSource({ endpoint: h.endpoint, logger });
    unwatch = source.watch((e) => events.push(e));
    // The stream must be open before the containers start, or their start events are not ours.
    await waitFor('event stream', async () => ((await source.version()) ? true : undefined));
    await new Promise((r) => setTimeout(r, 300));
    net = await h.createNetwork('hk-doclib', '10.251.10.0/24');
    a = await h.runContainer({ name: UUID_A, network: net.name, cmd: sinkCommand(SINK_PORT) });
    b = await h.runContainer({ name: 'game-b', labels: { 'hostkit.server_uuid': UUID_B, role: 'game' }, network: net.name });
    c = await h.runContainer({ name: 'unrelated', labels: { purpose: 'none' }, network: net.name });
  });

  after(async () => {
    unwatch?.();
    await h?.stop();
  });

  test('version negotiates down to the engine or up to the ceiling', async () => {
    const engine = (await h.docker.version()).ApiVersion;
    const v = await source.version();
    assert.equal(v, Number(engine.split('.')[1]) < 44 ? engine : '1.44');
    const low = createContainerSource({ endpoint: h.endpoint, apiVersion: '1.40', logger });
    assert.equal(await low.version(), '1.40');
    assert.ok((await low.list()).length >= 3);
  });

  test('list finds the UUID-named and UUID-labelled containers, serverUuidOf maps them, others stay out', async () => {
    const all = await source.list();
    const byId = new Map(all.map((x) => [x.id, x]));
    const la = byId.get(a.id);
    const lb = byId.get(b.id);
    const lc = byId.get(c.id);
    assert.ok(la && lb && lc);
    assert.equal(la.name, UUID_A);
    assert.equal(la.running, true);
    assert.equal(la.pid, a.pid);
    assert.equal(la.networkMode, net.name);
    assert.equal(serverUuidOf(la), UUID_A);
    assert.equal(serverUuidOf(lb), UUID_B.toLowerCase());
    assert.equal(serverUuidOf(lc), null);

    const managed = await source.list({ where: (x) => serverUuidOf(x) !== null });
    assert.deepEqual(managed.map((x) => x.id).sort(), [a.id, b.id].sort());
    assert.equal(await source.inspect('no-such-container'), null);
  });

  test('watch reports start events of new containers', async () => {
    for (const x of [a, b, c]) {
      await waitFor(`start of ${x.name}`, () => events.find((e) => e.action === 'start' && e.id === x.id));
    }
    const startA = events.find((e) => e.action === 'start' && e.id === a.id);
    assert.equal(startA?.name, UUID_A);
  });

  test('host veth counters see host->container and container->host bytes', async () => {
    const veth = await hostVethOf(a.pid);
    assert.ok(veth, 'no host veth found');
    assert.equal(basename(await readlink(`/sys/class/net/${veth.iface}/master`)), net.bridge);

    const before1 = await counters(veth.iface);
    await send(a.ip, SINK_PORT, 300_000);
    const after1 = await waitFor('tx growth', async () => {
      const now = await counters(veth.iface);
      return now.txBytes - before1.txBytes >= 300_000 ? now : undefined;
    });
    assert.ok(after1.txBytes - before1.txBytes < 400_000, 'counted far more than was sent');

    let received = 0;
    const server: Server = createServer((s) => s.on('data', (d: Buffer) => (received += d.length)));
    await new Promise<void>((r) => server.listen(0, net.gateway, r));
    try {
      const port = (server.address() as { port: number }).port;
      const before2 = await counters(veth.iface);
      const r = await h.exec(a.id, ['sh', '-c', `head -c 200000 /dev/zero | nc ${net.gateway} ${port}`]);
      assert.equal(r.code, 0, r.stderr);
      await waitFor('bytes at the host', () => (received >= 200_000 ? true : undefined));
      const after2 = await waitFor('rx growth', async () => {
        const now = await counters(veth.iface);
        return now.rxBytes - before2.rxBytes >= 200_000 ? now : undefined;
      });
      assert.ok(after2.rxBytes - before2.rxBytes < 300_000);
    } finally {
      server.close();
    }
    assert.equal(await hostVethOf(c.pid).then((v) => v !== null && v.iface !== veth.iface), true);
    assert.equal(await hostVethOf(999_999_999), null);
    assert.equal(await hostVethOf(process.pid), null, 'a process in the host netns has no container veth');
  });

  test('watch reports rename, die and destroy', async () => {
    await h.docker.getContainer(c.id).rename({ name: 'unrelated-2' });
    const ren = await waitFor('rename', () => events.find((e) => e.action === 'rename' && e.id === c.id));
    assert.equal(ren.name, 'unrelated-2');
    await h.docker.getContainer(c.id).remove({ force: true });
    await waitFor('die', () => events.find((e) => e.action === 'die' && e.id === c.id));
    await waitFor('destroy', () => events.find((e) => e.action === 'destroy' && e.id === c.id));
    assert.ok(!(await source.list()).some((x) => x.id === c.id));
  });

  test('after docker restart the container has a new host veth and hostVethOf finds it', async () => {
    const old = await hostVethOf(a.pid);
    assert.ok(old);
    const seen = events.length;
    await h.docker.getContainer(a.id).restart({ t: 1 });
    await waitFor('die after restart', () => events.slice(seen).find((e) => e.action === 'die' && e.id === a.id));
    await waitFor('start after restart', () => events.slice(seen).find((e) => e.action === 'start' && e.id === a.id));
    const info = await source.inspect(a.id);
    assert.ok(info?.running);
    assert.notEqual(info.pid, a.pid);
    const now = await hostVethOf(info.pid);
    assert.ok(now);
    assert.notEqual(now.ifindex, old.ifindex);
    if (old.iface !== now.iface) assert.ok(!existsSync(`/sys/class/net/${old.iface}`), 'old veth still there');
    const ip = (await h.docker.getContainer(a.id).inspect()).NetworkSettings.Networks[net.name]?.IPAddress ?? '';
    const before1 = await counters(now.iface);
    await send(ip, SINK_PORT, 100_000);
    await waitFor('tx on the new veth', async () =>
      (await counters(now.iface)).txBytes - before1.txBytes >= 100_000 ? true : undefined,
    );
  });
});

describe('container source without an engine', () => {
  test('list, inspect and version reject with a clear message when nothing listens', async () => {
    const sock = `/tmp/hostkit-docker-nothing-${process.pid}.sock`;
    const src = createContainerSource({ endpoint: `unix://${sock}`, logger });
    await assert.rejects(src.list(), (err: Error & { code?: string }) => {
      assert.equal(err.code, 'ERR_DOCKER_UNAVAILABLE');
      assert.match(err.message, new RegExp(`unreachable at unix://${sock}.*no socket at ${sock}`));
      return true;
    });
    await assert.rejects(src.inspect('x'), /unreachable/);
    await assert.rejects(src.version(), /unreachable/);
    const tcp = createContainerSource({ endpoint: 'tcp://127.0.0.1:1', logger });
    await assert.rejects(tcp.list(), /unreachable at tcp:\/\/127\.0\.0\.1:1.*connection refused/);
    const tls = createContainerSource({ endpoint: 'tcp://127.0.0.1:1', tls: { certPath: '/nonexistent' }, logger });
    await assert.rejects(tls.list(), /cannot read TLS files .*\/nonexistent/);
    assert.throws(() => createContainerSource({ endpoint: 'http://x', logger }), /docker.endpoint must be/);
  });

  test('watch keeps retrying while the engine is away and resumes where it left off', async () => {
    // A real HTTP server on a unix socket standing in for the engine: it answers /version, streams
    // one event per connection, then hangs up (as an engine restart does); in between it is down.
    const sock = `/tmp/hostkit-fake-engine-${process.pid}.sock`;
    await rm(sock, { force: true });
    const paths: string[] = [];
    let conn = 0;
    const base = 1_800_000_000n * 1_000_000_000n;
    const server: HttpServer = createHttpServer((req, res) => {
      paths.push(req.url ?? '');
      if (req.url === '/version') {
        res.end(JSON.stringify({ Version: 'fake', ApiVersion: '1.43', MinAPIVersion: '1.12' }));
        return;
      }
      if (req.url?.startsWith('/v1.43/events')) {
        conn++;
        res.writeHead(200, { 'content-type': 'application/json' });
        // Each connection replays the previous event first: it must not be delivered twice.
        const ev = (n: number): string =>
          JSON.stringify({
            Type: 'container', Action: n % 2 ? 'start' : 'die', id: `c${n}`,
            Actor: { ID: `c${n}`, Attributes: { name: `n${n}` } }, timeNano: String(base + BigInt(n)),
          }) + '\n';
        if (conn > 1) res.write(ev(conn - 1));
        res.write(ev(conn).slice(0, 20));
        setTimeout(() => res.end(ev(conn).slice(20)), 50);
        return;
      }
      res.statusCode = 404;
      res.end('{"message":"nope"}');
    });
    await new Promise<void>((r) => server.listen(sock, r));
    const got: ContainerEvent[] = [];
    const src = createContainerSource({ endpoint: `unix://${sock}`, logger });
    const stop = src.watch((e) => got.push(e));
    try {
      await waitFor('two streams', () => (got.length >= 2 ? true : undefined));
      assert.deepEqual(got.slice(0, 2), [
        { action: 'start', id: 'c1', name: 'n1' },
        { action: 'die', id: 'c2', name: 'n2' },
      ]);
      // engine away: the watcher must neither crash nor give up
      await new Promise<void>((r) => server.close(() => r()));
      server.closeAllConnections();
      await new Promise((r) => setTimeout(r, 1500));
      const before = got.length;
      await new Promise<void>((r) => server.listen(sock, r));
      await waitFor('reconnect after the outage', () => (got.length > before ? true : undefined), 20_000);
      assert.equal(new Set(got.map((e) => e.id)).size, got.length, 'an event was delivered twice');
      const eventsPaths = paths.filter((p) => p.startsWith('/v1.43/events'));
      assert.match(eventsPaths[0] ?? '', /filters=/);
      assert.doesNotMatch(eventsPaths[0] ?? '', /since=/);
      assert.match(eventsPaths[1] ?? '', /since=1800000000\b/);
    } finally {
      stop();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await rm(sock, { force: true });
    }
  });
});

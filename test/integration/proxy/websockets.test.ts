/**
 * WebSocket tunnels (spec/3 §2.6, §6.1) through the real proxy with a real WebSocket client and
 * origin: frames both ways after the 101, pings answered, the request event published at the 101
 * with the handshake's byte counts and completed with the tunnel's bytes when it ends, one
 * connection slot per live tunnel, idle timeout kept off by pings, max lifetime, a refused
 * upgrade relayed as a plain answer, 502 when the origin is down, WSS on the HTTPS listener,
 * and live tunnels closed by a graceful shutdown.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Daemon } from '../hostkit-process.ts';
import { api, freePort, makeCert, makeRoot, startProxy, until, type ProxyRoot } from './harness.ts';
import { OP, connectWs, startWsOrigin, type WsOrigin } from './websocket.ts';

let root: ProxyRoot;
let proxy: Daemon;
let origin: WsOrigin;
let ca: string;

before(async () => {
  origin = await startWsOrigin();
  const deadPort = await freePort();
  root = await makeRoot();
  const cert = await makeCert(root.dir, 'wss', ['wss.test']);
  ca = cert.pem;
  const sites: Record<string, Record<string, unknown>> = {
    'wss.yaml': { id: 'wss', hostnames: ['wss.test'], origin: { url: origin.url }, tls: { enabled: true, cert_path: cert.cert, key_path: cert.key } },
    'ws.yaml': { id: 'ws', hostnames: ['ws.test'], origin: { url: origin.url } },
    'idle.yaml': { id: 'idle', hostnames: ['idle.test'], origin: { url: origin.url }, websockets: { idle_timeout_secs: 1 } },
    'life.yaml': { id: 'life', hostnames: ['life.test'], origin: { url: origin.url }, websockets: { max_lifetime_secs: 1 } },
    // 30 days: past what one timer holds (24.8 days), which would otherwise fire at once.
    'month.yaml': { id: 'month', hostnames: ['month.test'], origin: { url: origin.url }, websockets: { max_lifetime_secs: 2_592_000, idle_timeout_secs: 2_592_000 } },
    'down.yaml': { id: 'down', hostnames: ['down.test'], origin: { url: `http://127.0.0.1:${deadPort}` } },
  };
  for (const [name, site] of Object.entries(sites)) root.writeSite(name, site);
  proxy = await startProxy(root);
});

after(async () => {
  await proxy?.stop('SIGKILL');
  await origin?.close();
});

interface Event {
  status: number;
  rule: string | null;
  bytes_in: number;
  bytes_out: number;
  path: string;
}

async function lastEvent(site: string): Promise<Event | undefined> {
  return (await api(root, 'GET', `/events/recent?site=${site}&limit=1`)).body.data.events[0] as Event | undefined;
}

test('frames flow both ways; the event goes out at the 101 and gets the tunnel bytes at the end; one slot per tunnel', async () => {
  const ws = await connectWs({ port: root.httpPort, host: 'ws.test', path: '/chat?token=secret' });
  assert.equal(ws.headers['upgrade']?.toLowerCase(), 'websocket');
  const open = await lastEvent('ws');
  assert.ok(open);
  assert.equal(open.status, 101);
  assert.equal(open.path, '/chat');
  assert.ok(open.bytes_in > 100 && open.bytes_in < 1000, `handshake bytes in ${open.bytes_in}`);
  assert.ok(open.bytes_out > 50 && open.bytes_out < 500, `handshake bytes out ${open.bytes_out}`);
  assert.equal(origin.handshakes.at(-1)?.['x-forwarded-for'], '127.0.0.1');

  ws.send(OP.text, 'hello');
  assert.deepEqual(await ws.next().then((f) => [f.opcode, f.data.toString()]), [OP.text, 'hello']);
  const big = Buffer.alloc(200_000, 9);
  ws.send(OP.binary, big);
  const echoed = await ws.next();
  assert.equal(echoed.data.length, big.length);
  ws.send(OP.ping, 'p');
  assert.deepEqual(await ws.next().then((f) => [f.opcode, f.data.toString()]), [OP.pong, 'p']);

  const second = await connectWs({ port: root.httpPort, host: 'ws.test' });
  assert.equal((await api(root, 'GET', '/sites/ws/usage')).body.data.connections, 2);
  second.socket.destroy();
  await until('the second tunnel to release its slot', async () => (await api(root, 'GET', '/sites/ws/usage')).body.data.connections === 1);

  ws.send(OP.close, Buffer.from([0x03, 0xe8]));
  assert.equal((await ws.next()).opcode, OP.close);
  await ws.closed;
  await until('the tunnel to end', async () => (await api(root, 'GET', '/sites/ws/usage')).body.data.connections === 0);
  const events = (await api(root, 'GET', '/events/recent?site=ws&limit=2')).body.data.events as Event[];
  const done = events.find((e) => e.path === '/chat');
  assert.ok(done);
  assert.ok(done.bytes_in > 200_000 && done.bytes_out > 200_000, `tunnel bytes ${done.bytes_in}/${done.bytes_out}`);
  const usage = (await api(root, 'GET', '/sites/ws/usage')).body.data;
  assert.ok(usage.bytes > 400_000, `quota counted ${usage.bytes}`);
});

test('idle_timeout_secs: pings keep a tunnel open, silence closes it', async () => {
  const ws = await connectWs({ port: root.httpPort, host: 'idle.test' });
  const started = Date.now();
  while (Date.now() - started < 2_500) {
    ws.send(OP.ping, 'x');
    assert.equal((await ws.next()).opcode, OP.pong);
    await new Promise((r) => setTimeout(r, 300));
  }
  assert.equal(ws.isClosed(), false, 'pings count as activity');
  const quietFrom = Date.now();
  await ws.closed;
  const quiet = Date.now() - quietFrom;
  assert.ok(quiet >= 600 && quiet < 2_500, `closed after ${quiet} ms of silence`);
});

test('max_lifetime_secs closes a busy tunnel', async () => {
  const ws = await connectWs({ port: root.httpPort, host: 'life.test' });
  const started = Date.now();
  const timer = setInterval(() => ws.send(OP.text, 'busy'), 100);
  await ws.closed;
  clearInterval(timer);
  const age = Date.now() - started;
  assert.ok(age >= 900 && age < 2_000, `closed at ${age} ms`);
});

test('limits of a month keep a tunnel open (longer than one timer can wait)', async () => {
  const ws = await connectWs({ port: root.httpPort, host: 'month.test' });
  await new Promise((r) => setTimeout(r, 300));
  ws.send(OP.ping, 'still');
  assert.equal((await ws.next()).opcode, OP.pong);
  assert.equal(ws.isClosed(), false);
  ws.socket.destroy();
});

test('a refused upgrade is relayed as a plain answer; an unreachable origin is 502', async () => {
  await assert.rejects(connectWs({ port: root.httpPort, host: 'ws.test', path: '/refuse' }), /403 Forbidden/);
  await assert.rejects(connectWs({ port: root.httpPort, host: 'down.test' }), /502 Bad Gateway/);
  // Events reach the ring through the bus, a moment after the answer.
  await until('the 502 event', async () => (await lastEvent('down'))?.rule === 'origin.connect');
});

test('WSS: a tunnel through the HTTPS listener', async () => {
  const ws = await connectWs({ port: root.httpsPort, host: 'wss.test', tls: { ca } });
  ws.send(OP.text, 'over tls');
  assert.equal((await ws.next()).data.toString(), 'over tls');
  ws.socket.destroy();
});

test('a graceful shutdown closes live tunnels and exits 0', async () => {
  const ws = await connectWs({ port: root.httpPort, host: 'ws.test' });
  const started = Date.now();
  assert.equal(await proxy.stop('SIGTERM'), 0);
  await ws.closed;
  assert.ok(Date.now() - started < 5_000, 'tunnels do not hold the shutdown for the grace period');
});

/**
 * PROXY protocol to the origin (spec/3 §2.4 `client_ip.proxy_protocol`) with an origin that reads
 * the v1 or v2 header before HTTP: the header comes first on every upstream connection (plain
 * requests and WebSocket handshakes), names the resolved client IP and the listener, and a kept
 * alive connection never carries another client's request. `transparent` falls back to normal
 * egress with one warning per site.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { connect as netConnect, createServer as createNetServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Daemon } from '../hostkit-process.ts';
import { makeRoot, request, startProxy, type ProxyRoot } from './harness.ts';
import { connectWs } from './websocket.ts';

interface ProxyHeader {
  version: 1 | 2;
  family: string;
  src: string;
  dst: string;
  srcPort: number;
  dstPort: number;
  /** Which origin connection carried it (1, 2, ...). */
  conn: number;
}

const V2_SIG = Buffer.from('0d0a0d0a000d0a515549540a', 'hex');

/** Parses a v1 or v2 header at the start of `buf`; undefined while incomplete. */
function parseHeader(buf: Buffer, conn: number): { header: ProxyHeader; rest: Buffer } | undefined {
  if (buf.length >= 16 && buf.subarray(0, 12).equals(V2_SIG)) {
    const len = buf.readUInt16BE(14);
    if (buf.length < 16 + len) return undefined;
    const fam = buf[13];
    const a = buf.subarray(16, 16 + len);
    let src: string;
    let dst: string;
    let p: number;
    if (fam === 0x11) {
      src = [...a.subarray(0, 4)].join('.');
      dst = [...a.subarray(4, 8)].join('.');
      p = 8;
    } else {
      const hex = (b: Buffer): string => (b.toString('hex').match(/.{4}/g) ?? []).join(':');
      src = hex(a.subarray(0, 16));
      dst = hex(a.subarray(16, 32));
      p = 32;
    }
    return { header: { version: 2, family: fam === 0x11 ? 'TCP4' : 'TCP6', src, dst, srcPort: a.readUInt16BE(p), dstPort: a.readUInt16BE(p + 2), conn }, rest: buf.subarray(16 + len) };
  }
  const end = buf.indexOf('\r\n');
  if (end === -1) return undefined;
  const [proto, family = '', src = '', dst = '', sp = '0', dp = '0'] = buf.subarray(0, end).toString().split(' ');
  assert.equal(proto, 'PROXY');
  return { header: { version: 1, family, src, dst, srcPort: Number(sp), dstPort: Number(dp), conn }, rest: buf.subarray(end + 2) };
}

interface PpOrigin {
  url: string;
  port: number;
  close(): Promise<void>;
}

/**
 * An origin that requires a PROXY header on each connection and answers with what it read. A
 * relay reads the header and passes the rest of the connection to an inner HTTP(S) server (with
 * `tls`, TLS starts after the header, as the protocol requires); the inner server finds the header
 * by the relay connection's port.
 */
async function startPpOrigin(tls?: { cert: string; key: string }): Promise<PpOrigin> {
  const byRelayPort = new Map<number, ProxyHeader>();
  const headerOf = (sock: Socket): ProxyHeader | null => byRelayPort.get(sock.remotePort ?? 0) ?? null;
  const inner: HttpServer = tls
    ? createHttpsServer({ cert: readFileSync(tls.cert), key: readFileSync(tls.key) })
    : createHttpServer();
  inner.on('request', (req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(headerOf(req.socket)));
  });
  inner.on('upgrade', (req, socket: Socket) => {
    socket.end(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${acceptOf(req.headers['sec-websocket-key'])}\r\nX-Proxy-Header: ${JSON.stringify(headerOf(socket))}\r\n\r\n`);
  });
  await new Promise<void>((r) => inner.listen(0, '127.0.0.1', r));
  const innerPort = (inner.address() as { port: number }).port;
  let conns = 0;
  const sockets = new Set<Socket>();
  const server: Server = createNetServer((sock) => {
    const conn = ++conns;
    sockets.add(sock);
    sock.on('close', () => sockets.delete(sock));
    sock.on('error', () => undefined);
    let buf = Buffer.alloc(0);
    const onData = (d: Buffer): void => {
      buf = Buffer.concat([buf, d]);
      const parsed = parseHeader(buf, conn);
      if (!parsed) return;
      sock.off('data', onData);
      sock.pause();
      const up = netConnect(innerPort, '127.0.0.1', () => {
        byRelayPort.set(up.localPort ?? 0, parsed.header);
        up.write(parsed.rest);
        sock.pipe(up);
        up.pipe(sock);
      });
      sockets.add(up);
      up.on('close', () => sock.destroy());
      sock.on('close', () => up.destroy());
      up.on('error', () => undefined);
    };
    sock.on('data', onData);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    close: () =>
      new Promise((r) => {
        for (const s of sockets) s.destroy();
        inner.closeAllConnections();
        inner.close();
        server.close(() => r());
      }),
  };
}

/** A self-signed certificate for the IP 127.0.0.1, so an https origin can be reached by address. */
async function ipCert(dir: string): Promise<{ cert: string; key: string }> {
  const cert = join(dir, 'origin-ip.crt');
  const key = join(dir, 'origin-ip.key');
  await promisify(execFile)('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
    '-keyout', key, '-out', cert, '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1',
  ]);
  return { cert, key };
}

function acceptOf(key: string | undefined): string {
  return createHash('sha1').update(`${key ?? ''}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
}

let root: ProxyRoot;
let proxy: Daemon;
let origin: PpOrigin;
let tlsOrigin: PpOrigin;

before(async () => {
  origin = await startPpOrigin();
  const cert = await ipCert(mkdtempSync(join(tmpdir(), 'hk-pp-')));
  tlsOrigin = await startPpOrigin(cert);
  root = await makeRoot({
    sites: {
      'tls.yaml': { id: 'tls', hostnames: ['tls.test'], origin: { url: `https://127.0.0.1:${tlsOrigin.port}` }, client_ip: { proxy_protocol: 'v2' } },
      'v1.yaml': { id: 'v1', hostnames: ['v1.test'], origin: { url: origin.url }, client_ip: { proxy_protocol: 'v1' } },
      'v2.yaml': { id: 'v2', hostnames: ['v2.test'], origin: { url: origin.url }, client_ip: { proxy_protocol: 'v2', trusted_proxies: ['127.0.0.1'] } },
      'transparent.yaml': { id: 'transparent', hostnames: ['transparent.test'], origin: { url: origin.url }, client_ip: { transparent: true, proxy_protocol: 'v1' } },
    },
  });
  // The proxy trusts the origin's self-signed certificate the way an operator would.
  proxy = await startProxy(root, { env: { NODE_EXTRA_CA_CERTS: cert.cert } });
});

after(async () => {
  await proxy?.stop('SIGKILL');
  await origin?.close();
  await tlsOrigin?.close();
});

async function seen(host: string, headers: Record<string, string> = {}): Promise<ProxyHeader> {
  const r = await request({ port: root.httpPort, host, path: '/', headers });
  assert.equal(r.status, 200, r.text);
  return JSON.parse(r.text) as ProxyHeader;
}

test('v1: the header names the client and the listener it reached', async () => {
  const h = await seen('v1.test');
  assert.deepEqual([h.version, h.family, h.src, h.dst, h.dstPort], [1, 'TCP4', '127.0.0.1', '127.0.0.1', root.httpPort]);
  assert.ok(h.srcPort > 0);
});

test('v2: the resolved client IP, and one origin connection per client', async () => {
  const a = await seen('v2.test', { 'x-forwarded-for': '203.0.113.9' });
  assert.deepEqual([a.version, a.family, a.src, a.dst, a.dstPort], [2, 'TCP4', '203.0.113.9', '127.0.0.1', root.httpPort]);
  const b = await seen('v2.test', { 'x-forwarded-for': '2001:db8::7' });
  assert.equal(b.family, 'TCP6');
  assert.equal(b.src, '2001:0db8:0000:0000:0000:0000:0000:0007');
  assert.equal(b.dst, '0000:0000:0000:0000:0000:ffff:7f00:0001');
  assert.notEqual(b.conn, a.conn, 'another client never reuses the first client\'s connection');
  const again = await seen('v2.test', { 'x-forwarded-for': '203.0.113.9' });
  assert.equal(again.conn, a.conn, 'the same client reuses its kept-alive connection');
});

test('a WebSocket handshake starts with the header too', async () => {
  const ws = await connectWs({ port: root.httpPort, host: 'v1.test' });
  const h = JSON.parse(ws.headers['x-proxy-header'] ?? 'null') as ProxyHeader;
  assert.deepEqual([h.version, h.src, h.dstPort], [1, '127.0.0.1', root.httpPort]);
  ws.socket.destroy();
});

test('transparent falls back to normal egress with one warning for the site', async () => {
  assert.equal((await seen('transparent.test')).src, '127.0.0.1');
  const warnings = proxy.output().match(/"site":"transparent".*client_ip.transparent is not available/g) ?? [];
  assert.equal(warnings.length, 1);
});

test('an https origin gets the header first, then TLS, on requests and tunnels', async () => {
  const h = await seen('tls.test');
  assert.deepEqual([h.version, h.src, h.dstPort], [2, '127.0.0.1', root.httpPort]);
  const ws = await connectWs({ port: root.httpPort, host: 'tls.test' });
  const t = JSON.parse(ws.headers['x-proxy-header'] ?? 'null') as ProxyHeader;
  assert.deepEqual([t.version, t.src], [2, '127.0.0.1']);
  ws.socket.destroy();
});

/**
 * Routing (spec/3 §2.7) and forwarding (§2.3) through the real proxy: exact names before the
 * longest wildcard, case, ports and trailing dots, IPv6 literals, 421/503, duplicate claims,
 * host_header, hop-by-hop headers both ways, streamed bodies both ways, 502 with backoff, and the
 * request events of the admin API.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import type { Daemon } from '../hostkit-process.ts';
import { connect } from 'node:net';
import { api, freePort, makeRoot, request, seenOf, servedBy, startOrigin, startProxy, until, type Origin, type ProxyRoot, withBrowserHeaders, BROWSER_HEADERS } from './harness.ts';

let root: ProxyRoot;
let proxy: Daemon;
const origins: Record<string, Origin> = {};
let downPort: number;

const get = (host: string | undefined, path = '/') => request({ port: root.httpPort, ...(host === undefined ? {} : { host }), path });
const port = (name: string): number => (origins[name] as Origin).port;

before(async () => {
  for (const name of ['exact', 'wide', 'deep', 'other', 'first', 'second']) origins[name] = await startOrigin();
  downPort = await freePort();
  root = await makeRoot({
    sites: {
      // Sorted file order decides duplicate claims: 10-first.yaml before 20-second.yaml.
      '10-first.yaml': { id: 'first', hostnames: ['dup.example'], origin: { url: origins['first']?.url } },
      '20-second.yaml': { id: 'second', hostnames: ['dup.example', 'second.example'], origin: { url: origins['second']?.url } },
      'exact.yaml': { id: 'exact', hostnames: ['www.shop.example', 'Mixed.Example'], origin: { url: origins['exact']?.url, host_header: 'internal.origin' } },
      'wide.yaml': { id: 'wide', hostnames: ['*.shop.example'], origin: { url: origins['wide']?.url } },
      'deep.yaml': { id: 'deep', hostnames: ['*.eu.shop.example'], origin: { url: origins['deep']?.url } },
      'other.yaml': { id: 'other', hostnames: ['other.example', '127.0.0.1'], origin: { url: origins['other']?.url } },
      'off.yaml': { id: 'off', enabled: false, hostnames: ['off.example', 'second.example'], origin: { url: origins['other']?.url } },
      'nows.yaml': { id: 'nows', hostnames: ['nows.example'], origin: { url: origins['other']?.url }, websockets: { enabled: false } },
      'down.yaml': { id: 'down', hostnames: ['down.example'], origin: { url: `http://127.0.0.1:${downPort}`, connect_timeout_ms: 500 } },
    },
  });
  proxy = await startProxy(root);
});

after(async () => {
  await proxy?.stop('SIGKILL');
  await Promise.all(Object.values(origins).map((o) => o.close()));
});

test('exact names first, then the longest wildcard suffix; wildcards skip the bare domain', async () => {
  assert.equal(servedBy(await get('www.shop.example')), port('exact'), 'exact beats *.shop.example');
  assert.equal(servedBy(await get('cart.shop.example')), port('wide'));
  assert.equal(servedBy(await get('a.b.c.shop.example')), port('wide'), 'any depth below the domain');
  assert.equal(servedBy(await get('x.eu.shop.example')), port('deep'), 'longest suffix wins');
  assert.equal(servedBy(await get('y.x.eu.shop.example')), port('deep'));
  assert.equal((await get('shop.example')).status, 421, 'the bare domain is not covered by *.shop.example');
  assert.equal(servedBy(await get('eu.shop.example')), port('wide'), 'eu.shop.example is below *.shop.example only');
});

test('case-insensitive; port and trailing dot stripped; an IPv4 literal routes only when listed', async () => {
  for (const host of ['WWW.Shop.Example', 'www.shop.example:8080', 'www.shop.example.', 'www.shop.example.:443', 'mixed.example']) {
    const r = await get(host);
    assert.equal(r.status, 200, host);
  }
  assert.equal(servedBy(await get('127.0.0.1:1234')), port('other'));
});

test('421 for unknown hosts and IPv6 literals; 503 for disabled sites; disabled sites claim nothing', async () => {
  for (const host of ['unknown.example', '[::1]', '[::1]:8080', '[2001:db8::1]']) assert.equal((await get(host)).status, 421, host);
  const off = await get('off.example');
  assert.equal(off.status, 503);
  assert.match(off.text, /503 Service Unavailable/);
  assert.equal(servedBy(await get('second.example')), port('second'), 'the enabled site keeps a name a disabled site also lists');
});

test('a hostname claimed twice: the first file in sorted order serves it and the skip is logged', async () => {
  assert.equal(servedBy(await get('dup.example')), port('first'));
  assert.match(proxy.output(), /"host":"dup.example","kept":"first".*"dropped_from":"second".*hostname claimed by two enabled sites/);
});

test('HTTP/1.0 without Host gets 421; an absolute-form target routes by its authority', async () => {
  const raw = await new Promise<string>((resolve, reject) => {
    const s = connect(root.httpPort, '127.0.0.1', () => s.end('GET / HTTP/1.0\r\n\r\n'));
    let out = '';
    s.on('data', (d: Buffer) => (out += d.toString()));
    s.on('end', () => resolve(out));
    s.on('error', reject);
  });
  assert.match(raw, /^HTTP\/1\.1 421/);
  const abs = await request({ port: root.httpPort, host: 'unknown.example', path: 'http://other.example/abs?q=1' });
  assert.equal(abs.status, 200);
  assert.equal(seenOf(abs).url, '/abs?q=1');
});

test('host_header replaces the client Host; without it the client Host (port included) goes through', async () => {
  assert.equal(seenOf(await get('www.shop.example:8080', '/p')).headers['host'], 'internal.origin');
  assert.equal(seenOf(await get('cart.shop.example:8080', '/p')).headers['host'], 'cart.shop.example:8080');
});

test('hop-by-hop headers are dropped both ways, end-to-end ones kept', async () => {
  const r = await request({
    port: root.httpPort,
    host: 'other.example',
    path: '/echo',
    headers: { connection: 'keep-alive, x-secret-hop', 'x-secret-hop': '1', 'keep-alive': 'timeout=1', te: 'trailers', 'proxy-connection': 'x', 'x-end-to-end': 'yes', upgrade: 'h2c' },
  });
  const seen = seenOf(r).headers;
  for (const h of ['x-secret-hop', 'keep-alive', 'te', 'proxy-connection', 'upgrade']) assert.equal(seen[h], undefined, h);
  assert.equal(seen['x-end-to-end'], 'yes');
  const h = await get('other.example', '/headers');
  assert.equal(h.status, 200);
  assert.equal(h.headers['x-hop'], undefined, 'a header the origin lists in Connection is dropped');
  assert.equal(h.headers['x-kept'], 'yes');
  assert.deepEqual(h.headers['set-cookie'], ['a=1', 'b=2'], 'repeated headers survive');
});

/** Sends raw request bytes on a fresh connection; resolves with the first line of the answer. */
function rawStatusLine(text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(root.httpPort, '127.0.0.1', () => s.write(text));
    let out = '';
    s.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('\r\n')) {
        s.destroy();
        resolve(out.slice(0, out.indexOf('\r\n')));
      }
    });
    s.on('error', reject);
  });
}

test('upgrades: h2c is served as a plain request; WebSocket handshakes go to the origin, or 403/421 before it', async () => {
  const h2c = await request({
    port: root.httpPort,
    host: 'other.example',
    path: '/h2c',
    headers: { connection: 'Upgrade, HTTP2-Settings', upgrade: 'h2c', 'http2-settings': 'AAMAAABkAARAAAAAAAIAAAAA' },
  });
  assert.equal(h2c.status, 200);
  assert.equal(seenOf(h2c).headers['upgrade'], undefined);
  assert.equal(seenOf(h2c).headers['http2-settings'], undefined);
  const ws = (host: string): string =>
    `GET /ws HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nUser-Agent: ${BROWSER_HEADERS['user-agent']}\r\nAccept-Language: en\r\nAccept-Encoding: gzip\r\n\r\n`;
  // The echo origin has no upgrade handler and answers 200: relayed as a plain response.
  assert.equal(await rawStatusLine(ws('other.example')), 'HTTP/1.1 200 OK');
  assert.equal(await rawStatusLine(ws('nows.example')), 'HTTP/1.1 403 Forbidden');
  assert.equal(await rawStatusLine(ws('nowhere.example')), 'HTTP/1.1 421 Misdirected Request');
  const events = (await api(root, 'GET', '/events/recent?site=nows&limit=1')).body.data.events;
  assert.equal(events[0].rule, 'websocket.disabled');
});

test('bodies stream both ways: 8 MiB up with Content-Length and chunked, 8 MiB down', async () => {
  const body = Buffer.alloc(8 * 1024 * 1024, 3);
  const sha = createHash('sha256').update(body).digest('hex');
  const up = await request({ port: root.httpPort, host: 'other.example', path: '/up', method: 'POST', body });
  assert.equal(up.status, 200);
  assert.equal(seenOf(up).bodyBytes, body.length);
  assert.equal(seenOf(up).bodySha256, sha);
  const chunked = await new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port: root.httpPort, path: '/up', method: 'PUT', headers: withBrowserHeaders({ host: 'other.example' }), agent: false });
    req.on('response', (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    for (let i = 0; i < 8; i++) req.write(body.subarray(i * 1024 * 1024, (i + 1) * 1024 * 1024));
    req.end();
  });
  assert.equal(chunked.status, 200);
  assert.equal(JSON.parse(chunked.text).headers['transfer-encoding'], 'chunked');
  assert.equal(JSON.parse(chunked.text).bodySha256, sha);
  const down = await get('other.example', `/bytes/${8 * 1024 * 1024}`);
  assert.equal(down.status, 200);
  assert.equal(down.body.length, 8 * 1024 * 1024);
});

test('origin down: 502 (origin.connect), then fast 502s during the backoff, then served again once it is up', async () => {
  const first = await get('down.example', '/x');
  assert.equal(first.status, 502);
  const second = await get('down.example', '/x');
  assert.equal(second.status, 502);
  const events = (await api(root, 'GET', '/events/recent?site=down&limit=2')).body.data.events as { rule: string; status: number }[];
  assert.deepEqual(events.map((e) => e.rule).sort(), ['origin.backoff', 'origin.connect']);
  assert.match(proxy.output(), /"origin":"http:\/\/127\.0\.0\.1:\d+","error":"ECONNREFUSED".*origin unreachable/, 'the failure is logged');
  const up = await startOrigin(downPort);
  try {
    await until('the origin is served again after the backoff', async () => (await get('down.example', '/y')).status === 200, 8_000);
  } finally {
    await up.close();
  }
  await until('the recovery is logged', () => /origin reachable again/.test(proxy.output()));
});

test('every request leaves an event with site, client IP, status, bytes, duration and rule', async () => {
  await get('www.shop.example', '/evented?secret=1');
  await get('nowhere.example', '/lost');
  const r = await api(root, 'GET', '/events/recent?site=exact&limit=1');
  const e = r.body.data.events[0];
  assert.equal(e.site, 'exact');
  assert.equal(e.path, '/evented', 'the query string is not recorded');
  assert.equal(e.client_ip, '127.0.0.1');
  assert.equal(e.method, 'GET');
  assert.equal(e.host, 'www.shop.example');
  assert.equal(e.status, 200);
  assert.ok(e.bytes_out > 0);
  assert.equal(typeof e.duration_ms, 'number');
  assert.equal(e.rule, null);
  assert.match(e.time, /^\d{4}-\d\d-\d\dT/);
  const unrouted = await api(root, 'GET', '/events/recent?site=-&limit=1');
  assert.deepEqual([unrouted.body.data.events[0].path, unrouted.body.data.events[0].status, unrouted.body.data.events[0].rule, unrouted.body.data.events[0].site], ['/lost', 421, 'route.no_match', null]);
});

/**
 * Sends raw request bytes on a fresh connection; resolves with everything answered until the proxy
 * closes it (the request says `Connection: close`, or is refused).
 */
function rawExchange(text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(root.httpPort, '127.0.0.1', () => s.write(text));
    let out = '';
    s.on('data', (d: Buffer) => (out += d.toString('latin1')));
    s.on('end', () => resolve(out));
    s.on('error', reject);
  });
}

const BROWSER_LINES = `User-Agent: ${BROWSER_HEADERS['user-agent']}\r\nAccept: */*\r\nAccept-Language: en\r\nAccept-Encoding: gzip\r\n`;

test('RFC 9112 section 3.2: HTTP/1.1 without Host and any request with two Hosts get 400 request.host, counted under site -', async () => {
  const heads = [
    // The own parser's requests, and node's (a chunked upload, a WebSocket handshake).
    'GET /no-host HTTP/1.1\r\n',
    'GET /two-hosts HTTP/1.1\r\nHost: other.example\r\nHost: www.shop.example\r\n',
    'POST /no-host-chunked HTTP/1.1\r\nTransfer-Encoding: chunked\r\n',
    'GET /two-hosts-ws HTTP/1.1\r\nHost: other.example\r\nhost: other.example\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n',
  ];
  for (const head of heads) {
    const body = head.startsWith('POST') ? '0\r\n\r\n' : '';
    const answer = await rawExchange(`${head}${BROWSER_LINES}Connection: close\r\n\r\n${body}`.replace('Connection: close\r\nConnection: Upgrade', 'Connection: Upgrade'));
    assert.match(answer, /^HTTP\/1\.1 400 Bad Request\r\n/, head);
    // The proxy's own answer (node's bare 400 has no body).
    assert.match(answer, /\r\n\r\n400 Bad Request\n$/, head);
  }
  // Events reach the main process in batches: wait until the last request's has arrived.
  const recent = async (): Promise<{ path: string; status: number; rule: string; site: null }[]> => (await api(root, 'GET', '/events/recent?site=-&limit=4')).body.data.events;
  await until('the events of the four requests', async () => (await recent())[0]?.path === '/two-hosts-ws');
  assert.deepEqual(
    (await recent()).map((e) => [e.path, e.status, e.rule, e.site]).reverse(),
    ['/no-host', '/two-hosts', '/no-host-chunked', '/two-hosts-ws'].map((p) => [p, 400, 'request.host', null]),
  );
  // The last two minutes: the four requests may straddle a minute boundary.
  const minutes = (await api(root, 'GET', '/stats/minutes?site=-&limit=2')).body.data.minutes as { rule_hits: Record<string, number> }[];
  assert.equal(minutes.reduce((n, m) => n + (m.rule_hits['request.host'] ?? 0), 0), 4);
});

test('OPTIONS * is routed by Host and asked of the origin in asterisk form; other methods may not use it', async () => {
  const answer = await rawExchange(`OPTIONS * HTTP/1.1\r\nHost: other.example\r\n${BROWSER_LINES}Connection: close\r\n\r\n`);
  assert.match(answer, /^HTTP\/1\.1 200 OK\r\n/);
  // The echo's JSON, inside the chunked framing the proxy relays it in.
  const seen = JSON.parse(/\{.*\}/s.exec(answer)?.[0] ?? '') as { method: string; url: string; port: number };
  assert.deepEqual([seen.method, seen.url, seen.port], ['OPTIONS', '*', port('other')]);
  assert.match(await rawExchange(`OPTIONS * HTTP/1.1\r\nHost: nowhere.example\r\n${BROWSER_LINES}Connection: close\r\n\r\n`), /^HTTP\/1\.1 421 /);
  // Only OPTIONS takes the asterisk form.
  assert.match(await rawExchange(`GET * HTTP/1.1\r\nHost: other.example\r\n${BROWSER_LINES}Connection: close\r\n\r\n`), /^HTTP\/1\.1 400 /);
});

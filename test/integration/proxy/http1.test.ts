/**
 * The data plane's own HTTP/1.1 server and origin client, byte for byte: raw client sockets
 * (pipelining, a client that reads nothing, requests handed to node's parser, malformed heads,
 * lingering after an unread body) and a raw origin that answers in every framing an origin may
 * use (chunked with extensions and trailers, close-delimited, 1xx before the answer, 204,
 * hop-by-hop headers, a kept-alive connection closed under a reused request, a malformed answer).
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { gunzipSync, gzipSync } from 'node:zlib';
import { Agent, request as httpRequest } from 'node:http';
import { connect, createServer, type Server, type Socket } from 'node:net';
import type { Daemon } from '../hostkit-process.ts';
import { api, makeRoot, startProxy, until, type ProxyRoot } from './harness.ts';

let root: ProxyRoot;
let proxy: Daemon;
let origin: Server;
// The same answers on a port of their own (site cut.test): its failures are logged apart from
// raw.test's, which are logged at most once a minute.
let cutOrigin: Server;
// Connections the origin accepted, and the paths whose connection it drops at the next request.
let originConnections = 0;
let originCloses = 0;
let bigAnswers = 0;
/** The body of /big?n=N: N, then padding to 8 KiB (the proxy writes head and body at once). */
const bigBody = (n: string): string => `n=${n};`.padEnd(8192, '.');
const HOST = 'raw.test';
/** What /gzipped answers, gzip-coded as a transfer coding. */
const GZIPPED = 'a body the origin sent gzip-coded';

/** Decodes a whole chunked body at the start of `buf`: the body and the bytes after it, or undefined. */
function dechunk(buf: Buffer): { body: Buffer; used: number } | undefined {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = buf.indexOf('\r\n', at);
    if (eol === -1) return undefined;
    const size = parseInt(buf.toString('latin1', at, eol), 16);
    if (size === 0) {
      const end = buf.indexOf('\r\n\r\n', eol);
      return end === -1 ? undefined : { body: Buffer.concat(parts), used: end + 4 };
    }
    if (buf.length < eol + 2 + size + 2) return undefined;
    parts.push(buf.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
}

/** Reads one request (head and body) from `buf`; undefined when it is not all there. */
function takeRequest(buf: Buffer): { head: string; body: Buffer; rest: Buffer } | undefined {
  const end = buf.indexOf('\r\n\r\n');
  if (end === -1) return undefined;
  const head = buf.toString('latin1', 0, end);
  if (/\r\ntransfer-encoding:[^\r]*chunked/i.test(head)) {
    const d = dechunk(buf.subarray(end + 4));
    return d && { head, body: d.body, rest: buf.subarray(end + 4 + d.used) };
  }
  const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
  if (buf.length < end + 4 + length) return undefined;
  return { head, body: buf.subarray(end + 4, end + 4 + length), rest: buf.subarray(end + 4 + length) };
}

/** Answers written as they are, by path. */
const CANNED: Readonly<Record<string, string>> = {
  '/early': 'HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok',
  // A Content-Length a 204 must not carry (RFC 9110 §8.6), and one a 304 may.
  '/nocontent': 'HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nX-Empty: 1\r\n\r\n',
  '/not-modified': 'HTTP/1.1 304 Not Modified\r\nContent-Length: 42\r\nETag: "x"\r\n\r\n',
  // Answers to WebSocket upgrades: accepted with a length a 1xx must not carry, refused gzip-coded.
  '/ws-length': 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nContent-Length: 0\r\n\r\n',
  '/ws-gzipped': 'HTTP/1.1 400 Bad Request\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n',
  '/hop': 'HTTP/1.1 200 OK\r\nConnection: x-private, keep-alive\r\nKeep-Alive: timeout=5\r\nX-Private: secret\r\nX-Kept: yes\r\nContent-Length: 2\r\n\r\nok',
  // Two different lengths: an answer a proxy must not pass on.
  '/bad': 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok',
  '/bare-lf': 'HTTP/1.1 200 OK\nContent-Length: 2\n\nok',
};

/** The origin's answers, by path. */
function answer(socket: Socket, head: string, body: Buffer, state: { dropNext: boolean }): void {
  const path = (head.split(' ')[1] ?? '/').replace(/\?.*/, '');
  if (state.dropNext) {
    // A kept-alive connection the origin gave up just as the proxy reused it.
    socket.destroy();
    return;
  }
  switch (path) {
    case '/chunked':
      socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n5;ext=1\r\nhel');
      setTimeout(() => socket.write('lo\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n'), 20);
      return;
    case '/close':
      socket.end('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nclose-delimited');
      return;
    case '/then-drop':
      state.dropNext = true;
      socket.write('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst');
      return;
    case '/gzipped': {
      const gz = gzipSync(GZIPPED);
      socket.write(Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n${gz.length.toString(16)}\r\n`), gz, Buffer.from('\r\n0\r\n\r\n')]));
      return;
    }
    case '/cut':
      // Half of the body it announces, then the connection closes.
      socket.write('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello');
      setTimeout(() => socket.destroy(), 50);
      return;
    case '/hang':
      // Never answers: the proxy's read timeout decides.
      return;
    case '/big': {
      bigAnswers++;
      const body = bigBody(/[?&]n=(\d+)/.exec(head)?.[1] ?? '');
      socket.write(`HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
      return;
    }
    default: {
      const canned = CANNED[path];
      if (canned !== undefined) {
        socket.write(canned);
        return;
      }
      const json = JSON.stringify({ head, length: body.length, sha: createHash('sha256').update(body).digest('hex') });
      socket.write(`HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(json)}\r\n\r\n${json}`);
    }
  }
}

before(async () => {
  const serve = (socket: Socket): void => {
    originConnections++;
    const state = { dropNext: false };
    let buf: Buffer = Buffer.alloc(0);
    socket.on('error', () => undefined);
    socket.on('close', () => originCloses++);
    socket.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      for (let r = takeRequest(buf); r; r = takeRequest(buf)) {
        buf = r.rest;
        answer(socket, r.head, r.body, state);
      }
    });
  };
  origin = createServer(serve);
  cutOrigin = createServer(serve);
  await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
  await new Promise<void>((r) => cutOrigin.listen(0, '127.0.0.1', r));
  const port = (origin.address() as { port: number }).port;
  const quiet = { bot: { enabled: false }, rate_limit: { enabled: false } };
  root = await makeRoot({
    sites: {
      'raw.yaml': { id: 'raw', hostnames: [HOST], origin: { url: `http://127.0.0.1:${port}`, read_timeout_ms: 700, keepalive_secs: 2 }, protection: quiet },
      'cut.yaml': { id: 'cut', hostnames: ['cut.test'], origin: { url: `http://127.0.0.1:${(cutOrigin.address() as { port: number }).port}` }, protection: quiet },
      'deny.yaml': { id: 'deny', hostnames: ['deny.test'], origin: { url: `http://127.0.0.1:${port}` }, protection: { ...quiet, acl: { whitelist: ['192.0.2.1'] } } },
    },
  });
  proxy = await startProxy(root);
});

after(async () => {
  await proxy?.stop('SIGKILL');
  await new Promise((r) => origin.close(r));
  await new Promise((r) => cutOrigin.close(r));
});

/** Writes `bytes` on a new connection and collects what comes back until `done` says enough. */
function exchange(bytes: string | Buffer, done: (text: string) => boolean, timeoutMs = 5000): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(root.httpPort, '127.0.0.1');
    let text = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no complete answer in time; got ${JSON.stringify(text)}`));
    }, timeoutMs);
    socket.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      if (done(text)) {
        clearTimeout(timer);
        socket.destroy();
        resolve(text);
      }
    });
    socket.on('error', reject);
    socket.write(bytes);
  });
}

/**
 * The complete responses in `text`, bodies decoded (Content-Length or chunked); `bodiless[i]`
 * says the i-th answers a HEAD.
 */
function responses(text: string, bodiless: boolean[] = []): { status: number; head: string; body: string; chunked: boolean }[] {
  const out: { status: number; head: string; body: string; chunked: boolean }[] = [];
  let rest = Buffer.from(text, 'latin1');
  for (;;) {
    const end = rest.indexOf('\r\n\r\n');
    if (end === -1) return out;
    const head = rest.toString('latin1', 0, end);
    const status = Number(head.split(' ')[1]);
    const chunked = /\r\ntransfer-encoding:[^\r]*chunked/i.test(head);
    let body: Buffer;
    if (chunked && !bodiless[out.length]) {
      const d = dechunk(rest.subarray(end + 4));
      if (!d) return out;
      body = d.body;
      rest = rest.subarray(end + 4 + d.used);
    } else {
      const length = /\r\ncontent-length: *(\d+)/i.exec(head);
      const n = bodiless[out.length] || status === 204 || status === 304 || !length ? 0 : Number(length[1]);
      if (rest.length < end + 4 + n) return out;
      body = rest.subarray(end + 4, end + 4 + n);
      rest = rest.subarray(end + 4 + n);
    }
    out.push({ status, head, body: body.toString('latin1'), chunked });
  }
}

const get = (path: string, extra = ''): string => `GET ${path} HTTP/1.1\r\nHost: ${HOST}\r\n${extra}\r\n`;

test('pipelined requests are answered in order on one connection; HEAD keeps its length and sends no body', async () => {
  const bodiless = [false, true, false];
  const text = await exchange(get('/echo?n=1') + `HEAD /echo?n=2 HTTP/1.1\r\nHost: ${HOST}\r\n\r\n` + get('/echo?n=3'), (t) => responses(t, bodiless).length >= 3);
  const [a, b, c] = responses(text, bodiless);
  assert.match(JSON.parse(a?.body ?? '{}').head, /^GET \/echo\?n=1 /);
  assert.equal(b?.status, 200);
  assert.match(b?.head ?? '', /\r\ncontent-length: \d+/i);
  assert.equal(b?.body, '');
  assert.match(JSON.parse(c?.body ?? '{}').head, /^GET \/echo\?n=3 /);
});

test('origin framings: chunked (extensions, trailers) and close-delimited bodies reach the client whole; 1xx skipped; 204 bodiless', async () => {
  const text = await exchange(get('/chunked') + get('/close') + get('/early') + get('/nocontent'), (t) => responses(t).length >= 4);
  const [chunked, closed, early, empty] = responses(text);
  assert.equal(chunked?.body, 'hello world');
  assert.doesNotMatch(text, /x-trailer/i);
  assert.equal(closed?.status, 200);
  assert.equal(closed?.chunked, true, 'a close-delimited body goes out chunked, so the client connection stays open');
  assert.equal(closed?.body, 'close-delimited');
  assert.equal(early?.status, 200);
  assert.equal(early?.body, 'ok');
  assert.doesNotMatch(text, /103 Early/);
  assert.equal(empty?.status, 204);
  assert.match(empty?.head ?? '', /x-empty: 1/i);
});

test('transfer codings besides chunked keep their label both ways; a 204 carries no Content-Length, a 304 keeps its own', async () => {
  // The transfer codings of a head, all its Transfer-Encoding lines together.
  const codings = (head: string): string[] => [...head.matchAll(/\r\ntransfer-encoding:([^\r]*)/gi)].flatMap((m) => (m[1] as string).split(',').map((c) => c.trim()));
  // The own server's answers, then node's (a chunked upload hands the connection to it).
  const toNode = `POST /echo HTTP/1.1\r\nHost: ${HOST}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`;
  for (const first of ['', toNode]) {
    const skip = first === '' ? 0 : 1;
    const text = await exchange(first + get('/gzipped') + get('/nocontent') + get('/not-modified'), (t) => responses(t).length >= skip + 3);
    const [gz, empty, notModified] = responses(text).slice(skip);
    assert.deepEqual(codings(gz?.head ?? ''), ['gzip', 'chunked'], gz?.head);
    assert.equal(gunzipSync(Buffer.from(gz?.body ?? '', 'latin1')).toString(), GZIPPED);
    assert.equal(empty?.status, 204);
    assert.doesNotMatch(empty?.head ?? '', /content-length|transfer-encoding/i);
    assert.match(notModified?.head ?? '', /\r\ncontent-length: 42\r\n/i);
  }
  // HTTP/1.0 knows no chunked: the coded body comes up to the close, even to a client that asked for keep-alive.
  const old = await new Promise<Buffer>((resolve, reject) => {
    const socket = connect(root.httpPort, '127.0.0.1', () => socket.write(`GET /gzipped HTTP/1.0\r\nHost: ${HOST}\r\nConnection: keep-alive\r\nTE: chunked\r\n\r\n`));
    const got: Buffer[] = [];
    socket.on('data', (d: Buffer) => got.push(d));
    socket.on('close', () => resolve(Buffer.concat(got)));
    socket.on('error', reject);
    socket.setTimeout(3000, () => reject(new Error('the connection stayed open')));
  });
  const end = old.indexOf('\r\n\r\n');
  assert.deepEqual(codings(old.toString('latin1', 0, end)), ['gzip']);
  assert.equal(gunzipSync(old.subarray(end + 4)).toString(), GZIPPED);
  const body = gzipSync('an upload, gzip-coded');
  const upload = Buffer.concat([Buffer.from(`POST /echo HTTP/1.1\r\nHost: ${HOST}\r\nTransfer-Encoding: gzip, chunked\r\n\r\n${body.length.toString(16)}\r\n`), body, Buffer.from('\r\n0\r\n\r\n')]);
  const [r] = responses(await exchange(upload, (t) => responses(t).length >= 1));
  const seen = JSON.parse(r?.body ?? '{}') as { head: string; sha: string };
  assert.deepEqual(codings(seen.head), ['gzip', 'chunked'], seen.head);
  assert.equal(seen.sha, createHash('sha256').update(body).digest('hex'));
});

test('answers to WebSocket upgrades: a 101 or 204 carries no Content-Length, a refusal keeps its transfer codings', async () => {
  const upgrade = (path: string): string => get(path, 'Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n');
  const switched = await exchange(upgrade('/ws-length'), (t) => t.includes('\r\n\r\n'));
  assert.match(switched, /^HTTP\/1\.1 101 /);
  assert.doesNotMatch(switched, /content-length/i);
  const [empty] = responses(await exchange(upgrade('/nocontent'), (t) => responses(t).length >= 1));
  assert.equal(empty?.status, 204);
  assert.doesNotMatch(empty?.head ?? '', /content-length/i);
  const [refused] = responses(await exchange(upgrade('/ws-gzipped'), (t) => responses(t).length >= 1));
  assert.equal(refused?.status, 400);
  assert.match(refused?.head ?? '', /\r\ntransfer-encoding: gzip, chunked\r\n/i);
  assert.equal(refused?.body, 'hello');
});

test('an upgrade or CONNECT pipelined behind a request still being answered waits its turn, and the worker lives on', async () => {
  const upload = `POST /echo?first HTTP/1.1\r\nHost: ${HOST}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`;
  const upgrade = get('/ws-length', 'Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n');
  for (const [then, status] of [[`CONNECT ${HOST}:443 HTTP/1.1\r\nHost: ${HOST}:443\r\n\r\n`, 405], [upgrade, 101]] as const) {
    const [first, second] = responses(await exchange(upload + then, (t) => responses(t).length >= 2));
    assert.match(JSON.parse(first?.body ?? '{}').head, /^POST \/echo\?first /);
    assert.equal(second?.status, status);
  }
  assert.equal(responses(await exchange(get('/echo?alive'), (t) => responses(t).length >= 1))[0]?.status, 200);
});

test('hop-by-hop and Connection-listed response headers are consumed; end-to-end ones kept', async () => {
  const [r] = responses(await exchange(get('/hop'), (t) => responses(t).length >= 1));
  assert.match(r?.head ?? '', /\r\nx-kept: yes/i);
  assert.doesNotMatch(r?.head ?? '', /x-private|keep-alive: timeout/i);
});

test('kept-alive origin connections are reused; a GET the origin drops on a reused connection is retried once on a new one', async () => {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const fetch = (path: string): Promise<{ status: number; body: string }> =>
    new Promise((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port: root.httpPort, path, headers: { host: HOST }, agent }, (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      req.end();
    });
  const before = originConnections;
  for (let i = 0; i < 20; i++) assert.equal((await fetch(`/echo?i=${i}`)).status, 200);
  assert.ok(originConnections - before <= 1, 'at most one new origin connection for 20 sequential requests');
  const beforeDrop = originConnections;
  assert.deepEqual(await fetch('/then-drop'), { status: 200, body: 'first' });
  const retried = await fetch('/echo?after-drop');
  assert.equal(retried.status, 200);
  assert.equal(originConnections - beforeDrop, 1, 'the dropped connection was replaced once');
  agent.destroy();
});

test('a malformed origin answer is a 502, one with bare LF line ends at once rather than at read_timeout_ms', async () => {
  const [r] = responses(await exchange(get('/bad'), (t) => responses(t).length >= 1));
  assert.equal(r?.status, 502);
  const [lf] = responses(await exchange(get('/bare-lf'), (t) => responses(t).length >= 1));
  assert.equal(lf?.status, 502);
  // Refused as malformed (origin.error), not waited out until read_timeout_ms (origin.timeout).
  await until('the event', async () => ((await api(root, 'GET', '/events/recent?site=raw&limit=20')).body.data.events as { path: string }[]).some((e) => e.path === '/bare-lf'));
  const events = (await api(root, 'GET', '/events/recent?site=raw&limit=20')).body.data.events as { path: string; rule: string | null }[];
  assert.equal(events.find((e) => e.path === '/bare-lf')?.rule, 'origin.error');
});

test('requests outside the fast path go to node: a chunked upload, then a plain request on the same connection', async () => {
  const upload = `POST /echo HTTP/1.1\r\nHost: ${HOST}\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n`;
  const [a, b] = responses(await exchange(upload + get('/echo?next'), (t) => responses(t).length >= 2));
  const seen = JSON.parse(a?.body ?? '{}') as { length: number; sha: string };
  assert.equal(seen.length, 7);
  assert.equal(seen.sha, createHash('sha256').update('abcdefg').digest('hex'));
  assert.match(JSON.parse(b?.body ?? '{}').head, /^GET \/echo\?next /);
});

test("node's parser answers malformed heads: 400 for a bad header line or bare LF line ends (whole or in pieces), 431 for an oversized head", async () => {
  const bad = await exchange(`GET / HTTP/1.1\r\nHost: ${HOST}\r\nBad Header\r\n\r\n`, (t) => t.includes('\r\n\r\n'));
  assert.match(bad, /^HTTP\/1\.1 400 /);
  // Without a CRLF CRLF the head never ended for the own parser: the client waited a minute.
  assert.match(await exchange(`GET / HTTP/1.1\nHost: ${HOST}\n\n`, (t) => t.includes('\r\n\r\n'), 2000), /^HTTP\/1\.1 400 /);
  const pieces = await new Promise<string>((resolve, reject) => {
    const socket = connect(root.httpPort, '127.0.0.1', () => {
      socket.write(`GET / HTTP/1.1\r\nHost: ${HOST}\r\n`);
      setTimeout(() => socket.write('X-Late: 1\n\n'), 50);
    });
    let got = '';
    socket.on('data', (d: Buffer) => {
      got += d.toString('latin1');
      if (got.includes('\r\n\r\n')) {
        socket.destroy();
        resolve(got);
      }
    });
    socket.setTimeout(2000, () => reject(new Error(`no answer: ${JSON.stringify(got)}`)));
    socket.on('error', reject);
  });
  assert.match(pieces, /^HTTP\/1\.1 400 /);
  const big = await exchange(`GET / HTTP/1.1\r\nHost: ${HOST}\r\nX-Big: ${'a'.repeat(100_000)}\r\n\r\n`, (t) => t.includes('\r\n\r\n'));
  assert.match(big, /^HTTP\/1\.1 431 /);
});

test('an unread body after an early answer is read and dropped, and the connection serves the next request', async () => {
  const body = 'x'.repeat(100_000);
  // An unknown host is refused (421) before anything reads the body.
  const refused = `POST /echo HTTP/1.1\r\nHost: nowhere.test\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
  const [a, b] = responses(await exchange(refused + get('/echo?after'), (t) => responses(t).length >= 2));
  assert.equal(a?.status, 421);
  assert.match(JSON.parse(b?.body ?? '{}').head, /^GET \/echo\?after /);
});

test('a Content-Length body reaches the origin byte for byte', async () => {
  const body = Buffer.alloc(1024 * 1024);
  for (let i = 0; i < body.length; i++) body[i] = (i * 7) % 251;
  const head = `POST /echo HTTP/1.1\r\nHost: ${HOST}\r\nContent-Length: ${body.length}\r\n\r\n`;
  const [r] = responses(await exchange(Buffer.concat([Buffer.from(head), body]), (t) => responses(t).length >= 1));
  const seen = JSON.parse(r?.body ?? '{}') as { length: number; sha: string; head: string };
  assert.equal(seen.length, body.length);
  assert.equal(seen.sha, createHash('sha256').update(body).digest('hex'));
  assert.match(seen.head, new RegExp(`\\r\\ncontent-length: ${body.length}`, 'i'));
});

test('timeouts: an origin that does not answer is a 502 after read_timeout_ms; idle connections close on both sides', async () => {
  const started = performance.now();
  const [r] = responses(await exchange(get('/hang'), (t) => responses(t).length >= 1));
  const took = performance.now() - started;
  assert.equal(r?.status, 502);
  assert.ok(took >= 650 && took < 3000, `502 after ${Math.round(took)} ms`);

  // An origin connection idle for keepalive_secs (2 s) is closed by the proxy.
  await exchange(get('/echo?idle'), (t) => responses(t).length >= 1);
  const closes = originCloses;
  await new Promise((r) => setTimeout(r, 2600));
  assert.ok(originCloses > closes, 'the idle origin connection was closed');

  // A client connection idle for 5 s after its answer is closed by the proxy.
  const closedAfter = await new Promise<number>((resolve, reject) => {
    const socket = connect(root.httpPort, '127.0.0.1');
    let answeredAt = 0;
    socket.on('data', () => (answeredAt ||= performance.now()));
    socket.on('close', () => resolve(performance.now() - answeredAt));
    socket.on('error', reject);
    socket.write(get('/echo?keepalive'));
  });
  assert.ok(closedAfter >= 4500 && closedAfter < 7000, `closed ${Math.round(closedAfter)} ms after the answer`);
});

test('an upload the client pauses for longer than read_timeout_ms is not blamed on the origin: it goes through whole on both servers', async () => {
  const send = (first: string, second: string): Promise<{ status: number; body: string } | undefined> =>
    new Promise((resolve, reject) => {
      const socket = connect(root.httpPort, '127.0.0.1');
      let text = '';
      socket.on('data', (d: Buffer) => {
        text += d.toString('latin1');
        const [r] = responses(text);
        if (r === undefined) return;
        socket.destroy();
        resolve(r);
      });
      socket.on('error', reject);
      socket.write(first);
      // Twice the site's read_timeout_ms (700 ms) with nothing sent.
      setTimeout(() => socket.write(second), 1400);
    });
  const fast = await send(`POST /echo HTTP/1.1\r\nHost: ${HOST}\r\nContent-Length: 10\r\n\r\n12345`, '67890');
  assert.equal(fast?.status, 200, 'the own server: not a 502 origin.timeout while the client paused');
  assert.equal((JSON.parse(fast.body) as { length: number }).length, 10);
  const chunked = await send(`POST /echo HTTP/1.1\r\nHost: ${HOST}\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n12345\r\n`, '5\r\n67890\r\n0\r\n\r\n');
  assert.equal(chunked?.status, 200, "node's server: not a 502 origin.timeout while the client paused");
  assert.equal((JSON.parse(chunked.body) as { length: number }).length, 10);
});

test('a client that half-closes after its requests still gets every answer, then the connection ends', async () => {
  const text = await new Promise<string>((resolve, reject) => {
    const socket = connect(root.httpPort, '127.0.0.1', () => socket.end(get('/echo?a') + get('/chunked')));
    let got = '';
    socket.on('data', (d: Buffer) => (got += d.toString('latin1')));
    socket.on('close', () => resolve(got));
    socket.on('error', reject);
  });
  const [a, b] = responses(text);
  assert.match(JSON.parse(a?.body ?? '{}').head, /^GET \/echo\?a /);
  assert.equal(b?.body, 'hello world');
});

test('a half-closing client of a request handed to node (HTTP/1.0, chunked upload, Expect) still gets its answer, also pipelined after a plain request', async () => {
  const halfClosed = (bytes: string): Promise<string> =>
    new Promise((resolve, reject) => {
      const socket = connect(root.httpPort, '127.0.0.1', () => socket.end(bytes));
      let got = '';
      socket.on('data', (d: Buffer) => (got += d.toString('latin1')));
      socket.on('close', () => resolve(got));
      socket.on('error', reject);
    });
  // After a plain request the client's end is read while the own server still answers it: the
  // hand-off to node comes after the end.
  for (const first of ['', get('/echo?first')]) {
    const answers = async (bytes: string): Promise<{ head: string; length: number }> => {
      // A 100 Continue comes before the answer to the Expect request.
      const all = responses(await halfClosed(first + bytes)).filter((r) => r.status >= 200);
      assert.equal(all.length, first === '' ? 1 : 2, `answers to ${JSON.stringify(first + bytes)}`);
      return JSON.parse(all.at(-1)?.body ?? '{}');
    };
    assert.match((await answers(`GET /echo?v10 HTTP/1.0\r\nHost: ${HOST}\r\n\r\n`)).head, /^GET \/echo\?v10 /);
    assert.equal((await answers(`POST /echo?up HTTP/1.1\r\nHost: ${HOST}\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n`)).length, 3);
    assert.equal((await answers(`POST /echo?expect HTTP/1.1\r\nHost: ${HOST}\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok`)).length, 2);
  }
});

/** Writes `bytes` on a new connection and resolves with all that comes back once the proxy closes it. */
function untilClosed(bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(root.httpPort, '127.0.0.1', () => socket.write(bytes));
    let got = '';
    socket.on('data', (d: Buffer) => (got += d.toString('latin1')));
    socket.on('close', () => resolve(got));
    socket.on('error', reject);
    socket.setTimeout(3000, () => reject(new Error(`the connection stayed open; got ${JSON.stringify(got)}`)));
  });
}

test('Expect: 100-continue gets 100 Continue only once every check passed; a refusal comes without it and closes the connection', async () => {
  const expect = (host: string, length: number): string => `POST /echo HTTP/1.1\r\nHost: ${host}\r\nExpect: 100-continue\r\nContent-Length: ${length}\r\n\r\n`;
  // Over max_body_bytes (16 MiB), an unknown Host, a client the site's ACL refuses.
  for (const [host, length, status] of [[HOST, 20_000_000, 413], ['nowhere.test', 20, 421], ['deny.test', 20, 403]] as const) {
    const text = await untilClosed(expect(host, length));
    assert.doesNotMatch(text, /100 Continue/, `${host}: no body was to be sent`);
    assert.match(text, new RegExp(`^HTTP/1\\.1 ${status} `), host);
  }
  // Allowed: the client waits for the 100 before it sends its body.
  const text = await new Promise<string>((resolve, reject) => {
    const socket = connect(root.httpPort, '127.0.0.1', () => socket.write(expect(HOST, 2)));
    let got = '';
    socket.on('data', (d: Buffer) => {
      if (got === '' && d.toString('latin1').startsWith('HTTP/1.1 100 Continue\r\n\r\n')) socket.write('ok');
      got += d.toString('latin1');
      if (responses(got).some((r) => r.status === 200)) {
        socket.destroy();
        resolve(got);
      }
    });
    socket.on('error', reject);
    socket.setTimeout(3000, () => reject(new Error(`no answer: ${JSON.stringify(got)}`)));
  });
  const [cont, ok] = responses(text);
  assert.equal(cont?.status, 100);
  assert.equal(JSON.parse(ok?.body ?? '{}').length, 2);
});

test('a request that closes its connection (HTTP/1.0, Connection: close) is answered when more requests follow it; the rest is dropped', async () => {
  const follow = get('/echo?second');
  for (const first of [`GET /echo?v10 HTTP/1.0\r\nHost: ${HOST}\r\n\r\n`, `POST /echo?close HTTP/1.1\r\nHost: ${HOST}\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n`]) {
    const answers = responses(await untilClosed(first + follow));
    assert.equal(answers.length, 1, JSON.stringify(answers));
    assert.equal(answers[0]?.status, 200);
    assert.match(JSON.parse(answers[0]?.body ?? '{}').head, /^(GET \/echo\?v10|POST \/echo\?close) /);
  }
});

test('an origin that closes part-way through its body: the client sees a cut answer and the log says origin request failed', async () => {
  const text = await untilClosed(`GET /cut HTTP/1.1\r\nHost: cut.test\r\n\r\n`);
  assert.match(text, /^HTTP\/1\.1 200 [^]*\r\n\r\nhello$/);
  await proxy.waitFor(/"error":"ORIGIN_CLOSED".*origin request failed: the client got a cut response/, 3000);
});

test('a head sent a byte at a time is served (incrementally parsed, not rescanned)', async () => {
  const text = await new Promise<string>((resolve, reject) => {
    const socket = connect(root.httpPort, '127.0.0.1');
    const bytes = Buffer.from(get('/echo?slow', `X-Pad: ${'p'.repeat(2000)}\r\n`));
    let i = 0;
    let got = '';
    const timer = setInterval(() => {
      // Several bytes per tick keeps the test short; each write is its own read on the proxy side.
      for (let k = 0; k < 16 && i < bytes.length; k++) socket.write(bytes.subarray(i, ++i));
      if (i >= bytes.length) clearInterval(timer);
    }, 1);
    socket.setNoDelay(true);
    socket.on('data', (d: Buffer) => {
      got += d.toString('latin1');
      if (responses(got).length >= 1) {
        socket.destroy();
        resolve(got);
      }
    });
    socket.on('error', reject);
  });
  assert.match(JSON.parse(responses(text)[0]?.body ?? '{}').head, /^GET \/echo\?slow /);
});

test('connections whose reads interleave keep every byte they buffer: split heads, bodies in pieces, pipelined requests', { timeout: 20_000 }, async () => {
  // Client reads land in one buffer the worker shares (net's onread); what a connection keeps
  // past a read must be its own copy. Twelve connections write their next piece in turn, each
  // piece its own read, so every kept byte would be overwritten by other connections' reads.
  const conns = 12;
  const scripts = Array.from({ length: conns }, (_, c) => {
    const body = Buffer.alloc(3000 + c * 97, `body-${c}-`);
    const post = Buffer.from(`POST /echo?c=${c} HTTP/1.1\r\nHost: ${HOST}\r\nContent-Length: ${body.length}\r\n\r\n`);
    const bytes = Buffer.concat([post, body, Buffer.from(get(`/echo?after=${c}`) + get(`/echo?last=${c}`))]);
    const pieces: Buffer[] = [];
    for (let at = 0; at < bytes.length; at += 700) pieces.push(bytes.subarray(at, at + 700));
    return { body, pieces };
  });
  const sockets = scripts.map(() => connect(root.httpPort, '127.0.0.1'));
  const texts = sockets.map(() => '');
  const done = Promise.all(
    sockets.map(
      (socket, c) =>
        new Promise<void>((resolve, reject) => {
          socket.setNoDelay(true);
          socket.on('error', reject);
          socket.on('data', (d: Buffer) => {
            texts[c] += d.toString('latin1');
            if (responses(texts[c] as string).length >= 3) resolve();
          });
        }),
    ),
  );
  await Promise.all(sockets.map((s) => new Promise((r) => s.once('connect', r))));
  const rounds = Math.max(...scripts.map((s) => s.pieces.length));
  for (let i = 0; i < rounds; i++) {
    for (const [c, s] of scripts.entries()) {
      const piece = s.pieces[i];
      if (piece) sockets[c]?.write(piece);
    }
    await new Promise((r) => setTimeout(r, 5));
  }
  await done;
  for (const [c, s] of scripts.entries()) {
    const [post, after, last] = responses(texts[c] as string).map((r) => JSON.parse(r.body) as { head: string; sha: string; length: number });
    sockets[c]?.destroy();
    assert.equal(post?.length, s.body.length, `connection ${c}: body length`);
    assert.equal(post?.sha, createHash('sha256').update(s.body).digest('hex'), `connection ${c}: body bytes`);
    assert.match(post?.head ?? '', new RegExp(`^POST /echo\\?c=${c} `));
    assert.match(after?.head ?? '', new RegExp(`^GET /echo\\?after=${c} `));
    assert.match(last?.head ?? '', new RegExp(`^GET /echo\\?last=${c} `));
  }
});

test('a client that pipelines requests and reads nothing holds the proxy back; then every answer arrives whole and in order', { timeout: 30_000 }, async () => {
  // 2,000 answers of 8 KiB are more than the sockets' buffers hold: the proxy's writes stop
  // completing at once, it must stop taking requests, and every byte must still come out in order.
  const count = 2000;
  bigAnswers = 0;
  const socket = connect(root.httpPort, '127.0.0.1');
  await new Promise((r) => socket.once('connect', r));
  socket.pause();
  socket.write(Array.from({ length: count }, (_, i) => get(`/big?n=${i}`)).join(''));
  // Once the buffers are full the origin sees no more requests: wait for 300 ms without one.
  let answeredUnread = -1;
  for (const deadline = Date.now() + 10_000; bigAnswers !== answeredUnread && Date.now() < deadline; ) {
    answeredUnread = bigAnswers;
    await new Promise((r) => setTimeout(r, 300));
  }
  assert.equal(bigAnswers, answeredUnread, 'the proxy kept forwarding requests while nothing was read');
  assert.ok(answeredUnread < count, `the origin answered ${answeredUnread} of ${count} requests while the client read nothing`);
  const got: Buffer[] = [];
  let size = 0;
  await new Promise<void>((resolve, reject) => {
    socket.on('data', (d: Buffer) => {
      got.push(d);
      size += d.length;
      // Bodies alone are count * 8 KiB: parse only once that much is in.
      if (size >= count * 8192 && responses(Buffer.concat(got).toString('latin1')).length >= count) resolve();
    });
    socket.on('error', reject);
    socket.resume();
  });
  socket.destroy();
  const answers = responses(Buffer.concat(got).toString('latin1'));
  assert.equal(answers.length, count);
  for (const [i, a] of answers.entries()) {
    assert.equal(a.status, 200);
    assert.equal(a.body, bigBody(String(i)), `answer ${i}`);
  }
});

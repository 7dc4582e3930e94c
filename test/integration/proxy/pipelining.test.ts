/**
 * Requests pipelined on one client connection reach the origin only when their answer can reach
 * the client: never behind an answer that closes the connection (HTTP/1.0 without keep-alive or
 * without a length, `Connection: close`, a refusal, a client gone), never ahead of their turn,
 * and never behind an HTTP/1.0 request with Transfer-Encoding, whose framing is faulty (RFC 9112
 * §6.1: a 400, and the connection closes). The origin records every request it receives; each
 * test checks that list exactly, on both of the proxy's HTTP paths (its own server, which hands
 * such requests to node's, and node's server after a plain request on the same connection).
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import type { Daemon } from '../hostkit-process.ts';
import { api, makeCert, makeRoot, startOrigin, startProxy, until, type Origin, type ProxyRoot } from './harness.ts';

let root: ProxyRoot;
let proxy: Daemon;
let origin: Origin;
let pem: string;
const HOST = 'pipe.test';

before(async () => {
  origin = await startOrigin();
  root = await makeRoot();
  pem = (await makeCert(root.dir, 'pipe', [HOST])).pem;
  root.writeSite('pipe.yaml', {
    id: 'pipe',
    hostnames: [HOST],
    origin: { url: origin.url },
    tls: { enabled: true, cert_path: 'pipe.crt', key_path: 'pipe.key', redirect_http_to_https: false },
    protection: { bot: { enabled: false }, rate_limit: { enabled: false } },
  });
  proxy = await startProxy(root);
});

after(async () => {
  await proxy?.stop('SIGKILL');
  await origin?.close();
});

/** Sends `bytes` in one write (over TLS with `tls`) and collects everything until the proxy closes the connection. */
function untilClosed(bytes: string, opts: { closeAfterMs?: number; reset?: boolean; tls?: boolean } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const write = (): boolean => socket.write(bytes);
    // Over TLS the reset goes out on the TCP connection below it.
    const tcp = connect(opts.tls ? root.httpsPort : root.httpPort, '127.0.0.1', opts.tls ? undefined : write);
    const socket: Socket = opts.tls ? tlsConnect({ socket: tcp, servername: HOST, ca: pem }, write) : tcp;
    let got = '';
    socket.on('data', (d: Buffer) => (got += d.toString('latin1')));
    socket.on('close', () => resolve(got));
    socket.on('error', reject);
    if (opts.closeAfterMs !== undefined) setTimeout(() => (opts.reset ? tcp.resetAndDestroy() : socket.destroy()), opts.closeAfterMs);
    socket.setTimeout(5000, () => reject(new Error(`the connection stayed open; got ${JSON.stringify(got)}`)));
  });
}

/** The status lines of the final answers in `text` (100 Continue left out). */
const statuses = (text: string): number[] => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1])).filter((s) => s >= 200);

/**
 * What the origin received while `run` ran, as `METHOD url` (plus `+N` for a body of N bytes),
 * after a pause long enough for any late request to arrive.
 */
async function received(run: () => Promise<unknown>): Promise<string[]> {
  const from = origin.seen.length;
  await run();
  await new Promise((r) => setTimeout(r, 400));
  return origin.seen.slice(from).map((r) => `${r.method} ${r.url}${r.bodyBytes > 0 ? ` +${r.bodyBytes}` : ''}`);
}

const plain = `GET /first HTTP/1.1\r\nHost: ${HOST}\r\n\r\n`;
const behind = `GET /b HTTP/1.1\r\nHost: ${HOST}\r\n\r\n`;
// Both paths: the request first on its connection (the own server hands it to node's at once),
// and behind a plain request the own server answered first.
const PATHS = [
  { name: 'first on its connection', before: '', answers: [] as number[], seen: [] as string[] },
  { name: 'behind a plain request', before: plain, answers: [200], seen: ['GET /first'] },
];

test('an HTTP/1.0 request with Transfer-Encoding is a 400 that closes the connection; nothing behind it reaches the origin', async () => {
  const shapes = [
    `POST /a HTTP/1.0\r\nHost: ${HOST}\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
    `POST /a HTTP/1.0\r\nHost: ${HOST}\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n`,
    `GET /a HTTP/1.0\r\nHost: ${HOST}\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
  ];
  for (const path of PATHS) {
    for (const shape of shapes) {
      let text = '';
      const seen = await received(async () => (text = await untilClosed(path.before + shape + behind)));
      assert.deepEqual(statuses(text), [...path.answers, 400], `${path.name}: ${JSON.stringify(shape)} got ${JSON.stringify(text)}`);
      assert.match(text, /\r\nconnection: close\r\n/i);
      assert.deepEqual(seen, path.seen, `${path.name}: ${JSON.stringify(shape)}`);
    }
  }
  const events = (await api(root, 'GET', '/events/recent?limit=1000')).body.data.events as { path: string; status: number; rule: string | null }[];
  assert.ok(events.some((e) => e.path === '/a' && e.status === 400 && e.rule === 'request.framing'), 'the refusal names its rule');
});

test('behind an HTTP/1.0 keep-alive request whose answer has no length (so it closes), nothing more reaches the origin', async () => {
  for (const path of PATHS) {
    let text = '';
    const seen = await received(async () => {
      text = await untilClosed(`${path.before}GET /bytes/5 HTTP/1.0\r\nHost: ${HOST}\r\nConnection: keep-alive\r\n\r\nPOST /b HTTP/1.1\r\nHost: ${HOST}\r\nContent-Length: 6\r\n\r\ncharge`);
    });
    assert.deepEqual(statuses(text), [...path.answers, 200], path.name);
    assert.match(text, /\r\n\r\n\x07{5}$/, `${path.name}: the 1.0 answer ends with the close`);
    assert.deepEqual(seen, [...path.seen, 'GET /bytes/5'], `${path.name}: the POST never ran`);
  }
});

test('requests that close their connection (HTTP/1.0 without keep-alive, Connection: close on a chunked upload): what follows never reaches the origin', async () => {
  const firsts = [
    [`GET /v10 HTTP/1.0\r\nHost: ${HOST}\r\n\r\n`, 'GET /v10'],
    [`POST /close HTTP/1.1\r\nHost: ${HOST}\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n`, 'POST /close +3'],
    [`GET /close HTTP/1.1\r\nHost: ${HOST}\r\nConnection: close\r\n\r\n`, 'GET /close'],
  ] as const;
  for (const path of PATHS) {
    for (const [first, expected] of firsts) {
      let text = '';
      const seen = await received(async () => (text = await untilClosed(path.before + first + `POST /b HTTP/1.1\r\nHost: ${HOST}\r\nContent-Length: 6\r\n\r\ncharge` + behind)));
      assert.deepEqual(statuses(text), [...path.answers, 200], `${path.name}: ${first}`);
      assert.deepEqual(seen, [...path.seen, expected], `${path.name}: ${first}`);
    }
  }
});

test("a pipelined request reaches the origin only after the answer before it is out, and kept-alive HTTP/1.0 with lengths serves them all in order", async () => {
  const slow = `POST /slow/400 HTTP/1.0\r\nHost: ${HOST}\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nhi`;
  // /slow answers carry a length, so the HTTP/1.0 connection stays open; /last's does not.
  const next = `POST /slow/0 HTTP/1.0\r\nHost: ${HOST}\r\nConnection: keep-alive\r\nContent-Length: 6\r\n\r\ncharge`;
  const from = origin.seen.length;
  const socket = connect(root.httpPort, '127.0.0.1', () => socket.write(slow + next + `GET /last HTTP/1.0\r\nHost: ${HOST}\r\n\r\n`));
  let got = '';
  socket.on('data', (d: Buffer) => (got += d.toString('latin1')));
  const closed = new Promise((r) => socket.on('close', r));
  await until('the slow request reaches the origin', () => origin.seen.length > from, 3000);
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(origin.seen.length, from + 1, 'nothing was forwarded while the slow answer was under way');
  await closed;
  assert.deepEqual(statuses(got), [200, 200, 200], got);
  assert.deepEqual(origin.seen.slice(from).map((r) => r.url), ['/slow/400', '/slow/0', '/last']);
});

// A client's FIN alone is a half-close, whose requests are still answered (`nc -N`); a reset says it is gone.
test('a client that resets its connection while an answer is under way: the requests it pipelined behind it never reach the origin', async () => {
  for (const first of [`POST /slow/500 HTTP/1.1\r\nHost: ${HOST}\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n`, `GET /slow/500 HTTP/1.0\r\nHost: ${HOST}\r\nConnection: keep-alive\r\n\r\n`]) {
    const seen = await received(async () => {
      await untilClosed(first + `POST /b HTTP/1.1\r\nHost: ${HOST}\r\nContent-Length: 6\r\n\r\ncharge`, { closeAfterMs: 150, reset: true });
      await new Promise((r) => setTimeout(r, 600));
    });
    assert.deepEqual(seen.map((s) => s.split(' ')[1]), ['/slow/500'], first);
  }
});

test('an upgrade or CONNECT behind an answer that closes the connection never reaches the origin; behind a kept-alive one it does, in turn', async () => {
  const ws = `GET /ws HTTP/1.1\r\nHost: ${HOST}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`;
  for (const first of [`GET /bytes/5 HTTP/1.0\r\nHost: ${HOST}\r\nConnection: keep-alive\r\n\r\n`, `POST /a HTTP/1.0\r\nHost: ${HOST}\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`]) {
    for (const tail of [ws, `CONNECT ${HOST}:443 HTTP/1.1\r\nHost: ${HOST}:443\r\n\r\n`]) {
      let text = '';
      const seen = await received(async () => (text = await untilClosed(first + tail)));
      assert.equal(statuses(text).length, 1, `${first}${tail}: ${JSON.stringify(text)}`);
      assert.deepEqual(seen, first.startsWith('GET') ? ['GET /bytes/5'] : [], `${first}${tail}`);
    }
  }
  // Behind an answer that keeps the connection: the upgrade goes to the origin after it.
  const seen = await received(() => untilClosed(`POST /up HTTP/1.1\r\nHost: ${HOST}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${ws}`, { closeAfterMs: 600 }));
  assert.deepEqual(seen, ['POST /up', 'GET /ws']);
});

test('Expect: a refusal without 100 Continue closes the connection and nothing behind it reaches the origin; an accepted one serves the next request', async () => {
  const refusedSeen = await received(async () => {
    const text = await untilClosed(`POST /x HTTP/1.1\r\nHost: nowhere.test\r\nExpect: 100-continue\r\nContent-Length: 6\r\n\r\n${behind}`);
    assert.deepEqual(statuses(text), [421]);
  });
  assert.deepEqual(refusedSeen, []);
  const acceptedSeen = await received(
    () =>
      new Promise<void>((resolve, reject) => {
        const socket = connect(root.httpPort, '127.0.0.1', () => socket.write(`POST /x HTTP/1.1\r\nHost: ${HOST}\r\nExpect: 100-continue\r\nContent-Length: 6\r\n\r\n`));
        let got = '';
        socket.on('data', (d: Buffer) => {
          if (got === '' && d.toString('latin1').startsWith('HTTP/1.1 100 Continue\r\n\r\n')) socket.write(`charge${behind}`);
          got += d.toString('latin1');
          if (statuses(got).length === 2) {
            socket.destroy();
            resolve();
          }
        });
        socket.on('error', reject);
        socket.setTimeout(3000, () => reject(new Error(`no answers: ${JSON.stringify(got)}`)));
      }),
  );
  assert.deepEqual(acceptedSeen, ['POST /x +6', 'GET /b']);
});

test("a deep pipeline on node's server is answered whole and in order (reading pauses while requests wait, then resumes)", async () => {
  const n = 60;
  let bytes = '';
  for (let i = 0; i < n; i++) bytes += `POST /deep/${i} HTTP/1.1\r\nHost: ${HOST}\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n`;
  bytes += `GET /end HTTP/1.1\r\nHost: ${HOST}\r\nConnection: close\r\n\r\n`;
  let text = '';
  const seen = await received(async () => (text = await untilClosed(bytes)));
  assert.equal(statuses(text).length, n + 1);
  assert.deepEqual(seen, [...Array.from({ length: n }, (_, i) => `POST /deep/${i} +1`), 'GET /end']);
});

test('over TLS too: HTTP/1.0 with Transfer-Encoding is a 400 that closes, nothing behind a closing answer or a reset client reaches the origin', async () => {
  for (const before of ['', plain]) {
    let text = '';
    let seen = await received(async () => (text = await untilClosed(`${before}POST /a HTTP/1.0\r\nHost: ${HOST}\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${behind}`, { tls: true })));
    assert.deepEqual(statuses(text), before ? [200, 400] : [400]);
    assert.deepEqual(seen, before ? ['GET /first'] : []);
    seen = await received(async () => (text = await untilClosed(`${before}GET /bytes/5 HTTP/1.0\r\nHost: ${HOST}\r\nConnection: keep-alive\r\n\r\n${behind}`, { tls: true })));
    assert.deepEqual(statuses(text), before ? [200, 200] : [200]);
    assert.deepEqual(seen, [...(before ? ['GET /first'] : []), 'GET /bytes/5']);
  }
  const seen = await received(() => untilClosed(`GET /slow/500 HTTP/1.0\r\nHost: ${HOST}\r\nConnection: keep-alive\r\n\r\n${behind}`, { tls: true, closeAfterMs: 150, reset: true }).then(() => new Promise((r) => setTimeout(r, 600))));
  assert.deepEqual(seen, ['GET /slow/500']);
});

/** The proxy process's resident memory in MiB (its workers are threads of it). */
const proxyRssMiB = (): number => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${proxy.child.pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;

test("a client pipelining without end behind a slow answer is no longer read once requests wait on node's server", async () => {
  const one = `GET /flood HTTP/1.1\r\nHost: ${HOST}\r\n\r\n`;
  const chunk = Buffer.from(one.repeat(Math.ceil(65536 / one.length)));
  const from = origin.seen.length;
  const rssBefore = proxyRssMiB();
  const socket = connect(root.httpPort, '127.0.0.1');
  socket.on('error', () => undefined);
  await new Promise((r) => socket.once('connect', r));
  socket.write(`POST /slow/3000 HTTP/1.1\r\nHost: ${HOST}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`);
  // 2 s of pipelined requests, written as fast as the proxy takes them.
  const started = Date.now();
  while (Date.now() - started < 2000) {
    if (!socket.write(chunk)) await Promise.race([new Promise((r) => socket.once('drain', r)), new Promise((r) => setTimeout(r, 2000 - (Date.now() - started)))]);
  }
  // Read on, it held every request parsed (over 100,000 of them, some 500 MiB here); paused, it
  // holds what one read brings.
  const grown = proxyRssMiB() - rssBefore;
  socket.resetAndDestroy();
  assert.ok(grown < 100, `the proxy grew by ${grown.toFixed(0)} MiB`);
  await new Promise((r) => setTimeout(r, 500));
  assert.deepEqual(origin.seen.slice(from).map((r) => r.url), ['/slow/3000']);
});

/**
 * Request limits (spec/3 §2.5 request_limits, §7, §8) through the real proxy: 405 with Allow,
 * 413 from Content-Length before the origin is contacted, 413 for a chunked body cut mid-stream
 * (the origin sees the body aborted), 414 for a long target, 431 for a big header section, 403
 * for blocked prefixes however they are spelled; each with its rule id in the request events.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import type { Daemon } from '../hostkit-process.ts';
import { api, makeRoot, request, startOrigin, startProxy, type Origin, type ProxyRoot, withBrowserHeaders } from './harness.ts';

let root: ProxyRoot;
let proxy: Daemon;
let origin: Origin;
const HOST = 'limits.test';

before(async () => {
  origin = await startOrigin();
  root = await makeRoot({
    sites: {
      'limits.yaml': {
        id: 'limits',
        hostnames: [HOST],
        origin: { url: origin.url },
        protection: {
          request_limits: {
            max_uri_bytes: 200,
            max_header_bytes: 2048,
            max_body_bytes: 100_000,
            allowed_methods: ['GET', 'POST', 'put'],
            blocked_path_prefixes: ['/admin', '/.git/'],
          },
        },
      },
      'defaults.yaml': { id: 'defaults', hostnames: ['defaults.test'], origin: { url: origin.url } },
      'connect.yaml': { id: 'connect', hostnames: ['connect.test'], origin: { url: origin.url }, protection: { bot: { enabled: false }, request_limits: { allowed_methods: ['GET', 'CONNECT'] } } },
    },
  });
  proxy = await startProxy(root);
});

after(async () => {
  await proxy?.stop('SIGKILL');
  await origin?.close();
});

async function lastEvent(): Promise<{ status: number; rule: string | null; bytes_in: number }> {
  return (await api(root, 'GET', '/events/recent?site=limits&limit=1')).body.data.events[0];
}

test('405 for a method outside allowed_methods, with Allow; allowed methods are case-insensitive in the config', async () => {
  const before = origin.seen.length;
  for (const method of ['DELETE', 'PATCH', 'OPTIONS', 'TRACE']) {
    const r = await request({ port: root.httpPort, host: HOST, method, path: '/x' });
    assert.equal(r.status, 405, method);
    assert.equal(r.headers['allow'], 'GET, POST, PUT');
    assert.deepEqual(await lastEvent().then((e) => [e.status, e.rule]), [405, 'request.method']);
  }
  assert.equal((await request({ port: root.httpPort, host: HOST, method: 'PUT', path: '/x', body: 'x' })).status, 200);
  assert.equal(origin.seen.length, before + 1, 'refused requests never reach the origin');
  assert.equal((await request({ port: root.httpPort, host: 'defaults.test', method: 'DELETE' })).status, 200, 'the default list allows DELETE');
});

test('extension methods and CONNECT get the same 405; a CONNECT a site allows is 501 (no CONNECT tunnels)', async () => {
  for (const method of ['BREW', 'PROPFIND', 'M-SEARCH']) {
    const r = await request({ port: root.httpPort, host: HOST, method, path: '/x' });
    assert.equal(r.status, 405, method);
    assert.equal(r.headers['allow'], 'GET, POST, PUT');
  }
  const refused = await connectHead(HOST);
  assert.match(refused, /^HTTP\/1\.1 405 /);
  assert.match(refused, /\r\nallow: GET, POST, PUT\r\n/i);
  assert.deepEqual(await lastEvent().then((e) => [e.status, e.rule]), [405, 'request.method']);
  assert.match(await connectHead('connect.test'), /^HTTP\/1\.1 501 /);
  assert.match(await connectHead('nowhere.test'), /^HTTP\/1\.1 421 /);
});

/** A CONNECT for `host:443` (node's client takes any answer to CONNECT as a tunnel): the answer's head. */
function connectHead(host: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(root.httpPort, '127.0.0.1', () => socket.write(`CONNECT ${host}:443 HTTP/1.1\r\nHost: ${host}:443\r\n\r\n`));
    let text = '';
    socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
    socket.on('end', () => resolve(text.slice(0, text.indexOf('\r\n\r\n') + 2)));
    socket.on('error', reject);
  });
}

test('414 for a request target over max_uri_bytes (query included)', async () => {
  assert.equal((await request({ port: root.httpPort, host: HOST, path: `/${'a'.repeat(199)}` })).status, 200);
  assert.equal((await request({ port: root.httpPort, host: HOST, path: `/${'a'.repeat(200)}` })).status, 414);
  assert.equal((await request({ port: root.httpPort, host: HOST, path: `/a?${'q'.repeat(250)}` })).status, 414);
  assert.equal((await lastEvent()).rule, 'request.uri_len');
});

test('431 for a header section over max_header_bytes; other sites keep their own (default) cap', async () => {
  assert.equal((await request({ port: root.httpPort, host: HOST, headers: { 'x-pad': 'p'.repeat(1500) } })).status, 200);
  const big = await request({ port: root.httpPort, host: HOST, headers: { 'x-pad': 'p'.repeat(2100) } });
  assert.equal(big.status, 431);
  assert.equal((await lastEvent()).rule, 'request.header_len');
  const many = await request({ port: root.httpPort, host: HOST, headers: Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`x-h${i}`, 'v'.repeat(30)])) });
  assert.equal(many.status, 431, 'the cap counts the whole section, not one header');
  assert.equal((await request({ port: root.httpPort, host: 'defaults.test', headers: { 'x-pad': 'p'.repeat(12_000) } })).status, 200);
});

test('403 for blocked prefixes, also percent-encoded, with doubled slashes, dot segments or another case', async () => {
  for (const path of ['/admin', '/admin/users', '/administrator', '/%61dmin', '//admin', '/x/../admin', '/ADMIN', '/.git/config', '/%2egit/config']) {
    const r = await request({ port: root.httpPort, host: HOST, path });
    assert.equal(r.status, 403, path);
  }
  assert.equal((await lastEvent()).rule, 'request.path_blocked');
  for (const path of ['/adm', '/public/admin', '/.gitignore']) assert.equal((await request({ port: root.httpPort, host: HOST, path })).status, 200, path);
});

test('413 from a Content-Length over max_body_bytes, before the origin is contacted', async () => {
  const before = origin.seen.length;
  const r = await request({ port: root.httpPort, host: HOST, method: 'POST', path: '/upload', body: Buffer.alloc(100_001) });
  assert.equal(r.status, 413);
  assert.equal((await lastEvent()).rule, 'request.body_len');
  assert.equal(origin.seen.length, before);
  const ok = await request({ port: root.httpPort, host: HOST, method: 'POST', path: '/upload', body: Buffer.alloc(100_000) });
  assert.equal(ok.status, 200);
});

/**
 * A chunked upload of `total` bytes in 16 KiB writes, `pauseMs` apart (so the proxy forwards each
 * before the next arrives); resolves with the status the client read.
 */
function chunkedUpload(total: number, pauseMs = 0): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port: root.httpPort, path: '/stream', method: 'POST', headers: withBrowserHeaders({ host: HOST }), agent: false });
    req.on('response', (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    const chunk = Buffer.alloc(16 * 1024, 1);
    let sent = 0;
    const pump = (): void => {
      while (sent < total) {
        sent += chunk.length;
        const more = req.write(chunk);
        if (pauseMs > 0 && sent < total) {
          setTimeout(pump, pauseMs);
          return;
        }
        if (!more) {
          req.once('drain', pump);
          return;
        }
      }
      req.end();
    };
    pump();
  });
}

test('413 for a chunked body cut mid-stream: the origin saw part of it, aborted', async () => {
  const seen = origin.next();
  assert.equal(await chunkedUpload(2 * 1024 * 1024, 5), 413);
  const atOrigin = await seen;
  assert.equal(atOrigin.complete, false, 'the origin request was aborted');
  assert.ok(atOrigin.bodyBytes <= 100_000, `the origin got at most max_body_bytes (${atOrigin.bodyBytes})`);
  const e = await lastEvent();
  assert.deepEqual([e.status, e.rule], [413, 'request.body_len']);
  assert.ok(e.bytes_in <= 100_000);
  // A fast client: cut the same way, whatever the origin had received by then.
  assert.equal(await chunkedUpload(4 * 1024 * 1024), 413);
  // Under the cap a chunked body goes through whole.
  assert.equal(await chunkedUpload(96 * 1024), 200);
});

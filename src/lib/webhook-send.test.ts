import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { text } from 'node:stream/consumers';
import { backoffMs, parseRetryAfter, sendWebhook } from './webhook-send.ts';

test('backoff: base x 2^(n-1), capped at 60 s', () => {
  assert.deepEqual([1, 2, 3, 4].map((n) => backoffMs(2000, n)), [2000, 4000, 8000, 16000]);
  assert.equal(backoffMs(5000, 10), 60_000);
  assert.equal(backoffMs(5000, 10, 30_000), 30_000);
});

test('Retry-After in seconds or as a date, honoured up to one hour', () => {
  assert.equal(parseRetryAfter('2'), 2000);
  assert.equal(parseRetryAfter('0.5'), 500);
  assert.equal(parseRetryAfter('300'), 300_000);
  assert.equal(parseRetryAfter('3600'), 3_600_000);
  assert.equal(parseRetryAfter('86400'), 3_600_000);
  assert.equal(parseRetryAfter('-5'), 0);
  assert.equal(parseRetryAfter(new Date(10_000).toUTCString(), 5_000), 5000);
  assert.equal(parseRetryAfter(null), undefined);
  assert.equal(parseRetryAfter('soon'), undefined);
});

/** A loopback receiver answering by path: /<status>, /429-header, /429-body, /301, /slow. */
const seen: { method: string | undefined; headers: IncomingMessage['headers']; body: string }[] = [];
const server = createServer(async (req, res) => {
  seen.push({ method: req.method, headers: req.headers, body: await text(req) });
  const path = req.url ?? '/';
  if (path === '/429-header') res.writeHead(429, { 'retry-after': '2' }).end();
  else if (path === '/429-body') res.writeHead(429, { 'content-type': 'application/json' }).end('{"retry_after":1.5}');
  else if (path === '/301') res.writeHead(301, { location: 'https://hooks.example.test/new' }).end();
  else if (path === '/slow') setTimeout(() => res.end(), 2000);
  else res.writeHead(Number(path.slice(1)) || 404).end(path === '/400' ? 'bad payload' : '');
});
await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
after(() => {
  server.closeAllConnections();
  server.close();
});

const send = (path: string, over: { url?: string; timeoutMs?: number } = {}) => sendWebhook({ url: `${base}${path}`, body: '{"a":1}', userAgent: 'hostkit-test/1', ...over });

test('sendWebhook: a JSON POST with the user agent; userinfo becomes basic authentication', async () => {
  const res = await sendWebhook({ url: base.replace('http://', 'http://us%65r:p%40ss@') + '/204', body: '{"a":1}', userAgent: 'hostkit-test/1', headers: { 'x-extra': 'y' } });
  assert.deepEqual(res, { ok: true, status: 204 });
  const req = seen.at(-1);
  assert.deepEqual([req?.method, req?.body, req?.headers['content-type'], req?.headers['user-agent'], req?.headers['x-extra']], ['POST', '{"a":1}', 'application/json', 'hostkit-test/1', 'y']);
  assert.equal(req?.headers['authorization'], `Basic ${Buffer.from('user:p@ss').toString('base64')}`);
});

test('sendWebhook: 429 waits as Retry-After or the JSON body says; 3xx and 4xx but 408 are permanent', async () => {
  assert.deepEqual(await send('/429-header'), { ok: false, status: 429, error: 'HTTP 429', retryAfterMs: 2000 });
  assert.equal((await send('/429-body')).retryAfterMs, 1500);
  const moved = await send('/301');
  assert.deepEqual([moved.ok, moved.permanent, moved.status], [false, true, 301]);
  assert.equal(moved.error, 'HTTP 301: the endpoint redirects to https://hooks.example.test/new; put that URL in the config (redirects are not followed)');
  assert.deepEqual(await send('/400'), { ok: false, status: 400, error: 'HTTP 400: bad payload', permanent: true });
  assert.deepEqual(await send('/408'), { ok: false, status: 408, error: 'HTTP 408' });
  assert.deepEqual(await send('/503'), { ok: false, status: 503, error: 'HTTP 503' });
});

test('sendWebhook never throws: a time-out, a refused connection and an unusable URL are failures', async () => {
  assert.deepEqual(await send('/slow', { timeoutMs: 100 }), { ok: false, error: 'no answer within 100 ms' });
  const n = seen.length;
  const bad = await send('', { url: 'http://user:p%zz@127.0.0.1:9/' });
  assert.deepEqual([bad.ok, bad.permanent], [false, true]);
  assert.match(bad.error ?? '', /malformed percent escape/);
  assert.equal(seen.length, n);
  const refused = await send('', { url: 'http://127.0.0.1:1/' });
  assert.equal(refused.ok, false);
  assert.equal(refused.permanent, undefined);
  assert.ok(refused.error);
});

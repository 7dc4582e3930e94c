import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { requestText } from './http-request.ts';

/** A loopback server whose answers the tests choose by path. */
const seen: { method: string; headers: IncomingMessage['headers']; body: string }[] = [];
const server = createServer((req, res) => {
  let body = '';
  req.on('data', (c: Buffer) => (body += c.toString()));
  req.on('end', () => {
    seen.push({ method: req.method ?? '', headers: req.headers, body });
    if (req.url === '/echo') res.writeHead(201, { 'x-answer': 'yes' }).end(`got ${body}`);
    else if (req.url === '/fail') res.writeHead(503).end('down');
    else if (req.url === '/big') res.end(Buffer.alloc(4096, 'x'));
    else if (req.url === '/slow') setTimeout(() => res.end('late'), 2000);
    else if (req.url === '/slow-body') {
      res.writeHead(200, { 'content-length': '10' });
      res.write('12345');
      setTimeout(() => res.end('67890'), 2000);
    }
    else res.writeHead(404).end();
  });
});
await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
after(() => {
  server.closeAllConnections();
  server.close();
});

test('sends method, headers and body; answers with status, headers and text', async () => {
  const res = await requestText(`${base}/echo`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer t' }, body: '{"a":"\u00e9"}', timeoutMs: 5000 });
  assert.deepEqual([res.status, res.headers['x-answer'], res.text], [201, 'yes', 'got {"a":"\u00e9"}']);
  const req = seen.at(-1);
  assert.equal(req?.method, 'POST');
  assert.equal(req?.headers['authorization'], 'Bearer t');
  assert.equal(req?.headers['content-length'], String(Buffer.byteLength('{"a":"\u00e9"}')));
});

test('any HTTP status resolves', async () => {
  const res = await requestText(`${base}/fail`, { method: 'GET', timeoutMs: 5000 });
  assert.deepEqual([res.status, res.text], [503, 'down']);
});

test('the deadline rejects with TimeoutError', async () => {
  await assert.rejects(requestText(`${base}/slow`, { method: 'GET', timeoutMs: 100 }), (err: Error) => err.name === 'TimeoutError' && /100 ms/.test(err.message));
  // Also once the answer has begun: the body stops halfway.
  await assert.rejects(requestText(`${base}/slow-body`, { method: 'GET', timeoutMs: 100 }), (err: Error) => err.name === 'TimeoutError');
});

test('an answer past maxBytes rejects', async () => {
  await assert.rejects(requestText(`${base}/big`, { method: 'GET', timeoutMs: 5000, maxBytes: 1000 }), /larger than 1000 bytes/);
  assert.equal((await requestText(`${base}/big`, { method: 'GET', timeoutMs: 5000, maxBytes: 4096 })).text.length, 4096);
});

test('network failures carry their code; bad URLs and schemes are refused', async () => {
  const closed = createServer();
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
  const port = (closed.address() as AddressInfo).port;
  await new Promise((r) => closed.close(r));
  await assert.rejects(requestText(`http://127.0.0.1:${port}/`, { method: 'GET', timeoutMs: 5000 }), (err: Error & { code?: string }) => err.code === 'ECONNREFUSED');
  await assert.rejects(requestText('not a url', { method: 'GET', timeoutMs: 5000 }), /invalid URL/);
  await assert.rejects(requestText('ftp://127.0.0.1/', { method: 'GET', timeoutMs: 5000 }), /unsupported URL scheme ftp:/);
});

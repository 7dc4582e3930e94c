/**
 * The own HTTP/1.1 server's hand-off to node's server, with node's timeouts cut short so a test
 * can see them (test/integration/proxy/http1.test.ts covers the rest through the executable).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer as createHttpServer } from 'node:http';
import { connect, createServer as createNetServer, type AddressInfo } from 'node:net';
import { createHttp1Server } from './http1-server.ts';

test('a connection handed to node keeps a head timeout: a head trickled after a chunked upload is cut', async () => {
  const fallback = createHttpServer({ headersTimeout: 300, requestTimeout: 1000, connectionsCheckingInterval: 50 }, (req, res) => {
    req.resume();
    req.on('end', () => res.end('node'));
  });
  const fast = createHttp1Server({ onRequest: (_req, res) => res.end('fast'), fallback, maxHeaderSize: 16_384 });
  const server = createNetServer({ allowHalfOpen: true, pauseOnConnect: true }, (socket) => fast.accept(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const socket = connect((server.address() as AddressInfo).port, '127.0.0.1');
  socket.on('error', () => undefined);
  let trickle: NodeJS.Timeout | undefined;
  try {
    // A chunked upload hands the connection to node's server; its answer comes from there.
    socket.write('POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n');
    await new Promise<void>((resolve) => {
      let got = '';
      const onData = (d: Buffer): void => {
        got += d.toString('latin1');
        if (!got.endsWith('node')) return;
        socket.off('data', onData);
        resolve();
      };
      socket.on('data', onData);
    });
    // Then the next head a byte at a time, each well inside node's keep-alive idle timeout.
    const head = `GET / HTTP/1.1\r\nX-Pad: ${'p'.repeat(200)}`;
    let at = 0;
    trickle = setInterval(() => socket.write(head.charAt(at++ % head.length)), 20);
    const closed = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), 2000);
      socket.once('close', () => {
        clearTimeout(timer);
        resolve(true);
      });
    });
    assert.ok(closed, 'the connection was still open 2 s into a head its timeout (300 ms) allows');
  } finally {
    clearInterval(trickle);
    socket.destroy();
    fast.closeAll();
    server.close();
  }
});

test('a request body on the node server may pause for bodyIdleMs, as on the own server; a slow answer after a whole body is not cut', async () => {
  const fallback = createHttpServer((req, res) => {
    req.resume();
    // The answer comes well after the body: the body timeout must not cut it.
    req.on('end', () => setTimeout(() => res.end('node'), 700));
  });
  const fast = createHttp1Server({ onRequest: (_req, res) => res.end('fast'), fallback, maxHeaderSize: 16_384, bodyIdleMs: 300 });
  const server = createNetServer({ allowHalfOpen: true, pauseOnConnect: true }, (socket) => fast.accept(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  /** Writes `bytes`; resolves with what came back once it ends in `end`, the server closed the connection, or 2 s passed. */
  const send = (bytes: string, end = '\0'): Promise<{ got: string; closed: boolean }> =>
    new Promise((resolve) => {
      const socket = connect(port, '127.0.0.1', () => socket.write(bytes));
      socket.on('error', () => undefined);
      let got = '';
      socket.on('data', (d: Buffer) => {
        got += d.toString('latin1');
        if (got.endsWith(end)) socket.destroy();
      });
      const timer = setTimeout(() => {
        socket.destroy();
        resolve({ got, closed: false });
      }, 2000);
      socket.once('close', () => {
        clearTimeout(timer);
        resolve({ got, closed: true });
      });
    });
  try {
    // A chunked upload (node's) that stops after its first chunk.
    const stalled = await send('POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n');
    assert.ok(stalled.closed, 'the stalled upload still held its connection 2 s into a 300 ms body timeout');
    assert.equal(stalled.got, '');
    const whole = await send('POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n', 'node');
    assert.match(whole.got, /^HTTP\/1\.1 200 [^]*node$/);
  } finally {
    fast.closeAll();
    server.close();
    fallback.closeAllConnections();
  }
});

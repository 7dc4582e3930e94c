/**
 * `node scripts/bench/relay.ts LISTEN_PORT ORIGIN_PORT`: the proxy benchmark's yardstick for the
 * runtime itself, not a proxy anyone should run. The least a Node.js HTTP/1.1 proxy can do per
 * request on node's sockets: one origin connection per client connection, a bodiless request's
 * head passed on with Connection dropped and X-Forwarded-For added, a Content-Length response
 * passed back as received. No routing, checks, pooling, chunked bodies, timeouts, events or
 * worker threads. What it reaches next to nginx on this machine bounds what osproxy (which does
 * all of that) can reach on the same runtime (docs/benchmarks.md "Proxy").
 */
import { connect, createServer, type Socket } from 'node:net';

const [listenPort, originPort] = process.argv.slice(2).map(Number);
if (!listenPort || !originPort) {
  process.stderr.write('usage: node scripts/bench/relay.ts LISTEN_PORT ORIGIN_PORT\n');
  process.exit(2);
}

/** Client request heads to origin request heads, one at a time as they complete. */
function relayRequests(client: Socket, origin: Socket): void {
  let pending = '';
  client.on('data', (chunk: Buffer) => {
    pending += chunk.toString('latin1');
    for (let end = pending.indexOf('\r\n\r\n'); end !== -1; end = pending.indexOf('\r\n\r\n')) {
      const lines = pending.slice(0, end).split('\r\n');
      pending = pending.slice(end + 4);
      let head = `${lines[0] as string}\r\n`;
      for (let i = 1; i < lines.length; i++) {
        const line = lines[i] as string;
        if (!/^connection\s*:/i.test(line)) head += `${line}\r\n`;
      }
      origin.write(`${head}x-forwarded-for: ${client.remoteAddress ?? ''}\r\n\r\n`, 'latin1');
    }
  });
}

/** Origin responses (Content-Length framed) back to the client as they complete. */
function relayResponses(origin: Socket, client: Socket): void {
  let pending: Buffer = Buffer.alloc(0);
  let bodyLeft = -1;
  let headLength = 0;
  origin.on('data', (chunk: Buffer) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    for (;;) {
      if (bodyLeft === -1) {
        const end = pending.indexOf('\r\n\r\n');
        if (end === -1) return;
        const length = /\r\ncontent-length:\s*(\d+)/i.exec(pending.toString('latin1', 0, end));
        bodyLeft = length ? Number(length[1]) : 0;
        headLength = end + 4;
      }
      const total = headLength + bodyLeft;
      if (pending.length < total) return;
      client.write(pending.subarray(0, total));
      pending = pending.subarray(total);
      bodyLeft = -1;
      if (pending.length === 0) return;
    }
  });
}

createServer((client) => {
  client.setNoDelay(true);
  const origin = connect({ host: '127.0.0.1', port: originPort });
  origin.setNoDelay(true);
  relayRequests(client, origin);
  relayResponses(origin, client);
  client.on('error', () => origin.destroy());
  origin.on('error', () => client.destroy());
  client.on('close', () => origin.destroy());
  origin.on('close', () => client.destroy());
}).listen(listenPort, '127.0.0.1');

/**
 * A minimal WebSocket client and echo origin for the proxy's tunnel tests, written on node:net
 * with the RFC 6455 handshake and framing (no dependency): the client masks its frames, the
 * origin does not; the origin echoes data frames, answers pings with pongs and closes on a
 * close frame. Text `send:N` makes the origin send N bytes in one binary message.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { withBrowserHeaders } from './harness.ts';

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
export const OP = { text: 1, binary: 2, close: 8, ping: 9, pong: 10 } as const;

export interface Frame {
  opcode: number;
  data: Buffer;
}

/** One frame; masked when `mask` (client to server). */
export function encodeFrame(opcode: number, data: Buffer, mask: boolean): Buffer {
  const len = data.length;
  const head = len < 126 ? Buffer.from([0x80 | opcode, (mask ? 0x80 : 0) | len]) : len < 65536 ? Buffer.alloc(4) : Buffer.alloc(10);
  if (len >= 126) {
    head[0] = 0x80 | opcode;
    head[1] = (mask ? 0x80 : 0) | (len < 65536 ? 126 : 127);
    if (len < 65536) head.writeUInt16BE(len, 2);
    else head.writeBigUInt64BE(BigInt(len), 2);
  }
  if (!mask) return Buffer.concat([head, data]);
  const key = randomBytes(4);
  const body = Buffer.from(data);
  for (let i = 0; i < body.length; i++) body[i] = (body[i] as number) ^ (key[i % 4] as number);
  return Buffer.concat([head, key, body]);
}

/** Reads whole frames from a byte stream (unmasking masked ones); fragments are not used here. */
export function createFrameReader(onFrame: (f: Frame) => void): (chunk: Buffer) => void {
  let buf = Buffer.alloc(0);
  return (chunk) => {
    buf = Buffer.concat([buf, chunk]);
    for (;;) {
      if (buf.length < 2) return;
      const opcode = (buf[0] as number) & 0x0f;
      const masked = ((buf[1] as number) & 0x80) !== 0;
      let len = (buf[1] as number) & 0x7f;
      let off = 2;
      if (len === 126) {
        if (buf.length < 4) return;
        len = buf.readUInt16BE(2);
        off = 4;
      } else if (len === 127) {
        if (buf.length < 10) return;
        len = Number(buf.readBigUInt64BE(2));
        off = 10;
      }
      const keyLen = masked ? 4 : 0;
      if (buf.length < off + keyLen + len) return;
      const data = Buffer.from(buf.subarray(off + keyLen, off + keyLen + len));
      if (masked) {
        const key = buf.subarray(off, off + 4);
        for (let i = 0; i < data.length; i++) data[i] = (data[i] as number) ^ (key[i % 4] as number);
      }
      buf = buf.subarray(off + keyLen + len);
      onFrame({ opcode, data });
    }
  };
}

export interface WsClient {
  socket: Socket;
  status: number;
  headers: Record<string, string>;
  send(opcode: number, data: Buffer | string): void;
  /** The next frame from the server; rejects after timeoutMs. */
  next(timeoutMs?: number): Promise<Frame>;
  /** Resolves when the connection closed, with the time it took from the call. */
  closed: Promise<void>;
  isClosed(): boolean;
}

/**
 * Opens a WebSocket through `port` with Host `host`; resolves after the 101 (whose
 * Sec-WebSocket-Accept it checks), rejects with the status line of any other answer.
 */
export function connectWs(opts: { port: number; host: string; path?: string; headers?: Record<string, string>; tls?: { ca: string } }): Promise<WsClient> {
  return new Promise((resolve, reject) => {
    const key = randomBytes(16).toString('base64');
    const socket: Socket = opts.tls ? tlsConnect({ port: opts.port, host: '127.0.0.1', servername: opts.host, ca: opts.tls.ca, ALPNProtocols: ['http/1.1'] }) : connect(opts.port, '127.0.0.1');
    // A browser's handshake has no Accept; the rest of its headers keep the bot score at 0.
    const { accept: _accept, ...browser } = withBrowserHeaders(opts.headers);
    const extra = Object.entries(browser).map(([k, v]) => `${k}: ${v}\r\n`).join('');
    socket.write(`GET ${opts.path ?? '/ws'} HTTP/1.1\r\nHost: ${opts.host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${key}\r\n${extra}\r\n`);
    let head = Buffer.alloc(0);
    const frames: Frame[] = [];
    const waiters: ((f: Frame) => void)[] = [];
    const reader = createFrameReader((f) => {
      const w = waiters.shift();
      if (w) w(f);
      else frames.push(f);
    });
    let isClosed = false;
    const closed = new Promise<void>((r) => socket.once('close', () => {
      isClosed = true;
      r();
    }));
    const onHead = (d: Buffer): void => {
      head = Buffer.concat([head, d]);
      const end = head.indexOf('\r\n\r\n');
      if (end === -1) return;
      socket.off('data', onHead);
      const lines = head.subarray(0, end).toString().split('\r\n');
      const status = Number((lines[0] ?? '').split(' ')[1]);
      const headers: Record<string, string> = {};
      for (const l of lines.slice(1)) {
        const i = l.indexOf(':');
        headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
      }
      if (status !== 101) {
        socket.destroy();
        reject(new Error(lines[0]));
        return;
      }
      const expected = createHash('sha1').update(key + GUID).digest('base64');
      if (headers['sec-websocket-accept'] !== expected) {
        socket.destroy();
        reject(new Error('bad Sec-WebSocket-Accept'));
        return;
      }
      socket.on('data', reader);
      const rest = head.subarray(end + 4);
      if (rest.length > 0) reader(rest);
      resolve({
        socket,
        status,
        headers,
        send: (opcode, data) => socket.write(encodeFrame(opcode, Buffer.from(data), true)),
        next: (timeoutMs = 5_000) =>
          new Promise((res, rej) => {
            const f = frames.shift();
            if (f) return res(f);
            const timer = setTimeout(() => rej(new Error('no frame from the server')), timeoutMs);
            waiters.push((frame) => {
              clearTimeout(timer);
              res(frame);
            });
          }),
        closed,
        isClosed: () => isClosed,
      });
    };
    socket.on('data', onHead);
    socket.on('error', reject);
  });
}

export interface WsOrigin {
  url: string;
  port: number;
  /** Request headers of each handshake the origin accepted. */
  handshakes: IncomingHttpHeaders[];
  /** Open server-side connections. */
  open(): number;
  close(): Promise<void>;
}

/** A WebSocket echo origin on 127.0.0.1; paths starting `/refuse` answer 403 instead of 101. */
export async function startWsOrigin(server: Server = createServer()): Promise<WsOrigin> {
  const handshakes: IncomingHttpHeaders[] = [];
  const sockets = new Set<Socket>();
  server.on('request', (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('plain');
  });
  server.on('upgrade', (req, socket: Socket, head: Buffer) => {
    if ((req.url ?? '').startsWith('/refuse')) {
      socket.end('HTTP/1.1 403 Forbidden\r\nContent-Length: 7\r\nConnection: close\r\n\r\nrefused');
      return;
    }
    handshakes.push(req.headers);
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    const accept = createHash('sha1').update(`${req.headers['sec-websocket-key'] ?? ''}${GUID}`).digest('base64');
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
    const reader = createFrameReader((f) => {
      if (f.opcode === OP.ping) socket.write(encodeFrame(OP.pong, f.data, false));
      else if (f.opcode === OP.close) socket.end(encodeFrame(OP.close, f.data, false));
      else if (f.opcode === OP.text && f.data.toString().startsWith('send:')) socket.write(encodeFrame(OP.binary, Buffer.alloc(Number(f.data.toString().slice(5)), 1), false));
      else if (f.opcode === OP.text || f.opcode === OP.binary) socket.write(encodeFrame(f.opcode, f.data, false));
    });
    socket.on('data', reader);
    if (head.length > 0) reader(head);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    handshakes,
    open: () => sockets.size,
    close: () =>
      new Promise((r) => {
        for (const s of sockets) s.destroy();
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

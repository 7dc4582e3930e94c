/**
 * The data plane's own HTTP/1.1 server on `net`/`tls` sockets (docs/decisions.md "Reverse proxy:
 * own HTTP/1.1 data plane"). It serves the plain requests that are nearly all traffic (HTTP/1.1,
 * origin-form target, no Transfer-Encoding, Upgrade or Expect; http1-parse.ts says exactly
 * which) with one listener set per connection, a request object without node's parser and a
 * response whose head and small body leave in one write. Any other request hands its connection,
 * with the bytes already read, to node's http server (the `fallback`), which serves that
 * connection from then on with llhttp's full strictness: malformed requests get node's answers
 * (400, 431), chunked uploads, 100-continue and WebSocket upgrades node's handling.
 *
 * Keep-alive, pipelining (requests are answered in order, one at a time), node's timeouts
 * (a head within 60 s, 5 s of idle keep-alive) and lingering close after an unread body are kept.
 */
import { EventEmitter } from 'node:events';
import { STATUS_CODES, type IncomingMessage, type OutgoingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { Readable, type Duplex } from 'node:stream';
import { TLSSocket } from 'node:tls';
import { DeadlineList, deadlineIn, type Expiring } from './deadlines.ts';
import { PartialHead, headerList, parseRequestHead, statusHasNoBody, type RequestHead } from './http1-parse.ts';
import { readEnded, readStarted, wallNow } from './read-clock.ts';

/**
 * How long an unread request body may keep arriving after the answer: read and dropped until
 * then, so the client gets to read the answer instead of a reset, then the connection is closed.
 */
export const LINGER_MS = 5_000;
// node's defaults: a request head must arrive within this long, idle keep-alive ends after 5 s.
const HEADERS_TIMEOUT_MS = 60_000;
const KEEP_ALIVE_MS = 5_000;
// A request body that stops arriving for this long closes the connection (both servers).
const BODY_IDLE_MS = 60_000;
// Client connections' timeouts are checked this often.
const CLIENT_DEADLINES = new DeadlineList(250);
// Pipelined bytes buffered while a response is under way before reading pauses.
const PIPELINE_BUFFER = 64 * 1024;
// A body up to this size leaves in the same write as the response head.
const COALESCE_BYTES = 16 * 1024;

// Plain TCP client connections read into this one buffer (net's `onread`), as origin connections
// do: no ArrayBuffer allocated, tracked and swept per read, and no stream event. A read is handled
// before the next one lands here, and whatever a connection keeps of it is copied first (own()).
const READ_BUFFER = Buffer.allocUnsafe(64 * 1024);

/** `bytes` as a buffer that outlives the current read: a copy when they lie in READ_BUFFER. */
function own(bytes: Buffer): Buffer {
  return bytes.buffer === READ_BUFFER.buffer ? Buffer.from(bytes) : bytes;
}

/**
 * A socket on the connection `paused` was accepted on, reading into READ_BUFFER. Node's server
 * has no `onread` for the sockets it accepts, so the connection is accepted paused (nothing read
 * yet) and its handle taken over by a socket made with `onread`: `_handle` and the `handle`
 * option are what node's own servers use to do this. `paused` is let go without closing the
 * connection.
 */
function withSharedReads(paused: Socket, onRead: (n: number) => boolean): Socket {
  const accepted = paused as Socket & { _handle: unknown };
  const handle = accepted._handle;
  accepted._handle = null;
  paused.destroy();
  return new Socket({ handle, allowHalfOpen: true, onread: { buffer: READ_BUFFER, callback: onRead } } as ConstructorParameters<typeof Socket>[0]);
}

const State = { Head: 0, Body: 1, Responding: 2, Discarding: 3, Closed: 4, Handed: 5 } as const;
type State = (typeof State)[keyof typeof State];

let dateSecond = 0;
let dateLine = '';
/** `date: ...\r\n` for now, made once a second. */
function currentDateLine(): string {
  const now = wallNow();
  const second = Math.floor(now / 1000);
  if (second !== dateSecond) {
    dateSecond = second;
    dateLine = `date: ${new Date(now).toUTCString()}\r\n`;
  }
  return dateLine;
}

/** A request the own server parsed: what the data plane reads of node's IncomingMessage. */
export class FastRequest extends Readable {
  readonly method: string;
  readonly url: string;
  readonly headers: RequestHead['headers'];
  readonly rawHeaders: string[];
  readonly httpVersion = '1.1';
  readonly httpVersionMajor = 1;
  readonly httpVersionMinor = 1;
  readonly socket: Socket;
  /** The whole body has arrived. */
  complete: boolean;
  /** Body bytes still to come from the client. */
  remaining: number;
  /** The whole body, when it arrived with the head (it is pushed into the stream all the same). */
  bufferedBody: Buffer | undefined = undefined;
  private readonly conn: Http1Connection;

  constructor(conn: Http1Connection, head: RequestHead) {
    super();
    this.conn = conn;
    this.socket = conn.socket;
    this.method = head.method;
    this.url = head.target;
    this.headers = head.headers;
    this.rawHeaders = head.rawHeaders;
    this.remaining = head.contentLength;
    this.complete = head.contentLength === 0;
  }

  override _read(): void {
    if (this.complete && this.remaining === 0 && !this.readableEnded) this.push(null);
    else this.conn.bodyWanted();
  }

  override _destroy(err: Error | null, cb: (err: Error | null) => void): void {
    // A request given up before its body arrived takes its connection with it (as node's does).
    if (!this.complete) this.socket.destroy();
    cb(err);
  }
}

/** The response to a FastRequest: what the data plane does with node's ServerResponse. */
export class FastResponse extends EventEmitter {
  statusCode = 200;
  headersSent = false;
  destroyed = false;
  writableFinished = false;
  /** The connection closes once this response is over. */
  closeAfter: boolean;
  private head: string | null = null;
  private chunked = false;
  private readonly bodyless: boolean;
  private extra: Record<string, string> | undefined;
  private waitingDrain = false;
  private readonly conn: Http1Connection;
  private readonly onDrain = (): void => {
    this.waitingDrain = false;
    this.emit('drain');
  };

  constructor(conn: Http1Connection, method: string, close: boolean) {
    super();
    this.conn = conn;
    this.bodyless = method === 'HEAD';
    this.closeAfter = close;
  }

  setHeader(name: string, value: string): this {
    const lower = name.toLowerCase();
    if (lower === 'connection' && value.toLowerCase() === 'close') this.closeAfter = true;
    else (this.extra ??= {})[lower] = value;
    return this;
  }

  /** Prepares the head (written with the first body bytes); `headers` as an object or `[name, value, ...]`. */
  writeHead(status: number, headers: OutgoingHttpHeaders | string[]): this {
    if (this.headersSent) return this;
    let lines = '';
    let length = false;
    let date = false;
    const line = (name: string, value: string | number): void => {
      if (name === 'content-length') length = true;
      else if (name === 'date') date = true;
      lines += `${name}: ${value}\r\n`;
    };
    if (Array.isArray(headers)) {
      for (let i = 0; i < headers.length; i += 2) line(headers[i] as string, headers[i + 1] as string);
    } else {
      for (const name in headers) {
        const value = headers[name];
        if (value === undefined) continue;
        if (Array.isArray(value)) for (const v of value) line(name, v);
        else line(name, value);
      }
    }
    // setHeader values, unless writeHead names the header too (as node's writeHead wins).
    if (this.extra) {
      for (const name in this.extra) {
        const given = Array.isArray(headers) ? headers.some((v, i) => i % 2 === 0 && v === name) : name in headers;
        if (!given) line(name, this.extra[name] as string);
      }
    }
    return this.prepareHead(status, lines, length, date);
  }

  /**
   * Prepares the head from header lines as an origin sent them (ResponseHead.lines), passed on
   * as they are; `length` and `date`: they hold a Content-Length, a Date.
   */
  writeLines(status: number, lines: string, length: boolean, date: boolean): this {
    if (this.headersSent) return this;
    // setHeader values are merged by name, which takes the lines as a list.
    if (this.extra) return this.writeHead(status, headerList(lines));
    return this.prepareHead(status, lines, length, date);
  }

  private prepareHead(status: number, lines: string, length: boolean, date: boolean): this {
    this.statusCode = status;
    this.headersSent = true;
    let head = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Unknown'}\r\n${lines}`;
    if (!date) head += currentDateLine();
    const noBody = this.bodyless || statusHasNoBody(status);
    if (!length && !noBody) {
      this.chunked = true;
      head += 'transfer-encoding: chunked\r\n';
    }
    if (this.closeAfter || this.conn.draining) {
      this.closeAfter = true;
      head += 'connection: close\r\n';
    }
    this.head = `${head}\r\n`;
    return this;
  }

  /** Writes body bytes (with the head still pending, in the same write). */
  write(chunk: Buffer): boolean {
    return this.writeBody(chunk, false);
  }

  writeTransient(chunk: Buffer): boolean {
    return this.writeBody(chunk, true);
  }

  /** `transient`: `chunk` is only valid during this call, so it is copied if the socket keeps it. */
  private writeBody(chunk: Buffer, transient: boolean): boolean {
    if (this.destroyed || this.writableFinished) return false;
    const socket = this.conn.socket;
    if (this.bodyless || chunk.length === 0) return this.flushHead();
    let ok: boolean;
    const frame = this.chunked ? `${chunk.length.toString(16)}\r\n` : '';
    const head = this.head;
    if (head !== null && chunk.length <= COALESCE_BYTES) {
      this.head = null;
      const prefix = head + frame;
      // latin1: a byte per character.
      const prefixLen = prefix.length;
      const out = Buffer.allocUnsafe(prefixLen + chunk.length + (this.chunked ? 2 : 0));
      out.write(prefix, 0, 'latin1');
      chunk.copy(out, prefixLen);
      if (this.chunked) out.write('\r\n', prefixLen + chunk.length, 'latin1');
      ok = socket.write(out);
    } else {
      socket.cork();
      if (head !== null) {
        this.head = null;
        socket.write(head, 'latin1');
      }
      if (this.chunked) socket.write(frame, 'latin1');
      ok = socket.write(transient ? Buffer.from(chunk) : chunk);
      if (this.chunked) ok = socket.write('\r\n', 'latin1');
      socket.uncork();
    }
    if (!ok && !this.waitingDrain) {
      this.waitingDrain = true;
      socket.once('drain', this.onDrain);
    }
    return ok;
  }

  private flushHead(): boolean {
    if (this.head === null) return true;
    const head = this.head;
    this.head = null;
    return this.conn.socket.write(head, 'latin1');
  }

  /** Ends the response (writing the head first if nothing was written). */
  end(chunk?: string): this {
    if (this.destroyed || this.writableFinished) return this;
    if (!this.headersSent) this.writeHead(this.statusCode, {});
    if (chunk !== undefined && chunk.length > 0) this.write(Buffer.from(chunk));
    if (this.chunked && !this.bodyless) {
      const head = this.head ?? '';
      this.head = null;
      this.conn.socket.write(`${head}0\r\n\r\n`, 'latin1');
    } else this.flushHead();
    this.writableFinished = true;
    this.emit('finish');
    this.conn.responseDone();
    return this;
  }

  destroy(): this {
    if (this.destroyed) return this;
    this.destroyed = true;
    this.conn.socket.destroy();
    return this;
  }

  /** The response is over (finished, or its connection closed): 'close' as node's emits it. */
  closed(): void {
    this.destroyed = true;
    this.emit('close');
  }
}

/** One client connection served by the own server. */
class Http1Connection implements Expiring {
  readonly socket: Socket;
  deadline: number;
  private readonly server: Http1ServerImpl;
  private state: State = State.Head;
  private buf: Buffer | null = null;
  private req: FastRequest | null = null;
  private res: FastResponse | null = null;
  private pumping = false;
  private readonly partial = new PartialHead();
  private lingerTimer: NodeJS.Timeout | undefined;
  /** The client closed its sending side (sockets are half-open capable, as node's server's). */
  private peerEnded = false;

  /**
   * `socket` is a TLS socket, read through 'data' events, or a plain TCP socket accepted with
   * pauseOnConnect, which from here on reads into READ_BUFFER.
   */
  constructor(server: Http1ServerImpl, socket: Socket) {
    this.server = server;
    if (socket instanceof TLSSocket) socket.on('data', this.onData);
    else socket = withSharedReads(socket, this.onRead);
    this.socket = socket;
    socket.setNoDelay(true);
    this.deadline = deadlineIn(HEADERS_TIMEOUT_MS);
    CLIENT_DEADLINES.add(this);
    socket.on('end', this.onEnd);
    socket.on('error', this.onError);
    socket.on('close', this.onClose);
  }

  /** A head, a body or a keep-alive wait took too long. */
  expire(): void {
    this.socket.destroy();
  }

  get draining(): boolean {
    return this.server.draining;
  }

  /** Waiting for a request with nothing buffered: a shutdown may close it. */
  get idle(): boolean {
    return this.state === State.Head && this.buf === null;
  }

  /** A read into READ_BUFFER. A pause during it (backpressure) stops reading by itself. */
  private readonly onRead = (n: number): boolean => {
    const chunk = READ_BUFFER.subarray(0, n);
    if (this.state === State.Handed) {
      // Node's server reads the connection through the socket's stream once it lets go of it
      // (an upgrade's tunnel): the bytes go there.
      return this.socket.push(Buffer.from(chunk));
    }
    readStarted();
    try {
      this.onData(chunk);
    } finally {
      readEnded();
    }
    // Bytes kept for later (a partial head, pipelined requests) must outlive this read.
    if (this.buf !== null) this.buf = own(this.buf);
    return true;
  };

  private readonly onData = (chunk: Buffer): void => {
    switch (this.state) {
      case State.Head:
        if (this.buf === null) {
          // A new head: it has HEADERS_TIMEOUT_MS from its first byte.
          this.deadline = deadlineIn(HEADERS_TIMEOUT_MS);
          this.buf = chunk;
        } else this.buf = this.partial.append(this.buf, chunk);
        this.pump();
        return;
      case State.Body:
        this.feedBody(chunk);
        return;
      case State.Responding:
        this.buf = this.buf === null ? chunk : this.partial.append(this.buf, chunk);
        if (this.buf.length > PIPELINE_BUFFER) this.socket.pause();
        return;
      case State.Discarding:
        this.discard(chunk);
        return;
      default:
        return;
    }
  };

  private readonly onError = (): void => undefined;

  /**
   * The client sent its last byte (`printf ... | nc -N`, a script's `shutdown(SHUT_WR)`): what it
   * sent is still answered, then this side ends too. A body cut short ends the connection.
   */
  private readonly onEnd = (): void => {
    this.peerEnded = true;
    if (this.state === State.Body) this.socket.destroy();
    else if (this.state === State.Head || this.state === State.Discarding) this.socket.end();
  };

  private readonly onClose = (): void => {
    if (this.state === State.Handed) return;
    this.state = State.Closed;
    clearTimeout(this.lingerTimer);
    CLIENT_DEADLINES.delete(this);
    this.server.connections.delete(this);
    const req = this.req;
    const res = this.res;
    this.req = null;
    this.res = null;
    if (req && !req.complete) req.destroy();
    if (res && !res.writableFinished) res.closed();
  };

  /** Parses and dispatches buffered requests while each is answered at once. */
  private pump(): void {
    if (this.pumping) return;
    this.pumping = true;
    while (this.state === State.Head && this.buf !== null) {
      if (!this.dispatchOne()) break;
    }
    this.pumping = false;
  }

  /** Starts the request at the head of the buffer; false when its head is not all here yet. */
  private dispatchOne(): boolean {
    const buf = this.buf as Buffer;
    const max = this.server.maxHeaderSize;
    const text = this.partial.head(buf);
    if (text === undefined) {
      if (buf.length > max) this.handOff();
      return false;
    }
    if (text === null) {
      // Bare LF line ends: node's parser answers them with its 400.
      this.handOff();
      return false;
    }
    const end = text.length + 4;
    const head = end <= max ? parseRequestHead(text) : undefined;
    if (!head) {
      this.handOff();
      return false;
    }
    const rest = end === buf.length ? null : own(buf.subarray(end));
    const req = new FastRequest(this, head);
    const res = new FastResponse(this, head.method, head.close);
    this.req = req;
    this.res = res;
    this.buf = null;
    if (req.complete) {
      this.state = State.Responding;
      this.buf = rest;
      this.deadline = 0;
    } else {
      this.state = State.Body;
      this.deadline = deadlineIn(this.server.bodyIdleMs);
      if (rest && rest.length >= head.contentLength) req.bufferedBody = rest.subarray(0, head.contentLength);
      if (rest) this.feedBody(rest);
    }
    this.server.onRequest(req, res);
    return true;
  }

  /** Body bytes of the current request; what follows it is the next request's. */
  private feedBody(chunk: Buffer): void {
    const req = this.req as FastRequest;
    const n = Math.min(req.remaining, chunk.length);
    req.remaining -= n;
    if (this.state === State.Body) this.deadline = deadlineIn(this.server.bodyIdleMs);
    const more = req.push(own(n === chunk.length ? chunk : chunk.subarray(0, n)));
    if (n < chunk.length) this.buf = chunk.subarray(n);
    if (req.remaining === 0) {
      req.complete = true;
      req.push(null);
      if (this.state === State.Body) {
        this.state = State.Responding;
        this.deadline = 0;
      }
    } else if (!more) this.socket.pause();
  }

  /** The request's reader wants more of its body. */
  bodyWanted(): void {
    if (this.state === State.Body) this.socket.resume();
  }

  /** Drops the rest of a body nobody read after its response, then serves the next request. */
  private discard(chunk: Buffer): void {
    const req = this.req as FastRequest;
    const n = Math.min(req.remaining, chunk.length);
    req.remaining -= n;
    if (req.remaining > 0) return;
    req.complete = true;
    clearTimeout(this.lingerTimer);
    this.next(n < chunk.length ? chunk.subarray(n) : null);
  }

  /** The current response ended (FastResponse.end). */
  responseDone(): void {
    const req = this.req as FastRequest;
    const res = this.res as FastResponse;
    res.closed();
    if (this.state === State.Closed) return;
    const unread = !req.complete;
    if (res.closeAfter) {
      // Lingering close: the client reads the answer instead of a reset while it still sends.
      this.state = State.Discarding;
      req.remaining = Infinity;
      this.socket.end();
      this.linger();
      return;
    }
    if (unread) {
      this.state = State.Discarding;
      this.linger();
      return;
    }
    this.next(this.buf);
  }

  private linger(): void {
    this.deadline = 0;
    this.lingerTimer = setTimeout(() => this.socket.destroy(), LINGER_MS);
    this.lingerTimer.unref();
    this.socket.resume();
  }

  /** Back to waiting for a request, starting with `buffered` bytes. */
  private next(buffered: Buffer | null): void {
    this.req = null;
    this.res = null;
    this.state = State.Head;
    this.buf = buffered;
    if (this.socket.isPaused()) this.socket.resume();
    if (buffered === null) this.deadline = deadlineIn(KEEP_ALIVE_MS);
    else this.pump();
    // Every request a half-closed client sent is answered (or the rest is an incomplete head).
    if (this.peerEnded && this.state === State.Head) this.socket.end();
  }

  /** Node's server takes the connection, with the bytes read so far. */
  private handOff(): void {
    this.state = State.Handed;
    const socket = this.socket;
    socket.off('data', this.onData);
    socket.off('end', this.onEnd);
    socket.off('error', this.onError);
    socket.off('close', this.onClose);
    CLIENT_DEADLINES.delete(this);
    this.server.connections.delete(this);
    socket.pause();
    const bytes = this.buf && own(this.buf);
    this.buf = null;
    if (this.peerEnded) {
      // The client's end was read already (it half-closed after pipelining this request): a stream
      // that has ended takes no bytes back, so node's server hears the bytes and the end directly.
      this.server.fallback.emit('connection', socket);
      if (bytes) socket.emit('data', bytes);
      socket.emit('end');
      return;
    }
    if (bytes) socket.unshift(bytes);
    this.server.fallback.emit('connection', socket);
    socket.resume();
  }

  /** Shutdown. */
  close(): void {
    this.socket.destroy();
  }
}

export interface Http1Server {
  /**
   * Serves a new client connection: TLS once its handshake is done, or TCP accepted with
   * `pauseOnConnect` (nothing read yet; the server takes its reading over).
   */
  accept(socket: Socket): void;
  /** The cap on a request head for new requests (node's maxHeaderSize); runs after each reload. */
  setMaxHeaderSize(bytes: number): void;
  /** From now on every response closes its connection (shutdown). */
  drain(): void;
  /** Closes connections waiting for a request. */
  closeIdle(): void;
  /** Closes every connection. */
  closeAll(): void;
}

// Node's own answers to its parser's errors ('clientError' without a listener); others are 400.
const PARSER_ERROR_STATUS: Readonly<Record<string, number>> = { HPE_HEADER_OVERFLOW: 431, HPE_CHUNK_EXTENSIONS_OVERFLOW: 413, ERR_HTTP_REQUEST_TIMEOUT: 408 };

/**
 * Node's server's parser errors, answered as node answers them (a bare status, the connection
 * closed), except bytes after a request that closes its connection (HTTP/1.0 without keep-alive,
 * `Connection: close`, often pipelined by HTTP/1.0 tools): llhttp refuses them, and node's
 * default then wrote a 400 in place of the answer under way and cut the connection. They are
 * dropped, as the own server drops them; that answer goes out and closes the connection.
 */
function onNodeClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'HPE_CLOSED_CONNECTION') return;
  const inFlight = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage;
  // As node: nothing is written into an answer whose head is out.
  if (socket.writable && !inFlight?.headersSent) {
    const status = PARSER_ERROR_STATUS[err.code ?? ''] ?? 400;
    socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\nConnection: close\r\n\r\n`);
  }
  socket.destroy(err);
}

class Http1ServerImpl implements Http1Server {
  readonly connections = new Set<Http1Connection>();
  maxHeaderSize: number;
  readonly bodyIdleMs: number;
  draining = false;
  readonly onRequest: (req: FastRequest, res: FastResponse) => void;
  readonly fallback: Server;

  constructor(opts: Http1ServerOptions) {
    this.onRequest = opts.onRequest;
    this.fallback = opts.fallback;
    this.maxHeaderSize = opts.maxHeaderSize;
    this.bodyIdleMs = opts.bodyIdleMs ?? BODY_IDLE_MS;
    // Node's server times out a slow head (headersTimeout, 60 s as here) only on connections it
    // tracks, and starts tracking when it listens, which the fallback never does: without this a
    // connection handed to it could trickle its next head forever. Its requestTimeout (a whole
    // request within 5 minutes) stays off: the own server bounds no upload's total time either.
    opts.fallback.requestTimeout = 0;
    opts.fallback.emit('listening');
    opts.fallback.on('request', this.timeBody);
    opts.fallback.on('clientError', onNodeClientError);
  }

  /**
   * A request body on node's server may pause up to bodyIdleMs too (node has no such timeout):
   * the socket's timeout runs from its last byte either way, and node hands it to the request
   * while its body is incomplete, else to the response. So the request's closes the connection
   * (a stalled upload held it open for good), and the response's turns the timeout off once the
   * body is whole: a slow origin is read_timeout_ms's business, keep-alive node's own.
   */
  private readonly timeBody = (req: IncomingMessage, res: ServerResponse): void => {
    const socket = req.socket;
    req.setTimeout(this.bodyIdleMs, () => socket.destroy());
    res.on('timeout', () => socket.setTimeout(0));
  };

  accept(socket: Socket): void {
    this.connections.add(new Http1Connection(this, socket));
  }

  setMaxHeaderSize(bytes: number): void {
    this.maxHeaderSize = bytes;
  }

  drain(): void {
    this.draining = true;
  }

  closeIdle(): void {
    for (const c of this.connections) if (c.idle) c.close();
  }

  closeAll(): void {
    for (const c of this.connections) c.close();
  }
}

export interface Http1ServerOptions {
  /** The data plane's request handler. */
  onRequest: (req: FastRequest, res: FastResponse) => void;
  /** Node's server (not listening): it takes connections with requests outside the fast path. */
  fallback: Server;
  maxHeaderSize: number;
  /** How long a request body may pause on either server (60 s; tests shorten it). */
  bodyIdleMs?: number;
}

/** Creates the server for one listener; runs once per listener at start. */
export function createHttp1Server(opts: Http1ServerOptions): Http1Server {
  return new Http1ServerImpl(opts);
}

/**
 * The data plane's HTTP/1.1 client to origins: a keep-alive pool of plain or TLS connections
 * (optionally opened with a PROXY protocol header), one request at a time per connection. It
 * replaces undici on the forward path because per-request cost is what the proxy's throughput
 * is made of (docs/decisions.md "Reverse proxy: own HTTP/1.1 data plane"): socket listeners are
 * attached once per connection, a request head and a small body leave in one write, and the
 * response is parsed in place.
 *
 * A request on a reused connection that the origin closed before answering is retried once on a
 * new connection when it is safe (GET, HEAD or OPTIONS without a body), as nginx does.
 */
import { connect as netConnect, isIP, type Socket } from 'node:net';
import type { Readable } from 'node:stream';
import { connect as tlsConnect } from 'node:tls';
import { DeadlineList, deadlineIn, type Expiring } from './deadlines.ts';
import { ChunkedDecoder, PartialHead, headText, parseResponseHead, scanResponseHead, type ResponseHead } from './http1-parse.ts';
import { readEnded, readStarted } from './read-clock.ts';

/** Error codes of this client besides the socket's own (ECONNREFUSED, ECONNRESET, ...). */
export const ORIGIN_ERRORS = {
  connectTimeout: 'ORIGIN_CONNECT_TIMEOUT',
  headersTimeout: 'ORIGIN_HEADERS_TIMEOUT',
  bodyTimeout: 'ORIGIN_BODY_TIMEOUT',
  closed: 'ORIGIN_CLOSED',
  protocol: 'ORIGIN_PROTOCOL',
  bodyTooLarge: 'BODY_TOO_LARGE',
  clientGone: 'CLIENT_GONE',
} as const;

export class OriginError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.code = code;
  }
}

// The largest origin response head accepted.
const MAX_HEAD_BYTES = 64 * 1024;
// Bodies up to this size leave in the same write as the request head.
const COALESCE_BYTES = 16 * 1024;

export interface OriginTarget {
  host: string;
  port: number;
  secure: boolean;
  connectTimeoutMs: number;
  /** Longest wait for the origin's next byte once a request is under way. */
  readTimeoutMs: number;
  /** How long an idle connection is kept; 0: every request closes its connection. */
  keepAliveMs: number;
  /** Idle connections beyond this many close after SURPLUS_IDLE_MS instead. */
  maxIdle: number;
  /** Written first on every new connection (a PROXY protocol header), before TLS. */
  preface?: Buffer;
  /** The source address of every connection (transparent mode: the client's). */
  localAddress?: string;
}

// Plain origin connections read into this one buffer (net's `onread`): no Buffer and no stream
// event per read. Reads are handled synchronously, and bytes kept past a read are copied.
const READ_BUFFER = Buffer.allocUnsafe(64 * 1024);

// Origin connections' timeouts are checked this often (timeouts are configured in milliseconds).
const ORIGIN_DEADLINES = new DeadlineList(50);

// Idle connections beyond maxIdle close after this long: a burst's extra connections go soon.
const SURPLUS_IDLE_MS = 1_000;

/** The part of a readable stream the client reads a request body through. */
export type BodyStream = Pick<Readable, 'on' | 'once' | 'off' | 'pause' | 'resume'>;

/** The request body sent to the origin. */
export interface OriginBody {
  /** Bytes already read from the client (the WAF's prefix), sent first. */
  chunks: readonly Buffer[];
  /** The rest of the body as it arrives, or null when `chunks` hold all of it. */
  rest: BodyStream | null;
  /** The Content-Length sent; undefined sends the body chunked. */
  length: number | undefined;
  /** Of a chunked body: the transfer codings it has besides chunked (`gzip`), named before it. */
  codings?: string;
  /** More bytes than this fail the request with BODY_TOO_LARGE (bodies of unknown length). */
  max: number;
}

export interface OriginHandler {
  /** The final response head (1xx answers are skipped). */
  onResponse(head: ResponseHead): void;
  /**
   * A piece of the response body; false pauses the origin until the exchange is resumed.
   * `transient`: the bytes are in this client's shared read buffer, valid during this call only (the
   * handler copies what it keeps).
   */
  onData(chunk: Buffer, transient: boolean): boolean;
  onEnd(): void;
  /** The request failed; nothing else is called after this. */
  onError(err: OriginError): void;
  /** Request body bytes handed to the origin connection. */
  onBodySent(bytes: number): void;
}

export interface Exchange {
  /** Resumes a response paused by onData returning false. */
  resume(): void;
  /** Gives the request up (the client went away): its connection is closed, no callback follows. */
  abort(): void;
}

interface Conn extends Expiring {
  socket: Socket;
  /** The exchange the connection serves, null while idle or connecting. */
  exchange: OriginExchange | null;
  /** It served a request before (so the origin may have closed it meanwhile). */
  reused: boolean;
  connected: boolean;
}

const RETRYABLE = new Set(['GET', 'HEAD', 'OPTIONS']);

/** One request/response on a pool connection. */
class OriginExchange implements Exchange {
  private conn: Conn | null = null;
  private head: Buffer | null = null;
  /** Made when a response head arrives in more than one piece. */
  private partial: PartialHead | null = null;
  private response: ResponseHead | null = null;
  private remaining = 0;
  private decoder: ChunkedDecoder | null = null;
  private requestSent = false;
  private over = false;
  private gotBytes = false;
  private retried = false;
  private paused = false;
  private aborted = false;
  private readonly queued: Buffer[] = [];
  private endQueued = false;
  private transient = false;

  private readonly pool: OriginPool;
  readonly method: string;
  private readonly headBytes: string;
  private readonly body: OriginBody | null;
  private readonly handler: OriginHandler;

  constructor(pool: OriginPool, method: string, headBytes: string, body: OriginBody | null, handler: OriginHandler) {
    this.pool = pool;
    this.method = method;
    this.headBytes = headBytes;
    this.body = body;
    this.handler = handler;
  }

  start(conn: Conn): void {
    this.conn = conn;
    conn.exchange = this;
    this.gotBytes = false;
    this.head = null;
    conn.deadline = deadlineIn(conn.connected ? this.pool.target.readTimeoutMs : this.pool.target.connectTimeoutMs);
    if (conn.connected) this.send();
  }

  /** The connection is up (TLS done): the request goes out. */
  connected(): void {
    if (this.conn) this.conn.deadline = deadlineIn(this.pool.target.readTimeoutMs);
    this.send();
  }

  private send(): void {
    const socket = (this.conn as Conn).socket;
    const body = this.body;
    if (!body) {
      this.requestSent = true;
      socket.write(this.headBytes, 'latin1');
      return;
    }
    const chunked = body.length === undefined;
    let size = 0;
    for (const c of body.chunks) size += c.length;
    if (size > body.max) {
      this.fail(new OriginError(ORIGIN_ERRORS.bodyTooLarge, 'request body exceeds max_body_bytes'));
      return;
    }
    if (!chunked && body.rest === null && size <= COALESCE_BYTES) {
      // Head and whole body in one write.
      // latin1: a byte per character.
      const headLen = this.headBytes.length;
      const out = Buffer.allocUnsafe(headLen + size);
      out.write(this.headBytes, 0, 'latin1');
      let at = headLen;
      for (const c of body.chunks) at += c.copy(out, at);
      socket.write(out);
    } else {
      socket.cork();
      socket.write(this.headBytes, 'latin1');
      for (const c of body.chunks) this.writeBody(c, chunked);
      socket.uncork();
    }
    this.countSent(size);
    if (body.rest === null) {
      this.endBody(chunked);
      return;
    }
    this.stream(body.rest, chunked, size, body.max);
  }

  private writeBody(chunk: Buffer, chunked: boolean): boolean {
    const socket = (this.conn as Conn).socket;
    if (chunk.length === 0) return true;
    if (!chunked) return socket.write(chunk);
    socket.write(`${chunk.length.toString(16)}\r\n`, 'latin1');
    socket.write(chunk);
    return socket.write('\r\n', 'latin1');
  }

  private endBody(chunked: boolean): void {
    const conn = this.conn as Conn;
    if (chunked) conn.socket.write('0\r\n\r\n', 'latin1');
    this.requestSent = true;
    // The origin has the whole request: its answer is timed from here.
    conn.deadline = deadlineIn(this.pool.target.readTimeoutMs);
  }

  private countSent(n: number): void {
    if (n !== 0) this.handler.onBodySent(n);
  }

  /** Streams the rest of the request body with backpressure both ways. */
  private stream(rest: BodyStream, chunked: boolean, already: number, max: number): void {
    let read = already;
    const socket = (this.conn as Conn).socket;
    const onData = (chunk: Buffer): void => {
      if (this.over) return;
      read += chunk.length;
      if (read > max) {
        cleanup();
        this.fail(new OriginError(ORIGIN_ERRORS.bodyTooLarge, 'request body exceeds max_body_bytes'));
        return;
      }
      const ok = this.writeBody(chunk, chunked);
      this.countSent(chunk.length);
      if (!ok) {
        // The origin is not taking the body: that wait is the origin's, timed as its answer is.
        const conn = this.conn as Conn;
        conn.deadline = deadlineIn(this.pool.target.readTimeoutMs);
        rest.pause();
        socket.once('drain', () => {
          // Back to the client's pace, unless the origin has begun its answer (timed by its bytes).
          if (!this.over && !this.gotBytes) conn.deadline = 0;
          rest.resume();
        });
      }
    };
    const onEnd = (): void => {
      cleanup();
      if (!this.over) this.endBody(chunked);
    };
    const onGone = (): void => {
      cleanup();
      if (!this.over) this.fail(new OriginError(ORIGIN_ERRORS.clientGone, 'client closed the connection'));
    };
    const cleanup = (): void => {
      rest.off('data', onData);
      rest.off('end', onEnd);
      rest.off('close', onGone);
      rest.off('error', onGone);
    };
    rest.on('data', onData);
    rest.once('end', onEnd);
    rest.once('close', onGone);
    rest.once('error', onGone);
    // While the client is still sending, a pause is the client's: its body idle timeout (60 s)
    // ends a stalled upload, and read_timeout_ms would blame the origin for it with a 502.
    (this.conn as Conn).deadline = 0;
    rest.resume();
  }

  /**
   * Bytes from the origin; `transient`: they are in the shared read buffer and are copied before
   * anything keeps them.
   */
  data(buf: Buffer, transient: boolean): void {
    if (this.over) return;
    this.gotBytes = true;
    this.transient = transient;
    (this.conn as Conn).deadline = deadlineIn(this.pool.target.readTimeoutMs);
    if (this.response === null) {
      let all = buf;
      if (this.head) {
        this.partial ??= new PartialHead();
        all = this.partial.append(this.head, buf);
      }
      for (;;) {
        const bodyless = this.method === 'HEAD';
        // A head whole in one read and of the usual shape is read from its bytes; any other goes
        // through its text.
        let parsed = this.partial ? null : scanResponseHead(all, bodyless);
        if (parsed === null) {
          const text = this.partial ? this.partial.head(all) : headText(all);
          if (text === undefined) {
            if (all.length > MAX_HEAD_BYTES) return this.fail(new OriginError(ORIGIN_ERRORS.protocol, 'origin response head too large'));
            this.head = transient && all === buf ? Buffer.from(all) : all;
            return;
          }
          if (text === null) return this.fail(new OriginError(ORIGIN_ERRORS.protocol, 'origin response head has bare LF line ends'));
          try {
            parsed = parseResponseHead(text, bodyless);
          } catch (err) {
            return this.fail(new OriginError(ORIGIN_ERRORS.protocol, (err as Error).message));
          }
        }
        all = all.subarray(parsed.size);
        if (parsed.status >= 100 && parsed.status < 200) {
          if (parsed.status === 101) return this.fail(new OriginError(ORIGIN_ERRORS.protocol, 'origin switched protocols on a plain request'));
          continue;
        }
        this.head = null;
        this.response = parsed;
        if (parsed.framing.kind === 'length') this.remaining = parsed.framing.length;
        else if (parsed.framing.kind === 'chunked') this.decoder = new ChunkedDecoder((c) => this.deliver(c));
        this.handler.onResponse(parsed);
        if (this.over) return;
        break;
      }
      if (this.response.framing.kind === 'length' && this.remaining === 0) {
        if (all.length > 0) this.response.reusable = false;
        return this.complete();
      }
      if (all.length === 0) return;
      buf = all;
    }
    this.bodyBytes(buf);
  }

  private bodyBytes(buf: Buffer): void {
    const framing = (this.response as ResponseHead).framing;
    if (framing.kind === 'length') {
      const n = Math.min(this.remaining, buf.length);
      this.remaining -= n;
      if (n < buf.length) (this.response as ResponseHead).reusable = false;
      this.deliver(n === buf.length ? buf : buf.subarray(0, n));
      if (this.remaining === 0 && !this.over) this.complete();
      return;
    }
    if (framing.kind === 'close') {
      this.deliver(buf);
      return;
    }
    const decoder = this.decoder as ChunkedDecoder;
    let used: number;
    try {
      used = decoder.push(buf);
    } catch (err) {
      return this.fail(new OriginError(ORIGIN_ERRORS.protocol, (err as Error).message));
    }
    if (decoder.done && !this.over) {
      if (used < buf.length) (this.response as ResponseHead).reusable = false;
      this.complete();
    }
  }

  private deliver(piece: Buffer): void {
    if (this.over || piece.length === 0) return;
    // While paused, pieces parsed from bytes already read wait here, in order.
    if (this.paused) {
      this.queued.push(this.transient ? Buffer.from(piece) : piece);
      return;
    }
    if (!this.handler.onData(piece, this.transient) && !this.over) this.pause();
  }

  private pause(): void {
    this.paused = true;
    this.conn?.socket.pause();
  }

  resume(): void {
    if (!this.paused || this.aborted) return;
    this.paused = false;
    while (this.queued.length > 0) {
      if (!this.handler.onData(this.queued.shift() as Buffer, false)) {
        this.paused = true;
        return;
      }
    }
    if (this.endQueued) {
      this.endQueued = false;
      this.handler.onEnd();
      return;
    }
    if (!this.over) this.conn?.socket.resume();
  }

  /** The response is whole: the connection goes back to the pool when it can carry another request. */
  private complete(): void {
    this.over = true;
    const conn = this.conn as Conn;
    this.conn = null;
    conn.exchange = null;
    if (this.paused) conn.socket.resume();
    const reusable = (this.response as ResponseHead).reusable && this.requestSent && this.pool.target.keepAliveMs > 0;
    this.pool.finished(conn, reusable);
    this.end();
  }

  /** The body is over: the handler hears it once the pieces waiting for a resume went out. */
  private end(): void {
    if (this.paused) this.endQueued = true;
    else this.handler.onEnd();
  }

  /** The connection closed (or failed) under this exchange. */
  closed(err: Error | undefined): void {
    if (this.over) return;
    const conn = this.conn as Conn;
    // A close-delimited body ends with the connection.
    if (err === undefined && this.response?.framing.kind === 'close') {
      this.conn = null;
      this.over = true;
      this.pool.finished(conn, false);
      this.end();
      return;
    }
    // A kept-alive connection the origin closed just as it was reused: once more on a new one.
    if (conn.reused && !this.gotBytes && !this.retried && this.body === null && RETRYABLE.has(this.method)) {
      this.retried = true;
      conn.exchange = null;
      this.pool.connectFor(this);
      return;
    }
    const code = (err as { code?: unknown } | undefined)?.code;
    this.fail(new OriginError(typeof code === 'string' ? code : ORIGIN_ERRORS.closed, err?.message ?? 'origin closed the connection before the response was over'));
  }

  /** No byte from the origin for too long (or no connection in time). */
  timedOut(): void {
    const code = !this.conn?.connected ? ORIGIN_ERRORS.connectTimeout : this.response === null ? ORIGIN_ERRORS.headersTimeout : ORIGIN_ERRORS.bodyTimeout;
    this.fail(new OriginError(code, 'origin timed out'));
  }

  abort(): void {
    this.aborted = true;
    this.queued.length = 0;
    if (this.over) return;
    this.over = true;
    const conn = this.conn;
    this.conn = null;
    if (conn) this.pool.finished(conn, false);
  }

  private fail(err: OriginError): void {
    if (this.over) return;
    this.over = true;
    const conn = this.conn;
    this.conn = null;
    if (conn) this.pool.finished(conn, false);
    this.handler.onError(err);
  }
}

/** A keep-alive pool of connections to one origin (and, with a preface, one client). */
export class OriginPool {
  private readonly idle: Conn[] = [];
  private active = 0;
  private closing = false;
  private drained: (() => void) | undefined;

  readonly target: OriginTarget;

  constructor(target: OriginTarget) {
    this.target = target;
  }

  /**
   * Sends one request; `headLines` are the header lines (`name: value\r\n` each, no framing
   * headers). Runs once per forwarded request; the handler hears how it ends.
   */
  request(method: string, path: string, headLines: string, body: OriginBody | null, handler: OriginHandler): Exchange {
    let head = `${method} ${path} HTTP/1.1\r\n${headLines}`;
    if (body) head += body.length !== undefined ? `content-length: ${body.length}\r\n` : `transfer-encoding: ${body.codings === undefined ? '' : `${body.codings}, `}chunked\r\n`;
    if (this.target.keepAliveMs === 0) head += 'connection: close\r\n';
    const exchange = new OriginExchange(this, method, `${head}\r\n`, body, handler);
    this.active++;
    const conn = this.idle.pop();
    if (conn) exchange.start(conn);
    else this.connectFor(exchange);
    return exchange;
  }

  /** Requests under way or connections waiting: the pool is in use. */
  busy(): boolean {
    return this.active > 0;
  }

  /** Opens a new connection for `exchange`. */
  connectFor(exchange: OriginExchange): void {
    const t = this.target;
    let socket: Socket;
    const conn: Conn = {
      socket: undefined as unknown as Socket,
      exchange: null,
      reused: false,
      connected: false,
      deadline: 0,
      expire() {
        // Connect or read timeout of a request, or the end of an idle connection's keep-alive.
        if (conn.exchange) conn.exchange.timedOut();
        else conn.socket.destroy();
      },
    };
    const onUp = (): void => {
      conn.connected = true;
      conn.socket.setNoDelay(true);
      conn.exchange?.connected();
    };
    const servername = isIP(t.host) === 0 ? { servername: t.host } : {};
    const local = t.localAddress === undefined ? {} : { localAddress: t.localAddress };
    if (t.preface) {
      const raw = netConnect({ host: t.host, port: t.port, ...local });
      raw.write(t.preface);
      if (t.secure) {
        socket = tlsConnect({ socket: raw, host: t.host, ...servername, ALPNProtocols: ['http/1.1'] });
        raw.once('error', (err) => socket.destroy(err));
        socket.once('secureConnect', onUp);
      } else {
        socket = raw;
        socket.once('connect', onUp);
      }
    } else if (t.secure) {
      socket = tlsConnect({ host: t.host, port: t.port, ...local, ...servername, ALPNProtocols: ['http/1.1'] });
      socket.once('secureConnect', onUp);
    } else {
      // A pause during the callback (backpressure) stops reading by itself.
      const onRead = (n: number): boolean => {
        readStarted();
        try {
          onBytes(READ_BUFFER.subarray(0, n), true);
        } finally {
          readEnded();
        }
        return true;
      };
      socket = netConnect({ host: t.host, port: t.port, ...local, onread: { buffer: READ_BUFFER, callback: onRead } });
      socket.once('connect', onUp);
    }
    conn.socket = socket;
    let failure: Error | undefined;
    const onBytes = (buf: Buffer, transient: boolean): void => {
      if (conn.exchange) conn.exchange.data(buf, transient);
      // Bytes on an idle connection belong to no request: it cannot be trusted any more.
      else socket.destroy();
    };
    if (t.secure || t.preface) socket.on('data', (buf: Buffer) => onBytes(buf, false));
    socket.on('error', (err) => {
      failure = err;
    });
    ORIGIN_DEADLINES.add(conn);
    socket.on('close', () => {
      ORIGIN_DEADLINES.delete(conn);
      const i = this.idle.indexOf(conn);
      if (i !== -1) this.idle.splice(i, 1);
      conn.exchange?.closed(failure);
    });
    exchange.start(conn);
  }

  /** An exchange let go of its connection: back to the idle list, or closed. */
  finished(conn: Conn, reusable: boolean): void {
    conn.exchange = null;
    this.active--;
    if (!reusable || this.closing) {
      conn.socket.destroy();
    } else {
      conn.reused = true;
      conn.deadline = deadlineIn(this.idle.length < this.target.maxIdle ? this.target.keepAliveMs : Math.min(SURPLUS_IDLE_MS, this.target.keepAliveMs));
      this.idle.push(conn);
    }
    if (this.active === 0) this.drained?.();
  }

  /** Closes the idle connections now and the busy ones once their requests are over. */
  close(): Promise<void> {
    this.closing = true;
    for (const conn of this.idle.splice(0)) conn.socket.destroy();
    if (this.active === 0) return Promise.resolve();
    return new Promise((resolve) => {
      this.drained = resolve;
    });
  }
}

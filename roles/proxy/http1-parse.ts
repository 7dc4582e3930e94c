/**
 * HTTP/1.1 message heads and chunked bodies, for the data plane's own server (http1-server.ts)
 * and origin client (origin-client.ts). The request parser is deliberately narrow: it accepts the
 * plain requests that make up nearly all traffic and returns undefined for anything else (another
 * version or method, Transfer-Encoding, Upgrade, Expect, absolute-form targets, obs-fold, bare CR or LF,
 * odd bytes, repeated Host or Content-Length), which the server then hands to node's llhttp with
 * its full strictness and error answers. The response parser is for origins: it accepts what
 * origins send and refuses (throws) what a proxy must not pass on.
 */
import { HOP_BY_HOP, connectionListed } from './hop-headers.ts';

/** RFC 9110 token characters (header names, methods), by character code. */
const TOKEN_CHARS = new Uint8Array(128);
for (const c of "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") TOKEN_CHARS[c.charCodeAt(0)] = 1;

/** `s.slice(start, end)` is a non-empty token. */
function isToken(s: string, start: number, end: number): boolean {
  if (end <= start) return false;
  for (let i = start; i < end; i++) {
    const c = s.charCodeAt(i);
    if (c >= 128 || TOKEN_CHARS[c] === 0) return false;
  }
  return true;
}

/** The header value after the colon at `colon`, without the optional whitespace around it. */
function headerValue(line: string, colon: number): string {
  let start = colon + 1;
  let end = line.length;
  while (start < end && (line.charCodeAt(start) === 32 || line.charCodeAt(start) === 9)) start++;
  while (end > start && (line.charCodeAt(end - 1) === 32 || line.charCodeAt(end - 1) === 9)) end--;
  return line.slice(start, end);
}
// Bytes a request head may hold besides CR LF: HTAB, visible ASCII, space, obs-text (as latin1).
const BAD_REQUEST_BYTE = /[^\t\r\n\x20-\x7e\x80-\xff]/;
// Request targets in origin form: visible ASCII only (llhttp's strict set).
const ORIGIN_FORM = /^\/[\x21-\x7e]*$/;
const DIGITS = /^\d{1,15}$/;
// The methods the fast path serves; others (WebDAV, CONNECT, unknown ones llhttp refuses with
// 400) go to node's parser.
const FAST_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH']);

/** The status of an `HTTP/1.x NNN reason` line ending at `eol`; throws on anything else. */
function statusOf(head: string, eol: number): number {
  const d = (i: number): number => head.charCodeAt(i) - 48;
  const minor = d(7);
  const a = d(9);
  const b = d(10);
  const c = d(11);
  if (
    !head.startsWith('HTTP/1.') ||
    (minor !== 0 && minor !== 1) ||
    head.charCodeAt(8) !== 32 ||
    !(a >= 1 && a <= 9 && b >= 0 && b <= 9 && c >= 0 && c <= 9) ||
    (eol > 12 && head.charCodeAt(12) !== 32)
  ) {
    throw new OriginProtocolError(`bad status line ${JSON.stringify(head.slice(0, Math.min(eol, 64)))}`);
  }
  return a * 100 + b * 10 + c;
}

// Header names as origins spell them, lower-cased once: the same few dozen names recur.
const LOWER = new Map<string, string>();
const LOWER_MAX = 1024;

function lowerName(name: string): string {
  let lower = LOWER.get(name);
  if (lower === undefined) {
    lower = name.toLowerCase();
    if (LOWER.size < LOWER_MAX) LOWER.set(name, lower);
  }
  return lower;
}

/** Header names node keeps one value of (its `matchKnownFields`): a repeat is dropped. */
const SINGLE_VALUED: ReadonlySet<string> = new Set([
  'age',
  'authorization',
  'content-length',
  'content-type',
  'etag',
  'expires',
  'from',
  'host',
  'if-modified-since',
  'if-unmodified-since',
  'last-modified',
  'location',
  'max-forwards',
  'proxy-authorization',
  'referer',
  'retry-after',
  'server',
  'user-agent',
]);

/** A request head the fast path serves. */
export interface RequestHead {
  method: string;
  target: string;
  /** Node's `req.headers` shape: lower-case names, repeats joined as node joins them. */
  headers: Record<string, string | undefined> & { 'set-cookie'?: string[] };
  /** Names and values as received, alternating (node's `rawHeaders`). */
  rawHeaders: string[];
  /** The declared body length, 0 without Content-Length. */
  contentLength: number;
  /** The client asked to close the connection after this request. */
  close: boolean;
}

/** Adds one request header to a node-style header object. */
function addRequestHeader(headers: RequestHead['headers'], name: string, value: string): void {
  const prev = headers[name];
  if (prev === undefined) {
    if (name === 'set-cookie') headers['set-cookie'] = [value];
    else headers[name] = value;
    return;
  }
  if (name === 'set-cookie') (prev as unknown as string[]).push(value);
  else if (SINGLE_VALUED.has(name)) return;
  else headers[name] = `${prev}${name === 'cookie' ? '; ' : ', '}${value}`;
}

/** The Connection header's tokens include `token` (lower case). */
function connectionHas(value: string | undefined, token: string): boolean {
  if (value === undefined) return false;
  for (const part of value.split(',')) if (part.trim().toLowerCase() === token) return true;
  return false;
}

/**
 * Parses the request head in `head` (latin1, without the final CRLF CRLF). Returns undefined when
 * the request is not one the fast path serves; node's parser then takes the connection.
 */
export function parseRequestHead(head: string): RequestHead | undefined {
  if (BAD_REQUEST_BYTE.test(head)) return undefined;
  const lines = head.split('\r\n');
  const requestLine = lines[0] as string;
  const sp1 = requestLine.indexOf(' ');
  const sp2 = requestLine.indexOf(' ', sp1 + 1);
  if (sp1 <= 0 || sp2 === -1 || requestLine.slice(sp2 + 1) !== 'HTTP/1.1') return undefined;
  const method = requestLine.slice(0, sp1);
  const target = requestLine.slice(sp1 + 1, sp2);
  if (!FAST_METHODS.has(method) || !ORIGIN_FORM.test(target)) return undefined;
  const headers: RequestHead['headers'] = {};
  const rawHeaders: string[] = [];
  let sawHost = false;
  let sawLength = false;
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i] as string;
    const colon = line.indexOf(':');
    if (!isToken(line, 0, colon) || line.includes('\r') || line.includes('\n')) return undefined;
    const name = line.slice(0, colon);
    const value = headerValue(line, colon);
    const lower = name.toLowerCase();
    switch (lower) {
      case 'transfer-encoding':
      case 'upgrade':
      case 'expect':
        return undefined;
      case 'host':
        if (sawHost) return undefined;
        sawHost = true;
        break;
      case 'content-length':
        if (sawLength || !DIGITS.test(value)) return undefined;
        sawLength = true;
        break;
    }
    rawHeaders.push(name, value);
    addRequestHeader(headers, lower, value);
  }
  const length = headers['content-length'];
  return { method, target, headers, rawHeaders, contentLength: length === undefined ? 0 : Number(length), close: connectionHas(headers['connection'], 'close') };
}

/** An origin's response head. */
export interface ResponseHead {
  status: number;
  /**
   * End-to-end headers as `[name, value, ...]`, names in lower case. Hop-by-hop headers and
   * those the Connection header lists describe the origin connection and are consumed here.
   */
  headers: string[];
  /** The body's framing: a length, chunked, or up to the end of the connection. */
  framing: { kind: 'length'; length: number } | { kind: 'chunked' } | { kind: 'close' };
  /** The connection may carry another request once this response is over. */
  reusable: boolean;
}

/** An origin answer a proxy cannot pass on (the client gets a 502). */
export class OriginProtocolError extends Error {}

/**
 * Parses an origin's response head (latin1, without the final CRLF CRLF); throws
 * OriginProtocolError on a malformed one. `bodyless` (a HEAD request) means no body follows
 * whatever the head says. Runs once per forwarded response.
 */
export function parseResponseHead(head: string, bodyless: boolean): ResponseHead {
  if (head.includes('\0')) throw new OriginProtocolError('NUL in response head');
  let eol = head.indexOf('\r\n');
  if (eol === -1) eol = head.length;
  const status = statusOf(head, eol);
  const http11 = head.charCodeAt(7) === 0x31;
  const headers: string[] = [];
  let length: string | undefined;
  let chunked = false;
  let encoded = false;
  let connection: string | undefined;
  for (let start = eol + 2; start < head.length; start = eol + 2) {
    eol = head.indexOf('\r\n', start);
    if (eol === -1) eol = head.length;
    const colon = head.indexOf(':', start);
    if (colon === -1 || colon > eol || !isToken(head, start, colon)) throw new OriginProtocolError('bad header line');
    const line = head.slice(start, eol);
    if (line.includes('\r') || line.includes('\n')) throw new OriginProtocolError('bare CR or LF in a header line');
    const value = headerValue(line, colon - start);
    const lower = lowerName(line.slice(0, colon - start));
    if (lower === 'content-length') {
      if (!DIGITS.test(value) || (length !== undefined && length !== value)) throw new OriginProtocolError('bad Content-Length');
      // Added back below when it describes the body.
      length = value;
      continue;
    }
    if (HOP_BY_HOP.has(lower)) {
      if (lower === 'transfer-encoding') {
        encoded = true;
        chunked = value.toLowerCase().split(',').at(-1)?.trim() === 'chunked';
      } else if (lower === 'connection') connection = connection === undefined ? value : `${connection},${value}`;
      continue;
    }
    headers.push(lower, value);
  }
  let keepAlive = http11;
  // Nearly every origin says just `keep-alive` (or nothing): no names to drop.
  if (connection !== undefined && connection !== 'keep-alive') {
    const listed = connectionListed(connection);
    if (listed) for (let i = headers.length - 2; i >= 0; i -= 2) if (listed.has(headers[i] as string)) headers.splice(i, 2);
    keepAlive = http11 ? !connectionHas(connection, 'close') : connectionHas(connection, 'keep-alive');
  } else if (connection === 'keep-alive') keepAlive = true;
  // A HEAD answer's or a 304's length describes the body the client did not ask for: it is kept.
  if (length !== undefined && !encoded) headers.push('content-length', length);
  if (bodyless || status < 200 || status === 204 || status === 304) return { status, headers, framing: { kind: 'length', length: 0 }, reusable: keepAlive };
  // Transfer-Encoding wins over Content-Length (RFC 9112 §6.3), and such a connection is not reused.
  if (encoded) return { status, headers, framing: chunked ? { kind: 'chunked' } : { kind: 'close' }, reusable: chunked && length === undefined && keepAlive };
  if (length !== undefined) return { status, headers, framing: { kind: 'length', length: Number(length) }, reusable: keepAlive };
  return { status, headers, framing: { kind: 'close' }, reusable: false };
}

// The decoder's states.
const ChunkState = { Size: 0, Data: 1, DataEnd: 2, Trailers: 3, Done: 4 } as const;
type ChunkState = (typeof ChunkState)[keyof typeof ChunkState];

// A chunk-size line (with extensions) or trailer line longer than this is refused.
const MAX_CHUNK_LINE = 4096;

/**
 * Decodes a chunked body as it arrives, passing each piece of data on; trailers are read and
 * dropped (node's server writes none either). Throws OriginProtocolError on bad framing.
 */
export class ChunkedDecoder {
  private state: ChunkState = ChunkState.Size;
  private remaining = 0;
  private line = '';

  private readonly onData: (chunk: Buffer) => void;

  constructor(onData: (chunk: Buffer) => void) {
    this.onData = onData;
  }

  /** The terminating chunk and trailers were read. */
  get done(): boolean {
    return this.state === ChunkState.Done;
  }

  /** Feeds bytes; returns how many were part of the body (the rest belongs to the next message). */
  push(buf: Buffer): number {
    let i = 0;
    while (i < buf.length && this.state !== ChunkState.Done) {
      if (this.state === ChunkState.Data) {
        const n = Math.min(this.remaining, buf.length - i);
        this.onData(buf.subarray(i, i + n));
        i += n;
        this.remaining -= n;
        if (this.remaining === 0) this.state = ChunkState.DataEnd;
        continue;
      }
      const nl = buf.indexOf(10, i);
      const end = nl === -1 ? buf.length : nl + 1;
      this.line += buf.toString('latin1', i, end);
      i = end;
      if (this.line.length > MAX_CHUNK_LINE) throw new OriginProtocolError('chunk line too long');
      if (nl === -1) break;
      if (!this.line.endsWith('\r\n')) throw new OriginProtocolError('bare LF in chunked body');
      const text = this.line.slice(0, -2);
      this.line = '';
      this.lineDone(text);
    }
    return i;
  }

  private lineDone(text: string): void {
    switch (this.state) {
      case ChunkState.Size: {
        const semi = text.indexOf(';');
        const hex = (semi === -1 ? text : text.slice(0, semi)).trim();
        if (!/^[0-9a-fA-F]{1,12}$/.test(hex)) throw new OriginProtocolError('bad chunk size');
        this.remaining = parseInt(hex, 16);
        this.state = this.remaining === 0 ? ChunkState.Trailers : ChunkState.Data;
        return;
      }
      case ChunkState.DataEnd:
        if (text !== '') throw new OriginProtocolError('chunk data longer than its size');
        this.state = ChunkState.Size;
        return;
      case ChunkState.Trailers:
        if (text === '') this.state = ChunkState.Done;
        return;
      default:
        return;
    }
  }
}

/**
 * A message head arriving in pieces: appended into room that doubles as needed, and searched for
 * its end only where the newest bytes can complete it, so a head sent a byte at a time costs
 * linear work. (Joining and searching from the start on every piece would be quadratic: a
 * slow-client denial of service that llhttp, parsing incrementally, does not have.) One per
 * connection.
 */
export class PartialHead {
  private room: Buffer | null = null;
  /** The last bytes append() returned: the start of `room`. */
  private joined: Buffer | null = null;
  /** The bytes end() last searched without finding the end, and how far. */
  private searchedBuf: Buffer | null = null;
  private searched = 0;

  /** `prev` followed by `chunk`; reuses the room when `prev` is what the last call returned. */
  append(prev: Buffer, chunk: Buffer): Buffer {
    const need = prev.length + chunk.length;
    if (prev !== this.joined || this.room === null || need > this.room.length) {
      this.room = Buffer.allocUnsafe(Math.max(need * 2, 1024));
      prev.copy(this.room, 0);
    }
    chunk.copy(this.room, prev.length);
    const joined = this.room.subarray(0, need);
    if (this.searchedBuf === prev) this.searchedBuf = joined;
    this.joined = joined;
    return joined;
  }

  /** Where the CRLF CRLF ending the head starts in `buf`, or -1. */
  end(buf: Buffer): number {
    const from = buf === this.searchedBuf ? Math.max(0, this.searched - 3) : 0;
    const at = buf.indexOf('\r\n\r\n', from, 'latin1');
    if (at === -1) {
      this.searchedBuf = buf;
      this.searched = buf.length;
    }
    return at;
  }
}

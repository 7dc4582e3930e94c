/**
 * HTTP/1.1 message heads and chunked bodies, for the data plane's own server (http1-server.ts)
 * and origin client (origin-client.ts). The request parser is deliberately narrow: it accepts the
 * plain requests that make up nearly all traffic and returns undefined for anything else (another
 * version, CONNECT, Transfer-Encoding, Upgrade, Expect, absolute-form targets, obs-fold, bare CR or LF,
 * odd bytes, repeated Host or Content-Length), which the server then hands to node's llhttp with
 * its full strictness and error answers. The response parser is for origins: it accepts what
 * origins send and refuses (throws) what a proxy must not pass on.
 */
import { HOP_BY_HOP, connectionListed, transferCodings } from './hop-headers.ts';

/** RFC 9110 token characters (header names, methods), by character code (any byte's). */
const TOKEN_CHARS = new Uint8Array(256);
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

/** `head.slice(start, end)` without the optional whitespace around it (a header value). */
function trimmed(head: string, start: number, end: number): string {
  while (start < end && (head.charCodeAt(start) === 32 || head.charCodeAt(start) === 9)) start++;
  while (end > start && (head.charCodeAt(end - 1) === 32 || head.charCodeAt(end - 1) === 9)) end--;
  return head.slice(start, end);
}

/**
 * Where the line starting at `start` ends (its CR, or the end of the head: a head comes without
 * its final CRLF), or -1 when the line holds a bare CR or LF.
 */
function lineEnd(head: string, start: number): number {
  const lf = head.indexOf('\n', start);
  const eol = lf === -1 ? head.length : lf - 1;
  if (lf !== -1 && head.charCodeAt(eol) !== 13) return -1;
  const cr = head.indexOf('\r', start);
  return cr === (lf === -1 ? -1 : eol) ? eol : -1;
}

// What a request header value may not hold: control characters other than HTAB (it may hold
// visible ASCII, space, HTAB and obs-text, as latin1). The request line and header names are
// checked against narrower sets of their own.
const VALUE_CTL = /[\x00-\x08\x0a-\x1f\x7f]/;
// Request targets in origin form: visible ASCII only (llhttp's strict set).
const ORIGIN_FORM = /^\/[\x21-\x7e]*$/;
const DIGITS = /^\d{1,15}$/;
// The common methods, known without a look at their characters. The fast path serves any token
// method but CONNECT (RFC 9110 §9.1: methods are extensible, and a site's allowed_methods answers
// 405 to the rest); llhttp would refuse one it does not know with a bare 400. CONNECT, a tunnel
// request with an authority-form target, is node's parser's ('connect' in data-plane.ts).
const COMMON_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH']);

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

/** What the parsers do with a header, by its name. */
const Role = { Plain: 0, Length: 1, Host: 2, Encoding: 3, Connection: 4, Hop: 5, Refused: 6, SetCookie: 7, Cookie: 8, Date: 9, Hsts: 10 } as const;
type Role = (typeof Role)[keyof typeof Role];

/** A header name as a sender spelled it, and what it stands for. */
interface HeaderName {
  readonly spelled: string;
  readonly lower: string;
  /** What the request parser does with it. */
  readonly request: Role;
  /** What the response parser does with it. */
  readonly response: Role;
  /** A repeat of it in a request is dropped (node's rule). */
  readonly single: boolean;
  /**
   * Its values recur from request to request and are looked up by content further on (Host,
   * User-Agent): the last one is kept, and a request with the same value gets that string, whose
   * hash is already known, and skips its check.
   */
  readonly recurring: boolean;
  /**
   * The last value checked: of a recurring name (it keeps its head alive: at most one head per
   * spelling), or a short one of any name. The same value again skips its check.
   */
  last: string | undefined;
}

function headerNameOf(spelled: string): HeaderName {
  const lower = spelled.toLowerCase();
  let request: Role = Role.Plain;
  let response: Role = HOP_BY_HOP.has(lower) ? Role.Hop : Role.Plain;
  if (lower === 'content-length') request = response = Role.Length;
  else if (lower === 'host') request = Role.Host;
  else if (lower === 'set-cookie') request = Role.SetCookie;
  else if (lower === 'cookie') request = Role.Cookie;
  else if (lower === 'transfer-encoding' || lower === 'upgrade' || lower === 'expect') request = Role.Refused;
  if (lower === 'transfer-encoding') response = Role.Encoding;
  else if (lower === 'connection') response = Role.Connection;
  else if (lower === 'date') response = Role.Date;
  else if (lower === 'strict-transport-security') response = Role.Hsts;
  return { spelled, lower, request, response, single: SINGLE_VALUED.has(lower), recurring: lower === 'host' || lower === 'user-agent', last: undefined };
}

// Header names seen, by length and first character: the same few dozen spellings recur, and one
// found here costs a comparison in place instead of a new string, its lower-casing and a hash
// lookup. Bounded, so odd names cost neither memory nor long searches.
const NAME_BUCKETS: (HeaderName[] | undefined)[] = [];
const BUCKET_MAX = 8;
const NAMES_MAX = 1024;
let namesKept = 0;

/** The header name in `head` from `start` to `colon`, or undefined when it is not a token. */
function headerName(head: string, start: number, colon: number): HeaderName | undefined {
  const length = colon - start;
  const key = length < 64 ? (length << 7) | (head.charCodeAt(start) & 127) : -1;
  const bucket = key === -1 ? undefined : NAME_BUCKETS[key];
  if (bucket) {
    for (let i = 0; i < bucket.length; i++) {
      const known = bucket[i] as HeaderName;
      if (head.startsWith(known.spelled, start)) return known;
    }
  }
  if (!isToken(head, start, colon)) return undefined;
  const spelled = head.slice(start, colon);
  if (key === -1 || namesKept >= NAMES_MAX || (bucket !== undefined && bucket.length >= BUCKET_MAX)) return headerNameOf(spelled);
  // Kept as a copy: a slice would keep the whole head alive.
  const name = headerNameOf(Buffer.from(spelled, 'latin1').toString('latin1'));
  namesKept++;
  if (bucket) bucket.push(name);
  else NAME_BUCKETS[key] = [name];
  return name;
}

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

/** V8 makes a substring this long or longer a slice of its string, a shorter one a copy. */
const MIN_SLICE = 13;

/** The value of a request header between `start` and `end`, or undefined when it holds a control character. */
function requestValue(head: string, name: HeaderName, start: number, end: number): string | undefined {
  const value = trimmed(head, start, end);
  if (value === name.last) return name.last;
  if (VALUE_CTL.test(value)) return undefined;
  // A value shorter than V8's shortest slice is a string of its own: keeping it holds no head.
  if (name.recurring || value.length < MIN_SLICE) name.last = value;
  return value;
}

/** Adds one request header to a node-style header object. */
function addRequestHeader(headers: RequestHead['headers'], name: HeaderName, value: string): void {
  const lower = name.lower;
  const prev = headers[lower];
  if (prev === undefined) {
    if (name.request === Role.SetCookie) headers['set-cookie'] = [value];
    else headers[lower] = value;
    return;
  }
  if (name.request === Role.SetCookie) (prev as unknown as string[]).push(value);
  else if (!name.single) headers[lower] = `${prev}${name.request === Role.Cookie ? '; ' : ', '}${value}`;
}

/** The Connection header's tokens include `token` (lower case). */
function connectionHas(value: string | undefined, token: string): boolean {
  if (value === undefined) return false;
  // What nearly every client and origin sends, answered without splitting.
  if (value === token) return true;
  if (value === 'keep-alive' || value === 'close') return false;
  for (const part of value.split(',')) if (part.trim().toLowerCase() === token) return true;
  return false;
}

/**
 * Parses the request head in `head` (latin1, without the final CRLF CRLF). Returns undefined when
 * the request is not one the fast path serves; node's parser then takes the connection.
 */
export function parseRequestHead(head: string): RequestHead | undefined {
  let eol = lineEnd(head, 0);
  if (eol === -1) return undefined;
  const sp1 = head.indexOf(' ');
  const sp2 = head.indexOf(' ', sp1 + 1);
  if (sp1 <= 0 || sp2 === -1 || sp2 !== eol - 9 || !head.startsWith(' HTTP/1.1', sp2)) return undefined;
  const method = head.slice(0, sp1);
  const target = head.slice(sp1 + 1, sp2);
  if (!(COMMON_METHODS.has(method) || (method !== 'CONNECT' && isToken(head, 0, sp1))) || !ORIGIN_FORM.test(target)) return undefined;
  const headers: RequestHead['headers'] = {};
  const rawHeaders: string[] = [];
  let sawHost = false;
  let sawLength = false;
  for (let start = eol + 2; start < head.length; start = eol + 2) {
    eol = lineEnd(head, start);
    if (eol === -1) return undefined;
    const colon = head.indexOf(':', start);
    const name = colon === -1 || colon > eol ? undefined : headerName(head, start, colon);
    const value = name === undefined ? undefined : requestValue(head, name, colon + 1, eol);
    if (name === undefined || value === undefined) return undefined;
    switch (name.request) {
      case Role.Refused:
        return undefined;
      case Role.Host:
        if (sawHost) return undefined;
        sawHost = true;
        break;
      case Role.Length:
        if (sawLength || !DIGITS.test(value)) return undefined;
        sawLength = true;
        break;
    }
    rawHeaders.push(name.spelled, value);
    addRequestHeader(headers, name, value);
  }
  const length = headers['content-length'];
  return { method, target, headers, rawHeaders, contentLength: length === undefined ? 0 : Number(length), close: connectionHas(headers['connection'], 'close') };
}

/** An origin's response head. */
export interface ResponseHead {
  status: number;
  /**
   * The end-to-end header lines as the origin sent them, each with its CRLF: hop-by-hop headers
   * and those the Connection header lists describe the origin connection and are consumed here,
   * and so is a Content-Length that Transfer-Encoding overrides (or that repeats, or that a 1xx
   * or 204 must not carry). A body's transfer codings other than chunked stay as a
   * `transfer-encoding` line, which the writer completes with its own chunked. Passed on as
   * they are, they cost no parsing into values and no writing back (headerList() has them as a
   * list for the writers that need one).
   */
  lines: string;
  /** The lines hold a Content-Length. */
  hasLength: boolean;
  /** The lines hold a Date. */
  hasDate: boolean;
  /** The lines hold a Strict-Transport-Security. */
  hasHsts: boolean;
  /** The body's framing: a length, chunked, or up to the end of the connection. */
  framing: { kind: 'length'; length: number } | { kind: 'chunked' } | { kind: 'close' };
  /** The connection may carry another request once this response is over. */
  reusable: boolean;
  /** The head's length in bytes, its final CRLF CRLF included. */
  size: number;
}

/** A response with this status has no body, whatever its head says (1xx, 204, 304: RFC 9112 §6.3). */
export function statusHasNoBody(status: number): boolean {
  return status < 200 || status === 204 || status === 304;
}

/** A response with this status must not carry a Content-Length (1xx, 204: RFC 9110 §8.6). */
function statusForbidsLength(status: number): boolean {
  return status < 200 || status === 204;
}

const NO_CODINGS = { chunked: false, others: undefined } as const;
const CHUNKED_ONLY = { chunked: true, others: undefined } as const;

/** An origin answer a proxy cannot pass on (the client gets a 502). */
export class OriginProtocolError extends Error {}

/** `head` from `from` on without the lines in `dropped` (`[start, end)` offsets, in order), each line ending in CRLF. */
function keptLines(head: string, from: number, dropped: readonly number[]): string {
  let out = '';
  for (let i = 0; i < dropped.length; i += 2) {
    out += head.slice(from, dropped[i]);
    from = dropped[i + 1] as number;
  }
  // The head comes without its last CRLF.
  return from < head.length ? `${out}${head.slice(from)}\r\n` : out;
}

/**
 * Parses an origin's response head (latin1, without the final CRLF CRLF); throws
 * OriginProtocolError on a malformed one. `bodyless` (a HEAD request) means no body follows
 * whatever the head says. Runs once per forwarded response.
 */
export function parseResponseHead(head: string, bodyless: boolean): ResponseHead {
  if (head.includes('\0')) throw new OriginProtocolError('NUL in response head');
  const first = lineEnd(head, 0);
  if (first === -1) throw new OriginProtocolError('bare CR or LF in the status line');
  const status = statusOf(head, first);
  const http11 = head.charCodeAt(7) === 0x31;
  // The lines left out, as [start, end) offsets; `sorted` until one is added out of order.
  let dropped: number[] = [];
  let sorted = true;
  let length: string | undefined;
  let lengthLine = -1;
  let lengthEnd = -1;
  // The Transfer-Encoding values, joined.
  let codings: string | undefined;
  let hasDate = false;
  let hasHsts = false;
  let connection: string | undefined;
  for (let start = first + 2, eol = first; start < head.length; start = eol + 2) {
    eol = lineEnd(head, start);
    if (eol === -1) throw new OriginProtocolError('bare CR or LF in a header line');
    const colon = head.indexOf(':', start);
    const name = colon === -1 || colon > eol ? undefined : headerName(head, start, colon);
    if (name === undefined) throw new OriginProtocolError('bad header line');
    switch (name.response) {
      case Role.Length: {
        const value = trimmed(head, colon + 1, eol);
        if (!DIGITS.test(value) || (length !== undefined && length !== value)) throw new OriginProtocolError('bad Content-Length');
        if (length === undefined) {
          length = value;
          lengthLine = start;
          lengthEnd = eol + 2;
        } else dropped.push(start, eol + 2);
        continue;
      }
      case Role.Encoding: {
        const value = trimmed(head, colon + 1, eol);
        codings = codings === undefined ? value : `${codings}, ${value}`;
        break;
      }
      case Role.Connection: {
        const value = trimmed(head, colon + 1, eol);
        connection = connection === undefined ? value : `${connection},${value}`;
        break;
      }
      case Role.Hop:
        break;
      case Role.Date:
        hasDate = true;
        continue;
      case Role.Hsts:
        hasHsts = true;
        continue;
      default:
        continue;
    }
    dropped.push(start, eol + 2);
  }
  const encoded = codings !== undefined;
  // Most heads here have no Transfer-Encoding (or a plain `chunked`): no list to take apart then.
  const { chunked, others } = codings === undefined ? NO_CODINGS : codings.toLowerCase() === 'chunked' ? CHUNKED_ONLY : transferCodings(codings);
  // Transfer-Encoding wins over Content-Length (RFC 9112 §6.3): the length is not passed on, nor
  // in a 1xx or 204, where RFC 9110 §8.6 forbids it. A HEAD answer's or a 304's length describes
  // the body the client did not ask for: it is kept.
  const lengthKept = lengthLine !== -1 && !encoded && !statusForbidsLength(status);
  if (lengthLine !== -1 && !lengthKept) {
    dropped.push(lengthLine, lengthEnd);
    sorted = false;
  }
  let keepAlive = http11;
  // Nearly every origin says just `keep-alive` (or nothing): no names to drop.
  if (connection !== undefined && connection !== 'keep-alive') {
    const listed = connectionListed(connection);
    if (listed) {
      for (let start = first + 2, eol = first; start < head.length; start = eol + 2) {
        eol = lineEnd(head, start);
        const name = headerName(head, start, head.indexOf(':', start)) as HeaderName;
        // The framing stays as it was decided; a listed Date or HSTS is gone.
        if (name.response === Role.Length || !listed.has(name.lower)) continue;
        dropped.push(start, eol + 2);
        if (name.response === Role.Date) hasDate = false;
        else if (name.response === Role.Hsts) hasHsts = false;
      }
      sorted = false;
    }
    keepAlive = http11 ? !connectionHas(connection, 'close') : connectionHas(connection, 'keep-alive');
  } else if (connection === 'keep-alive') keepAlive = true;
  if (!sorted) {
    const spans: [number, number][] = [];
    for (let i = 0; i < dropped.length; i += 2) spans.push([dropped[i] as number, dropped[i + 1] as number]);
    spans.sort((a, b) => a[0] - b[0]);
    // A line can be left out for two reasons (hop-by-hop and listed): once.
    dropped = spans.filter((span, i) => i === 0 || span[0] !== (spans[i - 1] as [number, number])[0]).flat();
  }
  let lines = keptLines(head, first + 2, dropped);
  let framing: ResponseHead['framing'];
  let reusable = keepAlive;
  if (bodyless || statusHasNoBody(status)) framing = { kind: 'length', length: 0 };
  else if (encoded) {
    // A Transfer-Encoding connection is not reused.
    framing = chunked ? { kind: 'chunked' } : { kind: 'close' };
    reusable = chunked && length === undefined && keepAlive;
    // The body reaches the client still coded (gzip, say): those codings stay on its label, and
    // the client side applies chunked itself (the own server adds its own chunked line).
    if (others !== undefined) lines += `transfer-encoding: ${others}\r\n`;
  } else if (length !== undefined) framing = { kind: 'length', length: Number(length) };
  else {
    framing = { kind: 'close' };
    reusable = false;
  }
  return { status, lines, hasLength: lengthKept, hasDate, hasHsts, framing, reusable, size: head.length + 4 };
}

/** The header names scanResponseHead() acts on, lower case, by length: each with its role. */
const SCANNED_NAMES: [Uint8Array, Role][][] = [];
for (const name of [...HOP_BY_HOP, 'content-length', 'date', 'strict-transport-security']) {
  (SCANNED_NAMES[name.length] ??= []).push([Buffer.from(name, 'latin1'), headerNameOf(name).response]);
}

/** The role of the header name in `buf` from `start` (`length` token bytes) for a response. */
function scannedRole(buf: Buffer, start: number, length: number): Role {
  const candidates = SCANNED_NAMES[length];
  if (candidates === undefined) return Role.Plain;
  next: for (let k = 0; k < candidates.length; k++) {
    const [lower, role] = candidates[k] as [Uint8Array, Role];
    // Token bytes OR 0x20 equal a lower-case letter or '-' only when they are that letter in either case or that '-'.
    for (let i = 0; i < length; i++) if (((buf[start + i] as number) | 0x20) !== lower[i]) continue next;
    return role;
  }
  return Role.Plain;
}

/** Whether `buf` from `start` to `end` (a header value) is exactly `word` (lower-case letters and '-'), ignoring case. */
function valueIs(buf: Buffer, start: number, end: number, word: string): boolean {
  if (end - start !== word.length) return false;
  for (let i = 0; i < word.length; i++) if (((buf[start + i] as number) | 0x20) !== word.charCodeAt(i)) return false;
  return true;
}

/**
 * parseResponseHead() for the response heads origins send nearly always, read from the bytes of
 * the read that brought them (`buf` starts with the head): one pass over the bytes, no text made
 * but the lines passed on. Null for anything else (a head not all in `buf`, Transfer-Encoding, a
 * repeated Content-Length or Connection, a Connection other than `keep-alive` or `close`, a byte
 * the text parser refuses): the caller then runs the text parser, which decides the same heads
 * the same way, so this is only a shortcut to its answers. Runs once per forwarded response.
 */
export function scanResponseHead(buf: Buffer, bodyless: boolean): ResponseHead | null {
  const n = buf.length;
  // `HTTP/1.x NNN` and a reason up to CRLF.
  if (n < 16 || buf[0] !== 0x48 || buf[1] !== 0x54 || buf[2] !== 0x54 || buf[3] !== 0x50 || buf[4] !== 0x2f || buf[5] !== 0x31 || buf[6] !== 0x2e || buf[8] !== 0x20) return null;
  const minor = (buf[7] as number) - 48;
  const a = (buf[9] as number) - 48;
  const b = (buf[10] as number) - 48;
  const c = (buf[11] as number) - 48;
  if ((minor !== 0 && minor !== 1) || !(a >= 1 && a <= 9 && b >= 0 && b <= 9 && c >= 0 && c <= 9)) return null;
  let i = 12;
  if (buf[i] !== 0x0d) {
    if (buf[i] !== 0x20) return null;
    for (; i < n; i++) {
      const ch = buf[i] as number;
      if (ch === 0x0d) break;
      if (ch === 0x0a || ch === 0) return null;
    }
  }
  if (i + 1 >= n || buf[i + 1] !== 0x0a) return null;
  const status = a * 100 + b * 10 + c;
  const linesStart = i + 2;
  let length = -1;
  let hasDate = false;
  let hasHsts = false;
  // Connection: 0 none, 1 keep-alive, 2 close.
  let connection = 0;
  // The lines passed on so far, and where the ones after the last left-out line start.
  let lines = '';
  let keptFrom = linesStart;
  for (i = linesStart; ; ) {
    if (i + 1 >= n) return null;
    if (buf[i] === 0x0d) {
      if (buf[i + 1] !== 0x0a) return null;
      break;
    }
    const start = i;
    for (; i < n; i++) if (TOKEN_CHARS[buf[i] as number] === 0) break;
    if (i === start || i >= n || buf[i] !== 0x3a) return null;
    const role = scannedRole(buf, start, i - start);
    let from = ++i;
    for (; i < n; i++) {
      const ch = buf[i] as number;
      // One comparison for most bytes: CR, LF and NUL are all below 14.
      if (ch < 14) {
        if (ch === 0x0d) break;
        if (ch === 0x0a || ch === 0) return null;
      }
    }
    if (i + 1 >= n || buf[i + 1] !== 0x0a) return null;
    let to = i;
    const lineEnd = i + 2;
    i = lineEnd;
    if (role === Role.Plain) continue;
    while (from < to && (buf[from] === 0x20 || buf[from] === 0x09)) from++;
    while (to > from && (buf[to - 1] === 0x20 || buf[to - 1] === 0x09)) to--;
    switch (role) {
      case Role.Length: {
        if (length !== -1 || to === from || to - from > 15) return null;
        let v = 0;
        for (let k = from; k < to; k++) {
          const d = (buf[k] as number) - 48;
          if (d < 0 || d > 9) return null;
          v = v * 10 + d;
        }
        length = v;
        continue;
      }
      case Role.Date:
        hasDate = true;
        continue;
      case Role.Hsts:
        hasHsts = true;
        continue;
      case Role.Connection:
        if (connection !== 0) return null;
        if (valueIs(buf, from, to, 'keep-alive')) connection = 1;
        else if (valueIs(buf, from, to, 'close')) connection = 2;
        else return null;
        break;
      case Role.Hop:
        break;
      default:
        // Transfer-Encoding.
        return null;
    }
    // A hop-by-hop line: left out.
    if (start > keptFrom) lines += buf.toString('latin1', keptFrom, start);
    keptFrom = lineEnd;
  }
  if (i > keptFrom) lines += buf.toString('latin1', keptFrom, i);
  const size = i + 2;
  const keepAlive = connection === 0 ? minor === 1 : connection === 1;
  let framing: ResponseHead['framing'];
  let reusable = keepAlive;
  if (bodyless || statusHasNoBody(status)) {
    // A length a 1xx or 204 must not carry is the text parser's to drop.
    if (length !== -1 && statusForbidsLength(status)) return null;
    framing = { kind: 'length', length: 0 };
  } else if (length !== -1) framing = { kind: 'length', length };
  else {
    framing = { kind: 'close' };
    reusable = false;
  }
  return { status, lines, hasLength: length !== -1, hasDate, hasHsts, framing, reusable, size };
}

/** Header lines (ResponseHead.lines, already checked) as `[name, value, ...]`, names in lower case. */
export function headerList(lines: string): string[] {
  const out: string[] = [];
  for (let start = 0; start < lines.length; ) {
    const eol = lines.indexOf('\r\n', start);
    const colon = lines.indexOf(':', start);
    out.push((headerName(lines, start, colon) as HeaderName).lower, trimmed(lines, colon + 1, eol));
    start = eol + 2;
  }
  return out;
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

// A buffer up to this size is searched for its head's end as text: the text the parser needs
// anyway, and a string search costs less than a buffer search.
const TEXT_SEARCH_BYTES = 4096;

/**
 * The head at the start of `buf` (one read, or what followed the previous message) as latin1
 * text, without its CRLF CRLF; undefined when its end is not in `buf`; null when it ended with
 * bare LFs instead (malformed: without this the peer would wait for an answer until a time-out).
 * The head is a string of its own, not a slice of the searched text: the parsers' searches and
 * character reads on a sliced string cost V8 far more (a worker ran 6% fewer instructions per
 * request with this).
 */
export function headText(buf: Buffer): string | undefined | null {
  if (buf.length <= TEXT_SEARCH_BYTES) {
    const text = buf.toString('latin1');
    const at = text.indexOf('\r\n\r\n');
    if (at !== -1) return buf.toString('latin1', 0, at);
    return text.includes('\n\n') ? null : undefined;
  }
  const at = buf.indexOf('\r\n\r\n', 0, 'latin1');
  if (at !== -1) return buf.toString('latin1', 0, at);
  return buf.includes('\n\n', 0, 'latin1') ? null : undefined;
}

/** PartialHead's end() for a head that ended with bare LFs. */
const BARE_LF_END = -2;

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

  /**
   * The head at the start of `buf` as latin1 text, without its CRLF CRLF; undefined while its end
   * has not arrived, null when it ended with bare LFs (as headText). `buf` is what append()
   * returned, or a buffer of its own (headText's).
   */
  head(buf: Buffer): string | undefined | null {
    if (buf !== this.joined) return headText(buf);
    const at = this.end(buf);
    if (at === BARE_LF_END) return null;
    return at === -1 ? undefined : buf.toString('latin1', 0, at);
  }

  /** Where the CRLF CRLF ending the head starts in `buf`, -1 while it has not come, or BARE_LF_END. */
  private end(buf: Buffer): number {
    const from = buf === this.searchedBuf ? Math.max(0, this.searched - 3) : 0;
    const at = buf.indexOf('\r\n\r\n', from, 'latin1');
    if (at === -1) {
      if (buf.includes('\n\n', from, 'latin1')) return BARE_LF_END;
      this.searchedBuf = buf;
      this.searched = buf.length;
    }
    return at;
  }
}

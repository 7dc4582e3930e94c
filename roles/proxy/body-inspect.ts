/**
 * The body phase: after every header-phase check allowed a request whose text-like body the WAF
 * inspects, the first body_inspect_bytes are buffered and checked before anything goes to the
 * origin; the buffered bytes are then forwarded ahead of the rest of the stream (forward.ts).
 * It is a phase of its own, after the synchronous pipeline, because reading a body is
 * asynchronous and a request that an earlier check refuses should cost no buffering.
 */
import { brotliDecompressSync, constants as zlib, gunzipSync, inflateSync } from 'node:zlib';
import type { CompiledSite } from './compiled-site.ts';
import type { RequestContext, ProxyRequest } from './request-context.ts';
import { BODY_TOO_LARGE } from './request-limits.ts';
import { deny, type Verdict } from './verdict.ts';
import type { WafBodyCheck } from './waf.ts';

/** Rule id of a coded body the WAF cannot read (400); also written in docs/proxy.md. */
export const CODING_RULE = 'request.content_encoding';
const UNDECODABLE = deny(400, CODING_RULE);

type Decoder = (coded: Buffer, maxOutputLength: number) => Buffer;

interface Coding {
  readonly decode: Decoder;
  /**
   * Whether a body that decodes past the cap is read up to the cap (decodeCapped) rather than
   * refused. Not for br: its decoder fills its window (up to 16 MiB) before it hands out a byte,
   * so each of the search's decodes of a 50-byte bomb would cost some 30 ms.
   */
  readonly search: boolean;
}

// The codings of RFC 9110 §8.4.1 node decodes (`deflate` is the zlib format, as the RFC says).
// The flush modes keep the output of a cut stream: only the first body_inspect_bytes are read.
const GZIP: Coding = { decode: (coded, maxOutputLength) => gunzipSync(coded, { finishFlush: zlib.Z_SYNC_FLUSH, maxOutputLength }), search: true };
const CODINGS: ReadonlyMap<string, Coding> = new Map([
  ['gzip', GZIP],
  ['x-gzip', GZIP],
  ['deflate', { decode: (coded, maxOutputLength) => inflateSync(coded, { finishFlush: zlib.Z_SYNC_FLUSH, maxOutputLength }), search: true }],
  ['br', { decode: (coded, maxOutputLength) => brotliDecompressSync(coded, { finishFlush: zlib.BROTLI_OPERATION_FLUSH, maxOutputLength }), search: false }],
]);
// Codings applied one over another (`gzip, br`) are decoded up to this many: each layer costs
// as much decoding again, and no client nests more.
const MAX_CODINGS = 2;

/**
 * At most `max` bytes of `coded` decoded, or undefined when it decodes past `max` and the coding
 * is not searched. The synchronous decoders stop at maxOutputLength without handing back what
 * they decoded, so when the whole input decodes past `max`, the longest input prefix that
 * decodes within it is found by bisection: at most log2(input) decodes of at most `max` bytes
 * each (plus one zlib chunk), so a zip bomb costs little more than an ordinary body. What the
 * last input byte would add (at most 1,032 bytes for deflate) is left out.
 */
function decodeCapped(coding: Coding, coded: Buffer, max: number): Buffer | undefined {
  const fits = (n: number): Buffer | undefined => {
    try {
      return coding.decode(coded.subarray(0, n), max);
    } catch (err) {
      if ((err as { code?: unknown }).code === 'ERR_BUFFER_TOO_LARGE') return undefined;
      throw err;
    }
  };
  const whole = fits(coded.length);
  if (whole !== undefined || !coding.search) return whole;
  // The input prefix of `lo` bytes decodes within `max` (to `best`), that of `hi` bytes does not.
  let lo = 0;
  let hi = coded.length;
  let best: Buffer = Buffer.alloc(0);
  while (hi - lo > 1) {
    const mid = (lo + hi) >>> 1;
    const out = fits(mid);
    if (out === undefined) hi = mid;
    else [lo, best] = [mid, out];
  }
  return best;
}

/**
 * The start of a body sent with the codings `coding` (a list as Content-Encoding writes it, in
 * the order they were applied), decoded for the WAF (the origin gets the bytes as they came), at
 * most `max` bytes; undefined when a coding is unknown, nested too deep, its data is corrupt, or
 * it is br and decodes past `max`. `identity` and `chunked` (already taken off) are no coding.
 */
export function decodeBody(body: Buffer, coding: string, max: number): Buffer | undefined {
  const codings = coding
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity' && c !== 'chunked');
  if (codings.length > MAX_CODINGS) return undefined;
  let out: Buffer | undefined = body;
  // The last coding listed was applied last: it comes off first.
  for (const name of codings.reverse()) {
    const c = CODINGS.get(name);
    if (c === undefined) return undefined;
    try {
      out = decodeCapped(c, out, max);
    } catch {
      return undefined;
    }
    if (out === undefined) return undefined;
  }
  return out;
}

/** The start of a request body, read before forwarding. */
export interface BodyPrefix {
  readonly chunks: readonly Buffer[];
  readonly bytes: number;
  /** The whole body is in `chunks`. */
  readonly ended: boolean;
}

/**
 * Hands the body's chunks to `take` until it says it has enough (the stream is then paused) or
 * the body ends; resolves whether it ended. `resume`: the stream was paused (after its prefix).
 * Rejects when the client goes away first.
 */
function readChunks(req: ProxyRequest, take: (chunk: Buffer) => boolean, resume: boolean): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const cleanup = (): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onGone);
      req.off('close', onGone);
    };
    function onData(chunk: Buffer): void {
      if (!take(chunk)) return;
      cleanup();
      req.pause();
      resolve(false);
    }
    function onEnd(): void {
      cleanup();
      resolve(true);
    }
    function onGone(): void {
      cleanup();
      reject(new Error('client closed the connection before its body was read'));
    }
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('error', onGone);
    req.once('close', onGone);
    if (resume) req.resume();
  });
}

/**
 * Reads whole chunks until `limit` bytes or the end of the body, then pauses the stream (the
 * last chunk may pass the limit; only `limit` bytes are inspected). Rejects when the client
 * goes away first.
 */
export async function readBodyPrefix(req: ProxyRequest, limit: number): Promise<BodyPrefix> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  const ended = await readChunks(
    req,
    (chunk) => {
      chunks.push(chunk);
      bytes += chunk.length;
      return bytes >= limit;
    },
    false,
  );
  return { chunks, bytes, ended };
}

/**
 * Reads and drops the rest of a body (the stream is paused after its prefix) until its end or
 * until more than `max` bytes came in all, `read` of them already. Resolves with the bytes read
 * here and whether the body passed `max`; rejects when the client goes away first.
 */
async function drainBody(req: ProxyRequest, read: number, max: number): Promise<{ bytes: number; tooLarge: boolean }> {
  let bytes = 0;
  const ended = await readChunks(
    req,
    (chunk) => {
      bytes += chunk.length;
      return read + bytes > max;
    },
    true,
  );
  return { bytes, tooLarge: !ended };
}

/**
 * Runs the body check of one request. Resolves with the verdict and the bytes read, or with
 * undefined when the client went away (the response is destroyed, its event says 499).
 */
export async function runBodyCheck(ctx: RequestContext, check: WafBodyCheck): Promise<{ verdict: Verdict; prefix: BodyPrefix } | undefined> {
  const gone = (): undefined => {
    ctx.res.destroy();
    return undefined;
  };
  let prefix: BodyPrefix;
  try {
    prefix = await readBodyPrefix(ctx.req, check.limit);
  } catch {
    return gone();
  }
  const r = checkBody(ctx, check, prefix);
  // A body over max_body_bytes is a 413 whatever it holds, as it is for a Content-Length that
  // says so before the WAF runs; a chunked one tells its size only by being read, so a refused
  // one is read to its end or past the cap (as forwarding it would have read it).
  if (r.verdict.kind === 'allow' || ctx.req.headers['content-length'] !== undefined) return r;
  const max = (ctx.site as CompiledSite).maxBodyBytes;
  if (prefix.bytes > max) return { verdict: BODY_TOO_LARGE, prefix };
  if (prefix.ended) return r;
  let rest: { bytes: number; tooLarge: boolean };
  try {
    rest = await drainBody(ctx.req, prefix.bytes, max);
  } catch {
    return gone();
  }
  ctx.bytesIn += rest.bytes;
  return rest.tooLarge ? { verdict: BODY_TOO_LARGE, prefix } : r;
}

/**
 * Runs the body check on bytes already read: what the stream gave (runBodyCheck), or a whole
 * body that arrived with the head (ProxyRequest.bufferedBody), checked without waiting a turn.
 * A coded body (Content-Encoding, or a Transfer-Encoding besides chunked) is checked decoded;
 * one the WAF cannot decode is refused (400), since the origin may well decode it (Express
 * does) and the WAF would then have let it pass unread.
 */
export function checkBody(ctx: RequestContext, check: WafBodyCheck, prefix: BodyPrefix): { verdict: Verdict; prefix: BodyPrefix } {
  const raw = prefix.chunks.length === 1 ? (prefix.chunks[0] as Buffer) : Buffer.concat(prefix.chunks as Buffer[]);
  const { 'content-encoding': content, 'transfer-encoding': transfer } = ctx.req.headers;
  // Transfer codings (`gzip, chunked`) go over the content codings; node's parser took chunked off.
  const coding = transfer === undefined || transfer.toLowerCase() === 'chunked' ? content : content === undefined ? transfer : `${content}, ${transfer}`;
  const body = coding === undefined ? raw : decodeBody(raw, coding, check.limit);
  const verdict = body === undefined ? UNDECODABLE : check.check(ctx, body);
  // Forwarded bytes are counted as they are sent; a refused body was read all the same.
  if (verdict.kind !== 'allow') ctx.bytesIn += prefix.bytes;
  return { verdict, prefix };
}

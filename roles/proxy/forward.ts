/**
 * The forward phase: the request goes to the site's origin over the origin pool's own HTTP/1.1
 * client (origin-client.ts), bodies stream both ways with backpressure, and hop-by-hop headers
 * are handled on both sides (the origin client consumes the response's). A body without a Content-Length is cut once it passes
 * max_body_bytes (413). Origin failures answer 502 and connection failures start the origin's
 * backoff, during which requests fail fast. Response bodies are shaped by the site's send-rate
 * caps: the origin stream pauses while a bucket is in debt.
 */
import type { BodyPrefix } from './body-inspect.ts';
import { headerList, type ResponseHead } from './http1-parse.ts';
import type { CompiledSite } from './compiled-site.ts';
import { plainIp } from '../../src/lib/ip-match.ts';
import { ORIGIN_ERRORS, type Exchange, type OriginBody, type OriginError, type OriginHandler } from './origin-client.ts';
import type { Origin } from './origin-pools.ts';
import type { ProxyEndpoints } from './proxy-protocol.ts';
import type { RateShaper } from './rate-shaper.ts';
import { onRequestDone, type ProxyRequest, type ProxyResponse, type RequestContext } from './request-context.ts';
import { REQUEST_RULES } from './request-limits.ts';
import { sendStatus } from './responses.ts';
import { transferCodings } from './hop-headers.ts';
import { wallNow } from './read-clock.ts';

/** Rule ids of this phase (telemetry). */
export const ORIGIN_RULES = {
  connect: 'origin.connect',
  backoff: 'origin.backoff',
  timeout: 'origin.timeout',
  error: 'origin.error',
} as const;

// Errors that mean the origin could not be reached at all: they start the backoff.
const CONNECT_ERRORS = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', ORIGIN_ERRORS.connectTimeout, 'ETIMEDOUT', 'EADDRNOTAVAIL']);
const TIMEOUT_ERRORS = new Set<string>([ORIGIN_ERRORS.headersTimeout, ORIGIN_ERRORS.bodyTimeout]);

/**
 * An origin request failed before its response: the origin records it (a connection failure
 * starts its backoff) and the rule id the client's 502 is logged under comes back.
 */
export function originFailed(origin: Origin, code: string): string {
  if (CONNECT_ERRORS.has(code)) {
    origin.recordFailure(wallNow(), code);
    return ORIGIN_RULES.connect;
  }
  origin.recordError(code);
  return TIMEOUT_ERRORS.has(code) ? ORIGIN_RULES.timeout : ORIGIN_RULES.error;
}

/** The error's code. */
export function errorCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : '';
}

/**
 * The request body as the origin gets it: what the WAF already read, then the rest of the
 * stream; null for a request without a body. A body that arrived whole with the head is taken
 * as it is, so it goes out in the same write as the head.
 */
function originBody(req: ProxyRequest, maxBodyBytes: number, prefix: BodyPrefix | undefined): OriginBody | null {
  const declared = req.headers['content-length'];
  const te = req.headers['transfer-encoding'];
  const chunked = te !== undefined;
  if (declared === undefined && !chunked) return null;
  const length = chunked ? undefined : Number(declared);
  const whole = prefix === undefined ? req.bufferedBody : undefined;
  if (whole !== undefined) return { chunks: [whole], rest: null, length, max: Infinity };
  const rest = prefix?.ended || length === 0 ? null : req;
  // Content-Length bodies were checked against max_body_bytes already. Node's parser took the
  // chunked coding off a chunked one (the last coding, or the request was a 400); the body keeps
  // any other (a gzip-coded upload), and the origin is told so.
  return { chunks: prefix?.chunks ?? [], rest, length, max: chunked ? maxBodyBytes : Infinity, codings: chunked ? transferCodings(te).others : undefined };
}

/** The PROXY protocol endpoints of a request: the resolved client and the listener it reached. */
export function endpointsOf(ctx: RequestContext): ProxyEndpoints {
  const sock = ctx.req.socket;
  return { sourceIp: ctx.clientIp, sourcePort: sock.remotePort ?? 0, destIp: plainIp(sock.localAddress), destPort: sock.localPort ?? 0 };
}

/**
 * One forwarded request's side of the exchange: the origin's answer goes to the client, shaped
 * when the site caps send rates. A class, not a literal of closures: one object per request.
 */
class ForwardHandler implements OriginHandler {
  /** Set right after the request is sent; the callbacks that use it all run later. */
  exchange: Exchange | undefined;
  // A shaped chunk is waiting for its tokens; the end of the response waits behind it.
  private delayed = false;
  private endPending = false;
  private readonly ctx: RequestContext;
  private readonly site: CompiledSite;
  private readonly shaper: RateShaper;
  private readonly res: ProxyResponse;
  private readonly hsts: string | undefined;
  private readonly shaped: boolean;
  // Made on the first backpressure only.
  private resumer: (() => void) | undefined;

  constructor(ctx: RequestContext, site: CompiledSite, shaper: RateShaper) {
    this.ctx = ctx;
    this.site = site;
    this.shaper = shaper;
    this.res = ctx.res;
    this.hsts = ctx.scheme === 'https' ? site.hsts : undefined;
    this.shaped = site.maxSiteBps !== null || site.maxIpBps !== null;
  }

  private get resume(): () => void {
    return (this.resumer ??= () => this.exchange?.resume());
  }

  onBodySent(bytes: number): void {
    this.ctx.bytesIn += bytes;
  }

  onResponse(head: ResponseHead): void {
    const { res, hsts } = this;
    this.site.origin.recordSuccess();
    // The site's HSTS policy replaces the origin's: lines without one only get it added.
    if (res.writeLines && (hsts === undefined || !head.hasHsts)) {
      res.writeLines(head.status, hsts === undefined ? head.lines : `${head.lines}strict-transport-security: ${hsts}\r\n`, head.hasLength, head.hasDate);
      return;
    }
    const out = headerList(head.lines);
    if (hsts !== undefined) {
      for (let i = out.length - 2; i >= 0; i -= 2) if (out[i] === 'strict-transport-security') out.splice(i, 2);
      out.push('strict-transport-security', hsts);
    }
    // Node's server chunks a body only under a Transfer-Encoding that ends in chunked (the own
    // server adds its own chunked line): the codings a body keeps (ResponseHead.lines) get it for
    // an HTTP/1.1 client. An HTTP/1.0 client knows no chunked: it reads the body up to the close
    // (which node would not make for one that asked for keep-alive and sent `TE: chunked`).
    if (!res.writeLines) {
      for (let i = 0; i < out.length; i += 2) {
        if (out[i] !== 'transfer-encoding') continue;
        if (this.ctx.req.httpVersion === '1.1') out[i + 1] = `${out[i + 1] as string}, chunked`;
        else out.push('connection', 'close');
      }
    }
    res.writeHead(head.status, out);
  }

  onData(chunk: Buffer, transient: boolean): boolean {
    const res = this.res;
    this.ctx.bytesOut += chunk.length;
    const wait = this.shaped ? this.shaper.take(this.site, this.ctx.clientIp, chunk.length) : 0;
    if (wait === 0) {
      let ok: boolean;
      if (!transient) ok = res.write(chunk);
      else if (res.writeTransient) ok = res.writeTransient(chunk);
      else ok = res.write(Buffer.from(chunk));
      if (ok) return true;
      res.once('drain', this.resume);
      return false;
    }
    if (transient) chunk = Buffer.from(chunk);
    // Shaped: the chunk itself waits for its tokens, so the client sees the capped rate up to
    // the last byte; the origin stream stays paused meanwhile.
    this.delayed = true;
    setTimeout(() => {
      this.delayed = false;
      if (res.destroyed) return;
      const full = !res.write(chunk);
      if (this.endPending) {
        this.endPending = false;
        res.end();
      } else if (full) res.once('drain', this.resume);
      else this.resume();
    }, wait);
    return false;
  }

  onEnd(): void {
    if (this.delayed) {
      this.endPending = true;
      return;
    }
    this.res.end();
  }

  onError(err: OriginError): void {
    const { ctx, res } = this;
    const code = err.code;
    if (code === ORIGIN_ERRORS.clientGone) {
      res.destroy();
      return;
    }
    if (code === ORIGIN_ERRORS.bodyTooLarge) {
      ctx.rule = REQUEST_RULES.bodyLen;
      if (res.headersSent) res.destroy();
      else sendStatus(ctx, 413);
      return;
    }
    if (res.headersSent) {
      // Mid-body: the status is out; the client sees a cut response.
      ctx.rule = ORIGIN_RULES.error;
      this.site.origin.recordError(code, true);
      res.destroy();
      return;
    }
    ctx.rule = originFailed(this.site.origin, code);
    sendStatus(ctx, 502);
  }

  /** The client is gone before its response was over: the origin request goes with it. */
  readonly abandon = (): void => {
    if (!this.res.writableFinished) this.exchange?.abort();
  };
}

/**
 * Forwards one request that passed every check; runs last in the pipeline. `prefix` is the start
 * of the body the WAF's body phase already read. The response (or the
 * error answer) is written to `ctx.res`; `ctx.rule`, `ctx.bytesIn` and `ctx.bytesOut` are filled
 * for telemetry. Never throws.
 */
export function forwardRequest(ctx: RequestContext, site: CompiledSite, shaper: RateShaper, prefix?: BodyPrefix): void {
  const req = ctx.req;
  const origin = site.origin;
  if (origin.backoffUntil() > wallNow()) {
    ctx.rule = ORIGIN_RULES.backoff;
    sendStatus(ctx, 502);
    return;
  }
  const headers = site.originHeaders(req.rawHeaders, ctx.hostHeader, ctx.clientIp, ctx.peerIp, ctx.scheme);
  let lines = '';
  for (let i = 0; i < headers.length; i += 2) lines += `${headers[i] as string}: ${headers[i + 1] as string}\r\n`;
  const handler = new ForwardHandler(ctx, site, shaper);
  onRequestDone(ctx, handler.abandon);
  const pool = origin.pool(origin.perClient ? endpointsOf(ctx) : undefined);
  handler.exchange = pool.request(req.method ?? 'GET', ctx.target, lines, originBody(req, site.maxBodyBytes, prefix), handler);
}

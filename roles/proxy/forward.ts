/**
 * The forward phase: the request goes to the site's origin through its undici pool (dispatch
 * with a handler, the leanest path undici offers), bodies stream both ways with backpressure,
 * and hop-by-hop headers are handled on both sides. A body without a Content-Length is cut once
 * it passes max_body_bytes (413). Origin failures answer 502 and connection failures start the
 * origin's backoff, during which requests fail fast. Response bodies are shaped by the site's
 * send-rate caps: the origin stream pauses while a bucket is in debt.
 */
import type { IncomingMessage } from 'node:http';
import type { Dispatcher } from 'undici';
import type { BodyPrefix } from './body-inspect.ts';
import type { CompiledSite } from './compiled-site.ts';
import { stripResponseHopHeaders } from './hop-headers.ts';
import { plainIp } from './ip-match.ts';
import type { ProxyEndpoints } from './proxy-protocol.ts';
import type { RateShaper } from './rate-shaper.ts';
import type { RequestContext } from './request-context.ts';
import { REQUEST_RULES } from './request-limits.ts';
import { sendStatus } from './responses.ts';

/** Rule ids of this phase (telemetry). */
export const ORIGIN_RULES = {
  connect: 'origin.connect',
  backoff: 'origin.backoff',
  timeout: 'origin.timeout',
  error: 'origin.error',
} as const;

// Errors that mean the origin could not be reached at all: they start the backoff.
export const CONNECT_ERRORS = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT', 'ETIMEDOUT', 'EADDRNOTAVAIL']);
export const TIMEOUT_ERRORS = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);
// A kept-alive connection the origin closed just as it was reused: safe to retry once without a body.
const STALE_CONNECTION_ERRORS = new Set(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE']);

class BodyTooLarge extends Error {
  constructor() {
    super('request body exceeds max_body_bytes');
  }
}

class ClientGone extends Error {
  constructor() {
    super('client closed the connection');
  }
}

/** The error's code, or its cause's (undici wraps socket errors). */
export function errorCode(err: unknown): string {
  const e = err as { code?: unknown; cause?: { code?: unknown } } | null;
  const code = e?.code ?? e?.cause?.code;
  return typeof code === 'string' ? code : '';
}

/**
 * Streams a body to the origin, the WAF's buffered `prefix` first, failing once more than `max`
 * bytes arrived (bodies of unknown length; Content-Length ones were checked against it already).
 */
async function* limitedBody(req: IncomingMessage, max: number, prefix?: BodyPrefix): AsyncGenerator<Buffer> {
  let read = 0;
  if (prefix) {
    for (const chunk of prefix.chunks) {
      read += chunk.length;
      if (read > max) throw new BodyTooLarge();
      yield chunk;
    }
    if (prefix.ended) return;
  }
  // destroyOnReturn false: the client socket must stay open to receive the 413.
  for await (const chunk of req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
    read += chunk.length;
    if (read > max) throw new BodyTooLarge();
    yield chunk;
  }
}

/** The PROXY protocol endpoints of a request: the resolved client and the listener it reached. */
export function endpointsOf(ctx: RequestContext): ProxyEndpoints {
  const sock = ctx.req.socket;
  return { sourceIp: ctx.clientIp, sourcePort: sock.remotePort ?? 0, destIp: plainIp(sock.localAddress), destPort: sock.localPort ?? 0 };
}

/**
 * Forwards one request that passed every check; runs last in the pipeline. `prefix` is the start
 * of the body the WAF's body phase already read. The response (or the
 * error answer) is written to `ctx.res`; `ctx.rule`, `ctx.bytesIn` and `ctx.bytesOut` are filled
 * for telemetry. Never throws.
 */
export function forwardRequest(ctx: RequestContext, site: CompiledSite, shaper: RateShaper, prefix?: BodyPrefix): void {
  const { req, res } = ctx;
  const origin = site.origin;
  if (origin.backoffUntil() > Date.now()) {
    ctx.rule = ORIGIN_RULES.backoff;
    sendStatus(ctx, 502);
    return;
  }
  const headers = site.originHeaders(req.rawHeaders, ctx.hostHeader, ctx.clientIp);
  const declared = req.headers['content-length'];
  const chunked = req.headers['transfer-encoding'] !== undefined;
  const body = prefix ? limitedBody(req, chunked ? site.maxBodyBytes : Infinity, prefix) : chunked ? limitedBody(req, site.maxBodyBytes) : declared !== undefined && declared !== '0' ? req : null;
  const hsts = ctx.scheme === 'https' ? site.hsts : undefined;
  const shaped = site.maxSiteBps !== null || site.maxIpBps !== null;
  const pool = origin.dispatcher(origin.proxyProtocol === 'off' ? undefined : endpointsOf(ctx));
  let controller: Dispatcher.DispatchController | undefined;
  let attempt = 0;
  let clientGone = false;
  // A shaped chunk is waiting for its tokens; the end of the response waits behind it.
  let delayed = false;
  let endPending = false;

  const onClose = (): void => {
    if (res.writableFinished) return;
    clientGone = true;
    controller?.abort(new ClientGone());
  };
  res.once('close', onClose);

  const options: Dispatcher.DispatchOptions = {
    path: ctx.target,
    method: req.method ?? 'GET',
    headers,
    body: body as Dispatcher.DispatchOptions['body'],
    headersTimeout: origin.readTimeoutMs,
    bodyTimeout: origin.readTimeoutMs,
    ...(origin.noKeepAlive ? { reset: true } : {}),
  };

  const handler: Dispatcher.DispatchHandler = {
    onRequestStart(c) {
      controller = c;
      if (clientGone) c.abort(new ClientGone());
    },
    onBodySent(chunk) {
      ctx.bytesIn += chunk.length;
    },
    onResponseStart(c, statusCode, responseHeaders) {
      origin.recordSuccess();
      if (res.destroyed) {
        c.abort(new ClientGone());
        return;
      }
      const out = responseHeaders as Record<string, string | string[] | undefined>;
      stripResponseHopHeaders(out);
      if (hsts !== undefined) out['strict-transport-security'] = hsts;
      res.writeHead(statusCode, out as Record<string, string | string[]>);
    },
    onResponseData(c, chunk) {
      ctx.bytesOut += chunk.length;
      const wait = shaped ? shaper.take(site, ctx.clientIp, chunk.length) : 0;
      if (wait === 0) {
        if (!res.write(chunk)) {
          c.pause();
          res.once('drain', () => c.resume());
        }
        return;
      }
      // Shaped: the chunk itself waits for its tokens, so the client sees the capped rate up to
      // the last byte; the origin stream stays paused meanwhile.
      c.pause();
      delayed = true;
      setTimeout(() => {
        delayed = false;
        if (res.destroyed) return;
        const full = !res.write(chunk);
        if (endPending) {
          endPending = false;
          res.off('close', onClose);
          res.end();
        } else if (full) res.once('drain', () => c.resume());
        else c.resume();
      }, wait);
    },
    onResponseEnd() {
      if (delayed) {
        endPending = true;
        return;
      }
      res.off('close', onClose);
      res.end();
    },
    onResponseError(_c, err) {
      res.off('close', onClose);
      if (clientGone || err instanceof ClientGone) {
        res.destroy();
        return;
      }
      if (err instanceof BodyTooLarge) {
        ctx.rule = REQUEST_RULES.bodyLen;
        if (res.headersSent) res.destroy();
        else sendStatus(ctx, 413);
        return;
      }
      const code = errorCode(err);
      if (res.headersSent) {
        // Mid-body: the status is out; the client sees a cut response.
        ctx.rule = ORIGIN_RULES.error;
        res.destroy();
        return;
      }
      if (attempt === 0 && body === null && STALE_CONNECTION_ERRORS.has(code) && (options.method === 'GET' || options.method === 'HEAD')) {
        attempt++;
        res.once('close', onClose);
        dispatch();
        return;
      }
      if (CONNECT_ERRORS.has(code)) {
        origin.recordFailure(Date.now());
        ctx.rule = ORIGIN_RULES.connect;
      } else {
        ctx.rule = TIMEOUT_ERRORS.has(code) ? ORIGIN_RULES.timeout : ORIGIN_RULES.error;
      }
      sendStatus(ctx, 502);
    },
  };

  function dispatch(): void {
    try {
      pool.dispatch(options, handler);
    } catch (err) {
      handler.onResponseError?.(controller as Dispatcher.DispatchController, err as Error);
    }
  }
  dispatch();
}

/**
 * The proxy's own answers (421, 502, 503, the limits' 4xx, redirects): a short plain-text body,
 * HSTS on HTTPS for sites that set it, and a bounded drain of a request body left unread.
 */
import { STATUS_CODES } from 'node:http';
import { FastRequest, LINGER_MS } from './http1-server.ts';
import type { RequestContext, ProxyRequest } from './request-context.ts';

export interface SendOptions {
  headers?: Readonly<Record<string, string>>;
}


function hasBody(req: ProxyRequest): boolean {
  const declared = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (declared !== undefined && declared !== '0');
}

/**
 * After an answer that did not read the request body (a 413, a 405 to a POST): the rest of the
 * body is read and dropped for up to LINGER_MS, then the connection closes. Closing at once
 * would reset the connection while the client is still sending, and most clients then report
 * the reset instead of the answer (the "lingering close" of other servers).
 */
function dropUnreadBody(ctx: RequestContext): void {
  const { req, res } = ctx;
  // The own server lingers by itself (http1-server.ts).
  if (req.complete || !hasBody(req) || req instanceof FastRequest) return;
  const socket = req.socket;
  const destroySoon = socket.destroySoon;
  let closing = false;
  let timer: NodeJS.Timeout | undefined;
  const bound = (): void => {
    timer ??= setTimeout(() => socket.destroy(), LINGER_MS);
    timer.unref();
  };
  socket.once('close', () => clearTimeout(timer));
  // When the connection is not kept alive, node ends the response with socket.destroySoon(),
  // which closes both directions at once. For this one response only the sending side closes;
  // the rest of the body is still read until the client closes its side or the time is up.
  socket.destroySoon = function endAndLinger() {
    socket.destroySoon = destroySoon;
    closing = true;
    socket.end();
    bound();
  };
  res.once('finish', () => {
    if (req.complete) {
      socket.destroySoon = destroySoon;
      return;
    }
    bound();
    req.once('end', () => {
      socket.destroySoon = destroySoon;
      // A kept-alive connection whose body arrived in time serves the next request.
      if (!closing) clearTimeout(timer);
    });
    req.resume();
  });
}

/** Writes a complete answer with `status`; runs wherever the pipeline stops a request. */
export function sendStatus(ctx: RequestContext, status: number, opts: SendOptions = {}): void {
  sendBody(ctx, status, `${status} ${STATUS_CODES[status] ?? ''}\n`, opts.headers);
}

/**
 * Writes a complete answer of the proxy's own with `body` (plain text unless `headers` name
 * another content-type), never cached; the challenge page and its verify answers use it too.
 */
export function sendBody(ctx: RequestContext, status: number, body: string, extra?: Readonly<Record<string, string>>): void {
  const res = ctx.res;
  if (res.headersSent || res.destroyed) return;
  const headers: Record<string, string | number | string[]> = {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
    ...extra,
  };
  if (ctx.scheme === 'https' && ctx.site?.hsts !== undefined) headers['strict-transport-security'] = ctx.site.hsts;
  dropUnreadBody(ctx);
  res.writeHead(status, headers);
  res.end(ctx.req.method === 'HEAD' ? undefined : body);
}

/** Writes a redirect to `location` with a short body naming it. */
export function sendRedirect(ctx: RequestContext, status: number, location: string): void {
  sendStatus(ctx, status, { headers: { location } });
}

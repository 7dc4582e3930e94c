/**
 * The data plane's request handler: route (Host, and SNI on HTTPS) -> client IP -> the site's
 * pipeline -> forward, then one request event when the response is over. Every request reads the
 * current config generation once on arrival and uses it to the end.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { STATUS_CODES } from 'node:http';
import type { TLSSocket } from 'node:tls';
import type { SecureContext } from 'node:tls';
import type { Logger } from 'pino';
import type { CompiledSite } from './compiled-site.ts';
import { forwardRequest } from './forward.ts';
import type { Generation } from './generation.ts';
import { normalizeHost } from './host-router.ts';
import { plainIp } from './ip-match.ts';
import type { RequestEventSink } from './recent-events.ts';
import type { RequestContext, Scheme } from './request-context.ts';
import { sendRedirect, sendStatus } from './responses.ts';
import type { Verdict } from './verdict.ts';

/** Rule ids the data plane itself decides (telemetry). */
export const ROUTE_RULES = {
  noMatch: 'route.no_match',
  sniMismatch: 'route.sni_mismatch',
  disabled: 'site.disabled',
  badTarget: 'request.target',
  websocketDisabled: 'websocket.disabled',
  upgradeUnsupported: 'upgrade.unsupported',
} as const;

// nginx's code for a request whose client went away before any answer.
const CLIENT_CLOSED = 499;

export interface DataPlane {
  /** The 'request' listener of the HTTP and HTTPS servers. */
  handler(scheme: Scheme): (req: IncomingMessage, res: ServerResponse) => void;
  /**
   * The servers' shouldUpgradeCallback: only WebSocket handshakes take the 'upgrade' path; any
   * other Upgrade (h2c, say) is served as a plain request, its Upgrade header dropped as hop-by-hop.
   */
  isTunnel(req: IncomingMessage): boolean;
  /** The 'upgrade' listener: routed and checked; tunnels are not spliced yet (WebSockets come later). */
  upgradeHandler(scheme: Scheme): (req: IncomingMessage, socket: Duplex, head: Buffer) => void;
  /** SNI certificate selection: the routed site's certificate, or an error that aborts the handshake. */
  sniCallback(servername: string, cb: (err: Error | null, ctx?: SecureContext) => void): void;
  /** Requests whose response is not over yet. */
  inFlight(): number;
  /** From now on every response asks the client to close its connection (shutdown). */
  drain(): void;
}

export interface DataPlaneOptions {
  current: () => Generation;
  onEvent: RequestEventSink;
  logger: Logger;
}

/** Splits an absolute-form target (`http://host/path`) into its authority and origin-form target. */
function splitTarget(url: string, hostHeader: string | undefined): { host: string | undefined; target: string } | undefined {
  if (url.startsWith('/')) return { host: hostHeader, target: url };
  if (!/^https?:\/\//i.test(url)) return undefined;
  try {
    const u = new URL(url);
    return { host: u.host, target: `${u.pathname}${u.search}` };
  } catch {
    return undefined;
  }
}

/** Creates the handler set; runs once at start. */
export function createDataPlane(opts: DataPlaneOptions): DataPlane {
  const { current, onEvent, logger } = opts;
  let active = 0;
  let draining = false;

  function finish(ctx: RequestContext): void {
    active--;
    if (ctx.cleanups) for (const fn of ctx.cleanups) fn();
    const res = ctx.res;
    onEvent({
      time: new Date(ctx.time).toISOString(),
      site: ctx.site?.id ?? null,
      client_ip: ctx.clientIp,
      method: ctx.req.method ?? '',
      host: ctx.hostHeader ?? '',
      path: ctx.path,
      status: res.headersSent ? res.statusCode : CLIENT_CLOSED,
      bytes_in: ctx.bytesIn,
      bytes_out: ctx.bytesOut,
      duration_ms: Math.round((performance.now() - ctx.startedAt) * 1000) / 1000,
      rule: ctx.rule,
    });
  }

  function apply(ctx: RequestContext, verdict: Verdict): void {
    switch (verdict.kind) {
      case 'allow':
        forwardRequest(ctx, ctx.site as CompiledSite);
        return;
      case 'deny':
        ctx.rule = verdict.rule;
        sendStatus(ctx, verdict.status, verdict.headers ? { headers: verdict.headers } : {});
        return;
      case 'redirect':
        ctx.rule = verdict.rule;
        sendRedirect(ctx, verdict.status, verdict.location);
        return;
      case 'challenge':
        // No challenge phase yet: spec/3 §2.5 degrades a challenge to 429 when challenges are off.
        ctx.rule = verdict.rule;
        sendStatus(ctx, 429);
        return;
      case 'close':
        ctx.rule = verdict.rule;
        ctx.res.destroy();
        return;
    }
  }

  function handle(scheme: Scheme, req: IncomingMessage, res: ServerResponse): void {
    const gen = current();
    active++;
    const split = splitTarget(req.url ?? '/', req.headers.host);
    const target = split?.target ?? req.url ?? '';
    const q = target.indexOf('?');
    const peerIp = plainIp(req.socket.remoteAddress);
    const ctx: RequestContext = {
      req,
      res,
      scheme,
      time: Date.now(),
      startedAt: performance.now(),
      hostHeader: split ? split.host : req.headers.host,
      target,
      path: q === -1 ? target : target.slice(0, q),
      peerIp,
      site: undefined,
      clientIp: peerIp,
      rule: null,
      bytesIn: 0,
      bytesOut: 0,
      cleanups: undefined,
    };
    res.once('close', () => finish(ctx));
    if (draining) res.setHeader('connection', 'close');
    if (!split) {
      ctx.rule = ROUTE_RULES.badTarget;
      sendStatus(ctx, 400);
      return;
    }
    const site = gen.route(ctx.hostHeader);
    if (site === undefined || (scheme === 'https' && gen.route((req.socket as TLSSocket).servername || undefined)?.id !== site.id)) {
      ctx.rule = site === undefined ? ROUTE_RULES.noMatch : ROUTE_RULES.sniMismatch;
      sendStatus(ctx, 421);
      return;
    }
    ctx.site = site;
    if (!site.enabled) {
      ctx.rule = ROUTE_RULES.disabled;
      sendStatus(ctx, 503);
      return;
    }
    ctx.clientIp = site.resolveClientIp(peerIp, req.headers['x-forwarded-for'], req.headers['x-real-ip']);
    apply(ctx, site.pipeline(ctx));
  }

  function rejectUpgrade(socket: Duplex, status: number): void {
    const text = `${status} ${STATUS_CODES[status] ?? ''}\n`;
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
    );
  }

  function upgrade(scheme: Scheme, req: IncomingMessage, socket: Duplex): void {
    const gen = current();
    const host = req.headers.host;
    const site = gen.route(host);
    const peerIp = plainIp(req.socket.remoteAddress);
    const url = req.url ?? '';
    const q = url.indexOf('?');
    let status: number;
    let rule: string;
    if (site === undefined || (scheme === 'https' && gen.route((req.socket as TLSSocket).servername || undefined)?.id !== site.id)) {
      [status, rule] = [421, site === undefined ? ROUTE_RULES.noMatch : ROUTE_RULES.sniMismatch];
    } else if (!site.enabled) {
      [status, rule] = [503, ROUTE_RULES.disabled];
    } else if (!site.config.websockets.enabled) {
      [status, rule] = [403, ROUTE_RULES.websocketDisabled];
    } else {
      // Tunnels (spliced after the origin's 101) are the next part of the proxy.
      [status, rule] = [501, ROUTE_RULES.upgradeUnsupported];
    }
    socket.on('error', () => undefined);
    rejectUpgrade(socket, status);
    onEvent({
      time: new Date().toISOString(),
      site: site?.id ?? null,
      client_ip: site ? site.resolveClientIp(peerIp, req.headers['x-forwarded-for'], req.headers['x-real-ip']) : peerIp,
      method: req.method ?? '',
      host: host ?? '',
      path: q === -1 ? url : url.slice(0, q),
      status,
      bytes_in: 0,
      bytes_out: 0,
      duration_ms: 0,
      rule,
    });
  }

  return {
    isTunnel: (req) => /\bwebsocket\b/i.test(req.headers.upgrade ?? ''),
    handler: (scheme) =>
      function onRequest(req, res) {
        handle(scheme, req, res);
      },
    upgradeHandler: (scheme) =>
      function onUpgrade(req, socket) {
        upgrade(scheme, req, socket);
      },
    sniCallback(servername, cb) {
      const site = current().route(servername);
      if (site?.secureContext) {
        cb(null, site.secureContext);
        return;
      }
      logger.debug({ servername }, 'TLS handshake refused: no site certificate for this name');
      cb(new Error(`no certificate for ${JSON.stringify(normalizeHost(servername) ?? servername)}`));
    },
    inFlight: () => active,
    drain() {
      draining = true;
    },
  };
}

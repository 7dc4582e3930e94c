/**
 * The data plane's request handler: route (Host, and SNI on HTTPS) -> client IP -> the site's
 * pipeline -> the WAF's body phase (text-like bodies only) -> forward, then one request event when
 * the response is over. Upgrades take the same
 * path up to the forward phase, then become tunnels (tunnel.ts) whose event goes out at the 101.
 * Every request reads the current config generation once on arrival and uses it to the end.
 * Request and response body bytes (and tunnel bytes) count towards the site's monthly quota.
 */
import { ServerResponse, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import type { SecureContext } from 'node:tls';
import type { Logger } from 'pino';
import type { CompiledSite } from './compiled-site.ts';
import { GLOBAL_ACL_DENY } from './acl.ts';
import { checkBody, runBodyCheck } from './body-inspect.ts';
import { forwardRequest } from './forward.ts';
import { FastRequest } from './http1-server.ts';
import type { Generation } from './generation.ts';
import { normalizeHost } from './host-router.ts';
import { plainIp } from '../../src/lib/ip-match.ts';
import { REQUEST_RULES } from './request-limits.ts';
import type { PipelineServices } from './pipeline.ts';
import type { PlaneRequestEvent, RequestEventSink } from './recent-events.ts';
import type { ProxyRequest, ProxyResponse, RequestContext, Scheme } from './request-context.ts';
import { sendRedirect, sendStatus } from './responses.ts';
import { openTunnel, type Tunnel } from './tunnel.ts';
import type { Verdict } from './verdict.ts';
import { monoNow, wallNow } from './read-clock.ts';

/** Rule ids the data plane itself decides (telemetry). */
export const ROUTE_RULES = {
  noMatch: 'route.no_match',
  sniMismatch: 'route.sni_mismatch',
  disabled: 'site.disabled',
  badTarget: 'request.target',
  badHost: 'request.host',
  badFraming: 'request.framing',
  websocketDisabled: 'websocket.disabled',
} as const;

// nginx's code for a request whose client went away before any answer.
const CLIENT_CLOSED = 499;

export interface DataPlane {
  /** The 'request' listener of the HTTP and HTTPS servers. */
  handler(scheme: Scheme): (req: ProxyRequest, res: ProxyResponse) => void;
  /**
   * The servers' shouldUpgradeCallback: only WebSocket handshakes take the 'upgrade' path; any
   * other Upgrade (h2c, say) is served as a plain request, its Upgrade header dropped as hop-by-hop.
   */
  isTunnel(req: IncomingMessage): boolean;
  /** The 'upgrade' listener: routed and checked like a request, then tunnelled to the origin. */
  upgradeHandler(scheme: Scheme): (req: IncomingMessage, socket: Duplex, head: Buffer) => void;
  /**
   * The 'connect' listener: a CONNECT is routed and checked like a request (405 unless the site
   * allows the method); the proxy opens no CONNECT tunnels, so one that passes is answered 501.
   */
  connectHandler(scheme: Scheme): (req: IncomingMessage, socket: Duplex) => void;
  /** SNI certificate selection: the routed site's certificate, or an error that aborts the handshake. */
  sniCallback(servername: string, cb: (err: Error | null, ctx?: SecureContext) => void): void;
  /** Requests whose response is not over yet. */
  inFlight(): number;
  /** Live tunnels (after their 101). */
  tunnels(): number;
  /** From now on every response asks the client to close its connection (shutdown). */
  drain(): void;
  /** Closes every live tunnel (shutdown, once in-flight requests are done). */
  closeTunnels(): void;
}

export interface DataPlaneOptions {
  current: () => Generation;
  onEvent: RequestEventSink;
  /**
   * A tunnel ended: its bytes after the handshake, and the event published at its 101 (now
   * carrying the tunnel's totals), if it got that far.
   */
  onTunnelClosed?: (site: string, up: number, down: number, event: PlaneRequestEvent | undefined) => void;
  /** Requests in flight went up or down by one (the worker's gauge in the shared table). */
  onInFlight?: (delta: number) => void;
  services: PipelineServices;
  logger: Logger;
}

// Pipelined requests node's server may hold on one connection, waiting their turn, before it
// stops reading that connection (the own server stops at 64 KiB of unparsed bytes).
const PIPELINE_DEPTH = 16;
// Requests node's server parsed on each connection that wait for the answers before them, and
// whether that stopped its reading (node pauses connections for its own reasons too).
const waiting = new WeakMap<Duplex, { n: number; paused: boolean }>();

/**
 * Runs `then` once `res` is the connection's current answer. Node's server parses pipelined
 * requests at once and emits each, its response queued behind the earlier ones: forwarded then,
 * a request reached the origin even when the answer before it closed the connection (HTTP/1.0
 * without a length, `Connection: close`, a 400, the client gone), and the origin ran it for
 * nobody (a retried POST ran twice). Node gives a queued response the connection only when the
 * one before it finished and kept the connection open; when it does not, or the connection is
 * gone first (a reset), `then` never runs. A client's FIN alone is a half-close (`nc -N`): what
 * it sent before it is still answered, each request in its turn.
 * The connection stops being read while PIPELINE_DEPTH requests wait, since nothing answered
 * yet would otherwise bound what a client pipelines.
 */
function inTurn(req: IncomingMessage, res: ServerResponse, then: () => void): void {
  if (res.socket !== null) {
    then();
    return;
  }
  // Node's own flag for a connection it stopped reading: its parser, which may read the socket's
  // handle directly (bypassing the stream), pauses after the bytes at hand, and node's server
  // resumes both when it drains the connection's answers.
  const socket = req.socket as Socket & { _paused?: boolean; parser?: { pause(): void; resume(): void } | null };
  const q = waiting.get(socket) ?? { n: 0, paused: false };
  waiting.set(socket, q);
  if (++q.n >= PIPELINE_DEPTH && !socket._paused) {
    q.paused = true;
    socket._paused = true;
    socket.pause();
  }
  res.once('socket', () => {
    if (--q.n < PIPELINE_DEPTH && q.paused) {
      q.paused = false;
      if (socket._paused) {
        socket._paused = false;
        socket.parser?.resume();
        socket.resume();
      }
    }
    then();
  });
}

/**
 * Splits an absolute-form target (`http://host/path`) into its authority and origin-form target;
 * CONNECT's authority-form target (`host:port`) is its own path, and so is `OPTIONS *` (the
 * asterisk form asks about the server as a whole: it is routed by Host and asked of the origin).
 */
function splitTarget(method: string | undefined, url: string, hostHeader: string | undefined): { host: string | undefined; target: string } | undefined {
  if (url.startsWith('/')) return { host: hostHeader, target: url };
  if (method === 'CONNECT') return { host: hostHeader ?? url, target: url };
  if (url === '*' && method === 'OPTIONS') return { host: hostHeader, target: url };
  if (!/^https?:\/\//i.test(url)) return undefined;
  try {
    const u = new URL(url);
    return { host: u.host, target: `${u.pathname}${u.search}` };
  } catch {
    return undefined;
  }
}

/**
 * RFC 9112 §3.2: an HTTP/1.1 request without Host, or any request with more than one, is a 400.
 * The own parser hands a repeated Host to node's, which keeps the first one silently: only its
 * requests need their raw headers looked through.
 */
function badHost(req: ProxyRequest): boolean {
  if (req.headers.host === undefined) return req.httpVersionMajor === 1 && req.httpVersionMinor === 1;
  if (req instanceof FastRequest) return false;
  const raw = req.rawHeaders;
  let seen = false;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    if (name.length !== 4 || name.toLowerCase() !== 'host') continue;
    if (seen) return true;
    seen = true;
  }
  return false;
}

/** Creates the handler set; runs once at start. */
export function createDataPlane(opts: DataPlaneOptions): DataPlane {
  const { current, onEvent, onTunnelClosed, onInFlight, services, logger } = opts;
  let active = 0;
  let draining = false;
  const live = new Set<Tunnel>();

  /** Publishes the request's event and counts its bytes; runs once, when the response is over (or at a 101). */
  function finish(ctx: RequestContext, status?: number): PlaneRequestEvent | undefined {
    // Tunnels publish at the 101; their connection's close comes later.
    if (ctx.finished) return undefined;
    ctx.finished = true;
    active--;
    onInFlight?.(-1);
    if (ctx.cleanups) for (const fn of ctx.cleanups) fn();
    const res = ctx.res;
    if (ctx.site) services.quota.add(ctx.site.id, ctx.site.config.bandwidth, ctx.bytesIn + ctx.bytesOut);
    const event: PlaneRequestEvent = {
      kind: 'request',
      time: ctx.time,
      site: ctx.site?.id ?? null,
      client_ip: ctx.clientIp,
      method: ctx.req.method ?? '',
      host: ctx.hostHeader ?? '',
      path: ctx.path,
      status: status ?? (res.headersSent ? res.statusCode : CLIENT_CLOSED),
      bytes_in: ctx.bytesIn,
      bytes_out: ctx.bytesOut,
      duration_ms: Math.round((monoNow() - ctx.startedAt) * 1000) / 1000,
      rule: ctx.rule,
    };
    onEvent(event);
    return event;
  }

  function apply(ctx: RequestContext, verdict: Verdict, forward: (ctx: RequestContext, site: CompiledSite) => void): void {
    switch (verdict.kind) {
      case 'allow':
        forward(ctx, ctx.site as CompiledSite);
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
        // The pipeline's challenge gate answers challenges; one that bypassed it is refused.
        ctx.rule = verdict.rule;
        sendStatus(ctx, 429);
        return;
      case 'respond':
        ctx.rule = verdict.rule;
        verdict.respond(ctx);
        return;
      case 'close':
        ctx.rule = verdict.rule;
        ctx.res.destroy();
        return;
    }
  }

  /**
   * Everything a request and an upgrade share: the context, routing (421), disabled sites (503)
   * and the client IP. Returns the context when a site takes the request, else undefined (the
   * answer is already on its way).
   */
  function begin(scheme: Scheme, req: ProxyRequest, res: ProxyResponse): RequestContext | undefined {
    const gen = current();
    active++;
    onInFlight?.(1);
    const split = splitTarget(req.method, req.url ?? '/', req.headers.host);
    const target = split?.target ?? req.url ?? '';
    const q = target.indexOf('?');
    const peerIp = plainIp(req.socket.remoteAddress);
    const ctx: RequestContext = {
      req,
      res,
      scheme,
      time: wallNow(),
      startedAt: monoNow(),
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
      finished: false,
    };
    res.on('close', () => finish(ctx));
    if (draining) res.setHeader('connection', 'close');
    if (!split || badHost(req)) {
      ctx.rule = split ? ROUTE_RULES.badHost : ROUTE_RULES.badTarget;
      sendStatus(ctx, 400);
      return undefined;
    }
    // RFC 9112 §6.1: HTTP/1.0 knows no Transfer-Encoding, so such a message's framing is faulty
    // (a front end reading it as 1.0 sees its body as the next request: smuggling). Refused, and
    // the connection closes after the answer, so nothing sent behind it is taken as a request.
    if (req.httpVersionMinor === 0 && req.headers['transfer-encoding'] !== undefined) {
      ctx.rule = ROUTE_RULES.badFraming;
      res.setHeader('connection', 'close');
      sendStatus(ctx, 400);
      return undefined;
    }
    // global_acl comes before any site logic, so it tests the peer: trusted proxies are per site.
    if (gen.globalAcl && !gen.globalAcl(peerIp)) {
      ctx.rule = GLOBAL_ACL_DENY.rule;
      sendStatus(ctx, GLOBAL_ACL_DENY.status);
      return undefined;
    }
    const site = gen.route(ctx.hostHeader);
    if (site === undefined || (scheme === 'https' && gen.route((req.socket as TLSSocket).servername || undefined)?.id !== site.id)) {
      ctx.rule = site === undefined ? ROUTE_RULES.noMatch : ROUTE_RULES.sniMismatch;
      sendStatus(ctx, 421);
      return undefined;
    }
    ctx.site = site;
    if (!site.enabled) {
      ctx.rule = ROUTE_RULES.disabled;
      sendStatus(ctx, 503);
      return undefined;
    }
    ctx.clientIp = site.resolveClientIp(peerIp, req.headers['x-forwarded-for'], req.headers['x-real-ip']);
    return ctx;
  }

  const forward = (ctx: RequestContext, site: CompiledSite): void => forwardRequest(ctx, site, services.shaper);

  function handle(scheme: Scheme, req: ProxyRequest, res: ProxyResponse): void {
    const ctx = begin(scheme, req, res);
    if (!ctx) return;
    const site = ctx.site as CompiledSite;
    const verdict = site.pipeline(ctx);
    // The body phase: the WAF reads the start of a text-like body before it is forwarded.
    if (verdict.kind === 'allow' && site.bodyCheck?.wants(req)) {
      const failed = (err: unknown): void => {
        logger.error({ err, site: site.id }, 'body inspection failed');
        ctx.res.destroy();
      };
      const whole = req.bufferedBody;
      if (whole) {
        let r: ReturnType<typeof checkBody>;
        try {
          r = checkBody(ctx, site.bodyCheck, { chunks: [whole], bytes: whole.length, ended: true });
        } catch (err) {
          failed(err);
          return;
        }
        apply(ctx, r.verdict, (c, s) => forwardRequest(c, s, services.shaper, r.prefix));
        return;
      }
      runBodyCheck(ctx, site.bodyCheck)
        .then((r) => r && apply(ctx, r.verdict, (c, s) => forwardRequest(c, s, services.shaper, r.prefix)))
        .catch(failed);
      return;
    }
    apply(ctx, verdict, forward);
  }

  /** Hands an upgrade that passed every check to the origin; at the 101 it becomes a live tunnel. */
  function tunnel(ctx: RequestContext, site: CompiledSite, socket: Duplex, head: Buffer): void {
    let release: (() => void) | undefined;
    let event: PlaneRequestEvent | undefined;
    const t = openTunnel(ctx, site, socket, head, services.shaper, {
      onOpen(handshakeIn, handshakeOut) {
        ctx.bytesIn += handshakeIn;
        ctx.bytesOut += handshakeOut;
        release = services.slots.acquire(site.id, ctx.clientIp);
        live.add(t);
        event = finish(ctx, 101);
      },
      onClose(up, down, reason) {
        release?.();
        live.delete(t);
        services.quota.add(site.id, site.config.bandwidth, up + down);
        // The recent-events entry published at the 101 gets the tunnel's totals.
        if (event) {
          event.bytes_in += up;
          event.bytes_out += down;
          event.duration_ms = Math.round((performance.now() - ctx.startedAt) * 1000) / 1000;
        }
        onTunnelClosed?.(site.id, up, down, event);
        logger.debug({ site: site.id, client_ip: ctx.clientIp, up, down, reason }, 'tunnel closed');
      },
    });
  }

  /**
   * A response object on a raw socket node's server let go of (an upgrade, a CONNECT), so its
   * answers are written (and counted, and logged as events) exactly like those of plain requests.
   */
  function rawResponse(req: IncomingMessage, socket: Duplex): ServerResponse {
    socket.on('error', () => undefined);
    const res = new ServerResponse(req);
    res.assignSocket(socket as Socket);
    res.shouldKeepAlive = false;
    // Node's server ends the connection after a response it made itself; this one is ours.
    res.once('finish', () => socket.end());
    return res;
  }

  /**
   * Runs `then` once no answer to an earlier request is under way on `socket`. Node's server hands
   * an upgrade or a CONNECT over as soon as it is parsed, also when it was pipelined behind a
   * request whose answer is still being written there; answers go out in order (and a second
   * response on the socket would throw, taking the worker down). Nothing runs when the earlier
   * answer closed the connection.
   */
  function afterEarlierAnswers(socket: Duplex, then: () => void): void {
    const earlier = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage;
    if (earlier) earlier.once('finish', () => afterEarlierAnswers(socket, then));
    else if (socket.writable) then();
  }

  function upgrade(scheme: Scheme, req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const ctx = begin(scheme, req, rawResponse(req, socket));
    if (!ctx) return;
    const site = ctx.site as CompiledSite;
    if (!site.config.websockets.enabled) {
      ctx.rule = ROUTE_RULES.websocketDisabled;
      sendStatus(ctx, 403);
      return;
    }
    apply(ctx, site.pipeline(ctx), (c, s) => tunnel(c, s, socket, head));
  }

  function connect(scheme: Scheme, req: IncomingMessage, socket: Duplex): void {
    const ctx = begin(scheme, req, rawResponse(req, socket));
    if (!ctx) return;
    apply(ctx, (ctx.site as CompiledSite).pipeline(ctx), (c) => {
      c.rule = REQUEST_RULES.method;
      sendStatus(c, 501);
    });
  }

  return {
    isTunnel: (req) => /\bwebsocket\b/i.test(req.headers.upgrade ?? ''),
    handler: (scheme) =>
      function onRequest(req, res) {
        if (res instanceof ServerResponse) inTurn(req as IncomingMessage, res, () => handle(scheme, req, res));
        else handle(scheme, req, res);
      },
    upgradeHandler: (scheme) =>
      function onUpgrade(req, socket, head) {
        afterEarlierAnswers(socket, () => upgrade(scheme, req, socket, head));
      },
    connectHandler: (scheme) =>
      function onConnect(req, socket) {
        afterEarlierAnswers(socket, () => connect(scheme, req, socket));
      },
    sniCallback(servername, cb) {
      const site = current().route(servername);
      if (site?.certificate) {
        cb(null, site.certificate.context);
        return;
      }
      logger.debug({ servername }, 'TLS handshake refused: no site certificate for this name');
      cb(new Error(`no certificate for ${JSON.stringify(normalizeHost(servername) ?? servername)}`));
    },
    inFlight: () => active,
    tunnels: () => live.size,
    drain() {
      draining = true;
    },
    closeTunnels() {
      for (const t of [...live]) t.close();
    },
  };
}

/**
 * WebSocket (and other upgrade) tunnels, spec/3 §2.6: the handshake goes to the origin like a
 * request; once the origin answers 101 the proxy relays its answer and splices raw bytes both
 * ways. A non-101 answer is relayed as a normal response. A tunnel closes when either side
 * closes, after `websockets.idle_timeout_secs` without a byte either way (WebSocket pings are
 * bytes, so they keep it open), or at `websockets.max_lifetime_secs`. Bytes towards the client
 * are shaped by the site's send-rate caps.
 */
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { connect as netConnect, isIP, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import type { Duplex } from 'node:stream';
import { timerDelay } from '../../src/lib/units.ts';
import type { CompiledSite } from './compiled-site.ts';
import { ORIGIN_RULES, endpointsOf, errorCode, originFailed } from './forward.ts';
import { stripResponseHopHeaders, transferCodings } from './hop-headers.ts';
import { statusHasNoBody } from './http1-parse.ts';
import { ORIGIN_ERRORS } from './origin-client.ts';
import { proxyProtocolHeader } from './proxy-protocol.ts';
import type { RateShaper } from './rate-shaper.ts';
import type { RequestContext, ProxyRequest } from './request-context.ts';
import { sendStatus } from './responses.ts';

// After one side closed, the other gets this long to flush what it still has to send.
const CLOSE_FLUSH_MS = 5_000;

export interface TunnelHooks {
  /** The origin answered 101 and its answer went to the client: the handshake's byte counts. */
  onOpen(handshakeIn: number, handshakeOut: number): void;
  /** The tunnel is over: bytes relayed after the handshake, and why it ended. */
  onClose(up: number, down: number, reason: 'closed' | 'idle' | 'lifetime' | 'shutdown'): void;
}

export interface Tunnel {
  /** Ends the tunnel now (shutdown); onClose runs with `shutdown`. */
  close(): void;
}

/** The request head as the client sent it (reconstructed from the parsed request). */
function requestHeadBytes(req: ProxyRequest): number {
  let n = Buffer.byteLength(`${req.method ?? ''} ${req.url ?? ''} HTTP/${req.httpVersion}\r\n\r\n`);
  for (let i = 0; i < req.rawHeaders.length; i += 2) n += Buffer.byteLength(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}\r\n`);
  return n;
}

/**
 * Sends the upgrade handshake to the site's origin and, on 101, splices the client's socket to
 * the origin's; runs for an upgrade request that passed every check. Failures before the 101
 * answer 502 on `ctx.res` with an `origin.*` rule, like plain forwarding. Returns a handle the
 * data plane keeps to close the tunnel at shutdown.
 */
export function openTunnel(ctx: RequestContext, site: CompiledSite, client: Duplex, head: Buffer, shaper: RateShaper, hooks: TunnelHooks): Tunnel {
  const { req, res } = ctx;
  const origin = site.origin;
  const ws = site.config.websockets;
  let closed = false;
  let closeTunnel: (reason: 'closed' | 'idle' | 'lifetime' | 'shutdown') => void = () => undefined;
  const tunnel: Tunnel = { close: () => closeTunnel('shutdown') };

  if (origin.backoffUntil() > Date.now()) {
    ctx.rule = ORIGIN_RULES.backoff;
    sendStatus(ctx, 502);
    return tunnel;
  }
  const url = new URL(site.config.origin.url);
  const secure = url.protocol === 'https:';
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const port = Number(url.port) || (secure ? 443 : 80);
  const headers = site.originHeaders(req.rawHeaders, ctx.hostHeader, ctx.clientIp, ctx.peerIp, ctx.scheme);
  // The generic builder drops Upgrade and Connection as hop-by-hop; here they are the point.
  headers.push('connection', 'Upgrade', 'upgrade', req.headers.upgrade ?? 'websocket');
  const preface = origin.proxyProtocol === 'off' ? undefined : proxyProtocolHeader(origin.proxyProtocol, endpointsOf(ctx));

  let timer: NodeJS.Timeout | undefined;
  const fail = (code: string, message: string): void => {
    oreq.destroy(Object.assign(new Error(message), { code }));
  };
  const oreq = httpRequest({
    method: req.method ?? 'GET',
    path: ctx.target,
    headers,
    setHost: false,
    createConnection() {
      const localAddress = origin.sourceFor(ctx.clientIp);
      const raw = netConnect({ host, port, ...(localAddress === undefined ? {} : { localAddress }) });
      raw.setNoDelay(true);
      timer = setTimeout(() => fail(ORIGIN_ERRORS.connectTimeout, 'connect timeout'), timerDelay(site.config.origin.connect_timeout_ms));
      raw.once('connect', () => {
        clearTimeout(timer);
        timer = setTimeout(() => fail(ORIGIN_ERRORS.headersTimeout, 'no answer to the upgrade'), timerDelay(site.config.origin.read_timeout_ms));
      });
      if (preface) raw.write(preface);
      return secure ? tlsConnect({ socket: raw, host, ...(isIP(host) === 0 ? { servername: host } : {}), ALPNProtocols: ['http/1.1'] }) : raw;
    },
  });
  const onClientGone = (): void => {
    clearTimeout(timer);
    oreq.destroy();
  };
  client.once('close', onClientGone);

  oreq.on('error', (err) => {
    clearTimeout(timer);
    client.off('close', onClientGone);
    if (client.destroyed || res.headersSent) return;
    ctx.rule = originFailed(origin, errorCode(err));
    sendStatus(ctx, 502);
  });

  // The origin refused the upgrade: its answer goes to the client as a normal response.
  oreq.on('response', (ores) => {
    clearTimeout(timer);
    client.off('close', onClientGone);
    origin.recordSuccess();
    const status = ores.statusCode ?? 502;
    const out = { ...ores.headers };
    stripResponseHopHeaders(out);
    // As for forwarded answers (http1-parse.ts): a 204 carries no Content-Length (RFC 9110 §8.6),
    // and a body still coded (gzip) keeps its label, chunked anew by node's server.
    const te = ores.headers['transfer-encoding'];
    const codings = te === undefined ? undefined : transferCodings(te).others;
    if (status === 204) delete out['content-length'];
    else if (codings !== undefined && !statusHasNoBody(status)) out['transfer-encoding'] = `${codings}, chunked`;
    if (ctx.scheme === 'https' && site.hsts !== undefined) out['strict-transport-security'] = site.hsts;
    res.writeHead(status, out as Record<string, string | string[]>);
    ores.on('data', (d: Buffer) => {
      ctx.bytesOut += d.length;
      if (!res.write(d)) {
        ores.pause();
        res.once('drain', () => ores.resume());
      }
    });
    ores.on('end', () => res.end());
    ores.on('error', () => res.destroy());
  });

  oreq.on('upgrade', (ores: IncomingMessage, upstream: Socket, upstreamHead: Buffer) => {
    clearTimeout(timer);
    client.off('close', onClientGone);
    origin.recordSuccess();
    if (client.destroyed) {
      upstream.destroy();
      return;
    }
    let answer = `HTTP/1.1 101 ${ores.statusMessage || 'Switching Protocols'}\r\n`;
    for (let i = 0; i < ores.rawHeaders.length; i += 2) {
      // A 1xx has no body to frame: RFC 9110 §8.6 forbids its Content-Length.
      const name = (ores.rawHeaders[i] as string).toLowerCase();
      if (name !== 'content-length' && name !== 'transfer-encoding') answer += `${ores.rawHeaders[i]}: ${ores.rawHeaders[i + 1]}\r\n`;
    }
    answer += '\r\n';
    client.write(answer);
    hooks.onOpen(requestHeadBytes(req), Buffer.byteLength(answer));
    splice(upstream, upstreamHead);
  });
  oreq.end();

  function splice(upstream: Socket, upstreamHead: Buffer): void {
    let up = 0;
    let down = 0;
    let last = performance.now();
    let idleTimer: NodeJS.Timeout | undefined;
    let lifeTimer: NodeJS.Timeout | undefined;
    let flushTimer: NodeJS.Timeout | undefined;
    const shaped = site.maxSiteBps !== null || site.maxIpBps !== null;

    closeTunnel = (reason) => {
      if (closed) return;
      closed = true;
      clearTimeout(idleTimer);
      clearTimeout(lifeTimer);
      clearTimeout(flushTimer);
      client.destroy();
      upstream.destroy();
      hooks.onClose(up, down, reason);
    };

    const relay = (from: Duplex, to: Duplex, isDown: boolean): void => {
      from.on('data', (d: Buffer) => {
        last = performance.now();
        if (isDown) down += d.length;
        else up += d.length;
        const full = !to.write(d);
        const wait = isDown && shaped ? shaper.take(site, ctx.clientIp, d.length) : 0;
        if (!full && wait === 0) return;
        let waiting = (full ? 1 : 0) + (wait > 0 ? 1 : 0);
        const release = (): void => {
          if (--waiting === 0 && !closed) from.resume();
        };
        from.pause();
        if (full) to.once('drain', release);
        if (wait > 0) setTimeout(release, wait);
      });
      // WebSocket has no half-close: once one side ends, the other gets what it was sent
      // (bounded by CLOSE_FLUSH_MS) and the tunnel ends.
      let ended = false;
      const over = (): void => {
        if (closed || ended) return;
        ended = true;
        to.end();
        if (to.destroyed || to.writableFinished) closeTunnel('closed');
        else {
          to.once('finish', () => closeTunnel('closed'));
          flushTimer ??= setTimeout(() => closeTunnel('closed'), CLOSE_FLUSH_MS);
        }
      };
      from.on('end', over);
      from.once('close', over);
      from.on('error', () => undefined);
    };
    relay(client, upstream, false);
    relay(upstream, client, true);
    if (head.length > 0) {
      up += head.length;
      upstream.write(head);
    }
    if (upstreamHead.length > 0) {
      down += upstreamHead.length;
      client.write(upstreamHead);
    }

    // Both re-arm for what is left: a limit past a timer's 24.8 days is honoured, not cut to 1 ms.
    if (ws.idle_timeout_secs > 0) {
      const idleMs = ws.idle_timeout_secs * 1000;
      const check = (): void => {
        const quiet = performance.now() - last;
        if (quiet >= idleMs) closeTunnel('idle');
        else idleTimer = setTimeout(check, timerDelay(idleMs - quiet));
      };
      idleTimer = setTimeout(check, timerDelay(idleMs));
    }
    if (ws.max_lifetime_secs > 0) {
      const endsAt = performance.now() + ws.max_lifetime_secs * 1000;
      const lifeCheck = (): void => {
        const left = endsAt - performance.now();
        if (left <= 0) closeTunnel('lifetime');
        else lifeTimer = setTimeout(lifeCheck, timerDelay(left));
      };
      lifeTimer = setTimeout(lifeCheck, timerDelay(endsAt - performance.now()));
    }
  }

  return tunnel;
}

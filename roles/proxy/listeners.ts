/**
 * The data-plane listeners: `listen_http` (cleartext, Host-routed) and `listen_https` (TLS with
 * per-site certificates chosen by SNI; no default certificate, so a handshake without a known
 * name fails). Addresses are bound once at start; a reload only changes what they serve.
 */
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type Server as NetServer } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import type { Logger } from 'pino';
import { parseListen } from '../../src/core/config-checks.ts';
import type { DataPlane } from './data-plane.ts';
import { createHttp1Server, type Http1Server } from './http1-server.ts';

export interface Listeners {
  /** Every bound address as `scheme://ip:port`, for logs and tests. */
  readonly addresses: readonly string[];
  /**
   * The parser's cap on the request line plus headers for new requests; the sites' own
   * (smaller) caps are checked per request. Runs after each generation swap.
   */
  setMaxHeaderSize(bytes: number): void;
  /**
   * Graceful stop: no new connections, idle keep-alive connections closed, in-flight requests
   * given up to `graceMs` to finish, then every connection closed.
   */
  close(graceMs: number): Promise<void>;
}

function listen(server: NetServer, address: string, reusePort: boolean): Promise<string> {
  const parsed = parseListen(address);
  if (!parsed) return Promise.reject(new Error(`bad listen address ${address}`));
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => reject(new Error(`cannot listen on ${address}: ${err.message}`));
    server.once('error', onError);
    server.listen({ host: parsed.host, port: parsed.port, exclusive: true, reusePort }, () => {
      server.off('error', onError);
      const a = server.address();
      resolve(a !== null && typeof a === 'object' ? `${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}` : address);
    });
  });
}

/**
 * Node's 'checkContinue': node would answer `Expect: 100-continue` at once, inviting a body the
 * proxy may then refuse (413 for its length, 421, a ban, an ACL) and throw away. The client is
 * asked for the body when something reads it (the WAF's body phase, forwarding), after every
 * check, as nginx sends 100 Continue when it starts reading the body. A refusal goes out without
 * it, and node closes such a connection (the client may be sending the body regardless).
 */
function continueWhenRead(server: Server): (req: IncomingMessage, res: ServerResponse) => void {
  return function onCheckContinue(req, res) {
    const read = req._read.bind(req);
    req._read = (size) => {
      req._read = read;
      // Reads after the answer (an unread body dropped) ask for nothing.
      if (!res.headersSent) res.writeContinue();
      read(size);
    };
    // What node does after its 100 Continue: every 'request' listener serves it.
    server.emit('request', req, res);
  };
}

/** One bound address: the socket server, the own HTTP/1.1 server, and node's for the rest. */
interface Listener {
  socketServer: NetServer;
  fast: Http1Server;
  fallback: Server;
}

/** Binds every listener; runs once at start and rejects when an address cannot be bound. */
export async function startListeners(opts: {
  http: readonly string[];
  https: readonly string[];
  plane: DataPlane;
  maxHeaderSize: number;
  /** SO_REUSEPORT: every worker binds the same addresses and the kernel spreads connections. */
  reusePort?: boolean;
  logger: Logger;
}): Promise<Listeners> {
  const reusePort = opts.reusePort ?? false;
  const { plane, logger } = opts;
  const listeners: Listener[] = [];
  const addresses: string[] = [];

  function listener(scheme: 'http' | 'https'): Omit<Listener, 'socketServer'> {
    // Node's server, not listening: it gets the connections the own server hands over. A missing
    // Host is the data plane's 400 (`request.host`, with an event), not a bare one of node's.
    const fallback = createHttpServer({ maxHeaderSize: opts.maxHeaderSize, shouldUpgradeCallback: plane.isTunnel, requireHostHeader: false }, plane.handler(scheme));
    // Node's server aborts the requests of a client that half-closes (`nc -N`, HTTP/1.0 tools)
    // unless told otherwise; the own server answers them, and so must this one.
    (fallback as Server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
    fallback.on('checkContinue', continueWhenRead(fallback));
    fallback.on('upgrade', plane.upgradeHandler(scheme));
    fallback.on('connect', plane.connectHandler(scheme));
    const fast = createHttp1Server({ onRequest: plane.handler(scheme), fallback, maxHeaderSize: opts.maxHeaderSize });
    return { fast, fallback };
  }

  try {
    for (const address of opts.http) {
      const l = listener('http');
      // Half-open like node's own server: a client that stops sending still gets its answers.
      // Paused: the own server reads the connection its own way (Http1Server.accept).
      const socketServer = createNetServer({ allowHalfOpen: true, pauseOnConnect: true }, (socket) => l.fast.accept(socket));
      listeners.push({ ...l, socketServer });
      addresses.push(`http://${await listen(socketServer, address, reusePort)}`);
    }
    for (const address of opts.https) {
      const l = listener('https');
      const socketServer = createTlsServer(
        { SNICallback: (name, cb) => plane.sniCallback(name, cb), ALPNProtocols: ['http/1.1'], minVersion: 'TLSv1.2', allowHalfOpen: true },
        (socket) => l.fast.accept(socket),
      );
      // A refused SNI name or a non-TLS client: nothing to answer, the handshake is already over.
      socketServer.on('tlsClientError', (err) => logger.debug({ err: err.message }, 'TLS handshake failed'));
      listeners.push({ ...l, socketServer });
      addresses.push(`https://${await listen(socketServer, address, reusePort)}`);
    }
  } catch (err) {
    for (const l of listeners) l.socketServer.close();
    throw err;
  }

  return {
    addresses,
    setMaxHeaderSize(bytes) {
      for (const l of listeners) {
        l.fast.setMaxHeaderSize(bytes);
        // Read by node for each new connection's parser.
        (l.fallback as Server & { maxHeaderSize: number }).maxHeaderSize = bytes;
      }
    },
    async close(graceMs) {
      plane.drain();
      for (const l of listeners) l.fast.drain();
      const closed = Promise.all(listeners.map((l) => new Promise<void>((resolve) => l.socketServer.close(() => resolve()))));
      for (const l of listeners) {
        l.fast.closeIdle();
        l.fallback.closeIdleConnections();
      }
      const deadline = Date.now() + graceMs;
      while (plane.inFlight() > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
      if (plane.inFlight() > 0) logger.warn({ in_flight: plane.inFlight() }, 'shutdown grace period over: closing the remaining connections');
      plane.closeTunnels();
      for (const l of listeners) {
        l.fast.closeAll();
        l.fallback.closeAllConnections();
      }
      await closed;
    },
  };
}

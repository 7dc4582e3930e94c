/**
 * The data-plane listeners: `listen_http` (cleartext, Host-routed) and `listen_https` (TLS with
 * per-site certificates chosen by SNI; no default certificate, so a handshake without a known
 * name fails). Addresses are bound once at start; a reload only changes what they serve.
 */
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { Logger } from 'pino';
import { parseListen } from '../../src/core/config-checks.ts';
import type { DataPlane } from './data-plane.ts';

export interface Listeners {
  /** Every bound address as `scheme://ip:port`, for logs and tests. */
  readonly addresses: readonly string[];
  /**
   * The parser's cap on the request line plus headers for new connections; the sites' own
   * (smaller) caps are checked per request. Runs after each generation swap.
   */
  setMaxHeaderSize(bytes: number): void;
  /**
   * Graceful stop: no new connections, idle keep-alive connections closed, in-flight requests
   * given up to `graceMs` to finish, then every connection closed.
   */
  close(graceMs: number): Promise<void>;
}

function listen(server: Server, address: string, reusePort: boolean): Promise<string> {
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
  const servers: Server[] = [];
  const addresses: string[] = [];
  try {
    for (const address of opts.http) {
      const server = createHttpServer({ maxHeaderSize: opts.maxHeaderSize, shouldUpgradeCallback: plane.isTunnel }, plane.handler('http'));
      server.on('upgrade', plane.upgradeHandler('http'));
      servers.push(server);
      addresses.push(`http://${await listen(server, address, reusePort)}`);
    }
    for (const address of opts.https) {
      const server = createHttpsServer(
        { maxHeaderSize: opts.maxHeaderSize, shouldUpgradeCallback: plane.isTunnel, SNICallback: (name, cb) => plane.sniCallback(name, cb), ALPNProtocols: ['http/1.1'], minVersion: 'TLSv1.2' },
        plane.handler('https'),
      );
      server.on('upgrade', plane.upgradeHandler('https'));
      // A refused SNI name or a non-TLS client: nothing to answer, the handshake is already over.
      server.on('tlsClientError', (err) => logger.debug({ err: err.message }, 'TLS handshake failed'));
      servers.push(server);
      addresses.push(`https://${await listen(server, address, reusePort)}`);
    }
  } catch (err) {
    for (const s of servers) s.close();
    throw err;
  }

  return {
    addresses,
    setMaxHeaderSize(bytes) {
      // Read by node for each new connection's parser.
      for (const s of servers) (s as Server & { maxHeaderSize: number }).maxHeaderSize = bytes;
    },
    async close(graceMs) {
      plane.drain();
      const closed = Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
      for (const s of servers) s.closeIdleConnections();
      const deadline = Date.now() + graceMs;
      while (plane.inFlight() > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
      if (plane.inFlight() > 0) logger.warn({ in_flight: plane.inFlight() }, 'shutdown grace period over: closing the remaining connections');
      plane.closeTunnels();
      for (const s of servers) s.closeAllConnections();
      await closed;
    },
  };
}

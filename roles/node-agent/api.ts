/**
 * The node agent API (spec/1 §4.1, §7) under /api/v1: `GET /health` public, everything else
 * behind the bearer pairing token; the envelope with `meta.code: ""` on every success.
 *
 * Served by node:http with a route table, not Fastify: six routes do not need a framework, and
 * without Fastify and its dependencies the idle agent's RSS is about 3 MiB smaller
 * (docs/decisions.md "The executable's memory"). The answers are the ones the other roles'
 * Fastify servers give: malformed JSON 400, a body over 1 MiB 413 (on every route), another
 * media type 415, unknown routes 404, a known path with another method 405 with `Allow` (after
 * the token check on authenticated paths). What node's HTTP parser refuses itself (a header
 * section over 16 KiB, a malformed request) is answered with the envelope too.
 */
import { createServer, STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { AppError } from '../../src/core/app-error.ts';
import { SERVICE_VERSION } from '../../src/core/version.ts';
import { createBearerCheck, failureEnvelope, isMappedError, successEnvelope } from '../../src/lib/api-envelope.ts';
import { MIB } from '../../src/lib/units.ts';
import type { LimitsPayload } from '../../src/contracts/types.ts';
import type { Agent } from './agent.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const BODY_LIMIT = MIB;

export interface NodeApi {
  listen(at: { host: string; port: number } | { path: string }): Promise<void>;
  /** Where it listens once listen resolved (the port chosen for port 0); null before. */
  address(): AddressInfo | string | null;
  /** Stops accepting, answers 503 to requests still arriving, and resolves when the server is closed. */
  close(): Promise<void>;
}

interface RouteRequest {
  /** The decoded path parameters, in order. */
  params: string[];
  query: URLSearchParams;
  body: unknown;
}

interface Route {
  method: 'GET' | 'PUT' | 'POST';
  path: RegExp;
  auth: boolean;
  /** Takes a JSON body (the others ignore what is sent, within the same cap). */
  body?: boolean;
  handle(req: RouteRequest): unknown;
}

/** An answer with its status: a success envelope or a failure one, and any extra headers. */
class Answer {
  readonly status: number;
  readonly body: unknown;
  readonly headers: Readonly<Record<string, string>>;

  constructor(status: number, body: unknown, headers: Readonly<Record<string, string>> = {}) {
    this.status = status;
    this.body = body;
    this.headers = headers;
  }
}

/** The answers for errors node's HTTP parser raises before a request exists (its own codes). */
const PARSER_ERRORS: Readonly<Record<string, { status: number; message: string }>> = {
  HPE_HEADER_OVERFLOW: { status: 431, message: 'request header fields too large' },
  HPE_CHUNK_EXTENSIONS_OVERFLOW: { status: 413, message: 'request chunk extensions too large' },
  ERR_HTTP_REQUEST_TIMEOUT: { status: 408, message: 'request timed out' },
};

const badRequest = (message: string): AppError => new AppError('ERR_BAD_REQUEST', message, { status: 400 });
const SMART_PAGE = 200;
const SMART_PAGE_MAX = 500;

/** A whole-number query parameter within [min, max]; `fallback` when absent; 400 otherwise. */
function intParam(query: URLSearchParams, name: string, fallback: number, min: number, max: number): number {
  const raw = query.get(name);
  if (raw === null) return fallback;
  const n = /^[0-9]{1,16}$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) throw badRequest(`${name} must be a whole number from ${min} to ${max}`);
  return n;
}

/**
 * Builds the API server around a running agent; the caller listens and closes it. Without
 * `token` it is the local admin socket's API (root-only by the socket's mode): no bearer check,
 * plus `GET /api/v1/status` for `bandwidth-node status`.
 */
export function createNodeApi(agent: Agent, opts: { token?: () => string; logger?: Logger }): NodeApi {
  const bearerMatches = opts.token ? createBearerCheck(opts.token) : () => true;

  const knownUuid = (raw: string): string => {
    const uuid = raw.toLowerCase();
    if (!UUID.test(uuid) || !agent.knows(uuid)) throw new AppError('ERR_NOT_FOUND', `unknown server ${raw}`, { status: 404 });
    return uuid;
  };

  const routes: Route[] = [
    { method: 'GET', path: /^\/api\/v1\/health$/, auth: false, handle: () => agent.health() },
    { method: 'GET', path: /^\/api\/v1\/stats$/, auth: true, handle: () => ({ servers: agent.stats() }) },
    ...(opts.token ? [] : [{ method: 'GET' as const, path: /^\/api\/v1\/status$/, auth: true, handle: () => agent.status() }]),
    {
      method: 'GET',
      path: /^\/api\/v1\/servers\/([^/]+)\/history$/,
      auth: true,
      handle: ({ params, query }) => {
        const uuid = knownUuid(params[0] ?? '');
        const period = query.get('period') ?? 'day';
        const bucket = query.get('bucket') ?? 'hour';
        if (period !== 'day' && period !== 'week' && period !== 'month') throw badRequest('period must be day, week or month');
        if (bucket !== 'hour' && bucket !== 'day') throw badRequest('bucket must be hour or day');
        return { uuid, period, bucket, points: agent.history(uuid, period, bucket) };
      },
    },
    {
      method: 'GET',
      path: /^\/api\/v1\/smart\/events$/,
      auth: true,
      handle: ({ query }) => agent.smartEvents(intParam(query, 'after', 0, 0, Number.MAX_SAFE_INTEGER), intParam(query, 'limit', SMART_PAGE, 1, SMART_PAGE_MAX)),
    },
    {
      method: 'PUT',
      path: /^\/api\/v1\/limits$/,
      auth: true,
      body: true,
      handle: ({ body }) => {
        if (body === null || typeof body !== 'object' || Array.isArray(body)) throw badRequest('body must be a limits payload object');
        return agent.applyLimits(body as Partial<LimitsPayload>);
      },
    },
    {
      method: 'POST',
      path: /^\/api\/v1\/servers\/([^/]+)\/unthrottle$/,
      auth: true,
      handle: async ({ params }) => {
        const uuid = knownUuid(params[0] ?? '');
        try {
          return { unthrottled: await agent.unthrottle(uuid) };
        } catch (err) {
          if (err instanceof AppError) throw err;
          throw new AppError('ERR_INTERNAL', 'unthrottle failed on the node', { status: 500, cause: err });
        }
      },
    },
  ];

  const fail = (status: number, code: string, message: string, headers?: Record<string, string>): Answer =>
    new Answer(status, failureEnvelope(SERVICE_VERSION, code, message), headers);
  let closing = false;

  async function answer(req: IncomingMessage): Promise<Answer> {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const method = req.method === 'HEAD' ? 'GET' : req.method;
    if (closing) return fail(503, 'ERR_INTERNAL', 'the node agent is shutting down');
    let route: Route | undefined;
    let match: RegExpExecArray | null = null;
    for (const r of routes) {
      match = r.method === method ? r.path.exec(path) : null;
      if (match) {
        route = r;
        break;
      }
    }
    if (!route || !match) {
      // A known path with another method: 405 (spec/1 §7 lists no code for it; ERR_BAD_REQUEST,
      // see docs/node-agent.md), but only to a caller that may use the path.
      const same = routes.filter((r) => r.path.test(path));
      if (same.length === 0) return fail(404, 'ERR_NOT_FOUND', `no route ${req.method ?? ''} ${path}`);
      if (same.some((r) => r.auth) && !bearerMatches(req.headers.authorization)) return fail(401, 'ERR_UNAUTHORIZED', 'missing or invalid bearer token');
      const allow = [...new Set(same.flatMap((r) => (r.method === 'GET' ? ['GET', 'HEAD'] : [r.method])))].join(', ');
      return fail(405, 'ERR_BAD_REQUEST', `method ${req.method ?? ''} is not allowed on ${path}; allowed: ${allow}`, { allow });
    }
    if (route.auth && !bearerMatches(req.headers.authorization)) return fail(401, 'ERR_UNAUTHORIZED', 'missing or invalid bearer token');
    let params: string[];
    try {
      params = match.slice(1).map((p) => decodeURIComponent(p));
    } catch {
      return fail(400, 'ERR_BAD_REQUEST', 'malformed request');
    }
    // Every route takes the body cap (spec/1 §4.1); only a body route reads what was sent.
    const raw = await readBody(req);
    if (raw instanceof Answer) return raw;
    const body = route.body ? parseJson(req, raw) : undefined;
    if (body instanceof Answer) return body;
    return new Answer(200, successEnvelope(SERVICE_VERSION, true, await route.handle({ params, query: new URLSearchParams(q < 0 ? '' : url.slice(q + 1)), body })));
  }

  /** The request's body bytes, or the 413 answer past the cap (the rest is left unread). */
  async function readBody(req: IncomingMessage): Promise<Buffer | Answer> {
    const tooLarge = (): Answer => fail(413, 'ERR_BAD_REQUEST', `request body is larger than ${BODY_LIMIT} bytes`);
    if (Number(req.headers['content-length'] ?? 0) > BODY_LIMIT) return tooLarge();
    const chunks: Buffer[] = [];
    let size = 0;
    const complete = await new Promise<boolean>((resolve, reject) => {
      const onData = (chunk: Buffer): void => {
        size += chunk.length;
        chunks.push(chunk);
        if (size <= BODY_LIMIT) return;
        // The rest stays unread; the answer closes the connection (send).
        req.off('data', onData);
        req.pause();
        resolve(false);
      };
      req.on('data', onData);
      req.once('end', () => resolve(true));
      req.once('error', reject);
    });
    return complete ? Buffer.concat(chunks) : tooLarge();
  }

  /** A body route's JSON (undefined without a body), or the failure answer. */
  function parseJson(req: IncomingMessage, raw: Buffer): unknown {
    const type = req.headers['content-type'];
    if (raw.length === 0 && type === undefined) return undefined;
    if (!/^application\/json\s*(?:;|$)/i.test(type ?? '')) return fail(415, 'ERR_BAD_REQUEST', 'request body must be application/json');
    try {
      return JSON.parse(raw.toString('utf8')) as unknown;
    } catch {
      return fail(400, 'ERR_BAD_REQUEST', 'malformed JSON body');
    }
  }

  function send(req: IncomingMessage, res: ServerResponse, a: Answer): void {
    const text = JSON.stringify(a.body);
    res.statusCode = a.status;
    res.setHeader('content-type', 'application/json; charset=utf-8');
    res.setHeader('content-length', Buffer.byteLength(text));
    for (const [name, value] of Object.entries(a.headers)) res.setHeader(name, value);
    // A body left unread (refused for its size) ends the connection.
    if (!req.complete) res.setHeader('connection', 'close');
    res.end(req.method === 'HEAD' ? undefined : text);
  }

  const server = createServer((req, res) => {
    answer(req).then(
      (a) => send(req, res, a),
      (err: unknown) => {
        if (isMappedError(err)) return send(req, res, fail(err.status, err.code, err.message));
        opts.logger?.error({ err, url: req.url, method: req.method }, 'request failed');
        send(req, res, fail(500, 'ERR_INTERNAL', 'internal error'));
      },
    );
  });

  // Without this, node answers its parser's errors with an empty body; the envelope is on every
  // response (spec/1 §2.1). As in node's own handler, nothing is written to a socket that is gone
  // or whose in-flight response has already sent its head: that would corrupt the stream.
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    socket.on('error', () => undefined); // node removed its own listener; a late EPIPE must not crash the agent
    const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
    if (err.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    const { status, message } = PARSER_ERRORS[err.code ?? ''] ?? { status: 400, message: 'malformed HTTP request' };
    const text = JSON.stringify(failureEnvelope(SERVICE_VERSION, 'ERR_BAD_REQUEST', message));
    const head = [
      `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}`,
      'Content-Type: application/json; charset=utf-8',
      `Content-Length: ${Buffer.byteLength(text)}`,
      'Connection: close',
    ];
    socket.end(`${head.join('\r\n')}\r\n\r\n${text}`, () => socket.destroy());
  });

  return {
    listen: (at) =>
      new Promise((resolve, reject) => {
        server.once('error', reject);
        const ready = (): void => {
          server.off('error', reject);
          resolve();
        };
        if ('path' in at) server.listen(at.path, ready);
        else server.listen(at.port, at.host, ready);
      }),
    address: () => server.address(),
    close: () =>
      new Promise((resolve) => {
        closing = true;
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}

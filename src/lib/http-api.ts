/**
 * The JSON API server helper shared by the node agent and the panel's node-facing API: Fastify
 * with a 1 MiB body cap, the response envelope of spec/1 §2.1 on every answer (errors included),
 * malformed JSON -> 400, unknown routes -> 404, and one place that maps errors to HTTP.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import type { Logger } from 'pino';
import { MIB } from './units.ts';

export interface Envelope<T> {
  success: boolean;
  data: T | null;
  error: string | null;
  meta: { version: string; code?: string };
}

export interface ApiServerOptions {
  /** The service version for every envelope's meta.version. */
  version: string;
  logger?: Logger;
  /** Request body cap in bytes; spec/1 §4: 1 MiB. */
  bodyLimit?: number;
  /** The node API sends `meta.code: ""` on success; the panel's node-facing API omits it. */
  codeOnSuccess: boolean;
}

export interface ApiServer {
  app: FastifyInstance;
  /** The success envelope around `data`. */
  ok<T>(data: T): Envelope<T>;
  /** Sends a failure envelope with the given status and `ERR_*` code. */
  fail(reply: FastifyReply, status: number, code: string, message: string): FastifyReply;
}

/** A failure envelope; `data` is always null. */
export function failureEnvelope(version: string, code: string, message: string): Envelope<null> {
  return { success: false, data: null, error: message, meta: { version, code } };
}

/** An error that carries its own HTTP mapping (core's AppError is one). */
interface MappedError {
  code: string;
  status: number;
  message: string;
}

function isMapped(err: unknown): err is MappedError {
  const e = err as Partial<MappedError> | null;
  return typeof e?.code === 'string' && e.code.startsWith('ERR_') && typeof e.status === 'number';
}

/**
 * Creates the server (not listening yet). Routes return `api.ok(data)` or throw an error with an
 * `ERR_*` code and a status (an AppError), which become the envelope; anything else is a 500
 * ERR_INTERNAL logged with its cause.
 */
export function createApiServer(opts: ApiServerOptions): ApiServer {
  const app = Fastify({
    bodyLimit: opts.bodyLimit ?? MIB,
    // Fastify's own request logging stays off; the routes log what matters through opts.logger.
    logger: false,
    return503OnClosing: true,
  });
  return { app, ...installEnvelope(app, opts) };
}

/**
 * Puts the envelope on every answer of `scope` (a whole server, or one plugin of a larger app
 * such as the panel's node-facing API): its not-found and error handlers. Returns the helpers
 * routes use.
 */
export function installEnvelope(scope: FastifyInstance, opts: Omit<ApiServerOptions, 'bodyLimit'> & { bodyLimit?: number }): Omit<ApiServer, 'app'> {
  const ok = <T>(data: T): Envelope<T> => ({
    success: true,
    data,
    error: null,
    meta: opts.codeOnSuccess ? { version: opts.version, code: '' } : { version: opts.version },
  });
  const fail = (reply: FastifyReply, status: number, code: string, message: string): FastifyReply =>
    reply.code(status).type('application/json').send(failureEnvelope(opts.version, code, message));

  scope.setNotFoundHandler((req, reply) => fail(reply, 404, 'ERR_NOT_FOUND', `no route ${req.method} ${req.url.split('?')[0]}`));
  scope.setErrorHandler((err: Error & { code?: string; statusCode?: number }, req, reply) => {
    if (isMapped(err)) return fail(reply, err.status, err.code, err.message);
    switch (err.code) {
      case 'FST_ERR_CTP_BODY_TOO_LARGE':
        return fail(reply, 413, 'ERR_BAD_REQUEST', `request body is larger than ${opts.bodyLimit ?? MIB} bytes`);
      case 'FST_ERR_CTP_INVALID_JSON_BODY':
      case 'FST_ERR_CTP_EMPTY_JSON_BODY':
        return fail(reply, 400, 'ERR_BAD_REQUEST', 'malformed JSON body');
      case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
        return fail(reply, 415, 'ERR_BAD_REQUEST', 'request body must be application/json');
    }
    if (err instanceof SyntaxError || err.statusCode === 400) return fail(reply, 400, 'ERR_BAD_REQUEST', 'malformed request');
    opts.logger?.error({ err, url: req.url, method: req.method }, 'request failed');
    return fail(reply, 500, 'ERR_INTERNAL', 'internal error');
  });
  return { ok, fail };
}

/** What a failed generated validator names first: `field.path: message` (spec/1 §7: the first failing field). */
export function firstFailure(errors: readonly { keyword: string; instancePath: string; params: Record<string, unknown>; message?: string }[] | null | undefined): string {
  const e = errors?.[0];
  if (!e) return 'body: invalid';
  const field = e.keyword === 'required' ? `${e.instancePath}/${String(e.params['missingProperty'])}` : e.instancePath;
  return `${field.replace(/^\//, '').replace(/\//g, '.') || 'body'}: ${e.message ?? 'invalid'}`;
}

/**
 * Bearer-token check in constant time that does not reveal the token's length: both sides are
 * reduced to an HMAC under a per-process key before timingSafeEqual. `expected` is read on every
 * call, so a rotated token applies to the next request. Returns false for a missing header.
 */
export function createBearerCheck(expected: () => string): (authorization: string | undefined) => boolean {
  const key = randomBytes(32);
  const digest = (s: string): Buffer => createHmac('sha256', key).update(s).digest();
  return function bearerMatches(authorization) {
    const m = /^Bearer[ ]+(\S+)\s*$/i.exec(authorization ?? '');
    const presented = m?.[1] ?? '';
    const wanted = expected();
    const same = timingSafeEqual(digest(presented), digest(wanted));
    return same && presented !== '' && wanted !== '';
  };
}

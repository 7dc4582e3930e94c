/**
 * The Fastify JSON API server of the panel's node-facing API, the container daemon and the proxy's
 * admin API: a 1 MiB body cap, the response envelope of spec/1 §2.1 on every answer (errors included),
 * malformed JSON -> 400, unknown routes -> 404, and one place that maps errors to HTTP.
 */
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import type { Logger } from 'pino';
import { failureEnvelope, isMappedError, successEnvelope, type Envelope } from './api-envelope.ts';
import { MIB } from './units.ts';

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
  acceptEmptyJson(app);
  closeAnsweredConnectionsWhenClosing(app);
  return { app, ...installEnvelope(app, opts) };
}

/**
 * Closing a server closes the connections idle at that moment; one whose answer finishes later
 * would stay kept alive (Fastify's 72 s) and hold the stop for the shutdown step's whole timeout,
 * its next requests getting 503s. Each such connection is closed once its answer is out.
 */
export function closeAnsweredConnectionsWhenClosing(app: FastifyInstance): void {
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onResponse', async () => {
    if (closing) app.server.closeIdleConnections();
  });
}

/**
 * An empty body labelled `application/json` is no body, not a malformed one: many clients label
 * every POST and DELETE so, and Laravel (Pterodactyl) reads it as nothing. Any other body goes
 * to Fastify's own JSON parser, with its guards against prototype poisoning.
 */
export function acceptEmptyJson(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    if ((body as string).trim() === '') done(null, undefined);
    else parse(req, body as string, done);
  });
}

/**
 * Puts the envelope on every answer of `scope` (a whole server, or one plugin of a larger app
 * such as the panel's node-facing API): its not-found and error handlers. Returns the helpers
 * routes use.
 */
export function installEnvelope(scope: FastifyInstance, opts: Omit<ApiServerOptions, 'bodyLimit'> & { bodyLimit?: number }): Omit<ApiServer, 'app'> {
  const ok = <T>(data: T): Envelope<T> => successEnvelope(opts.version, opts.codeOnSuccess, data);
  const fail = (reply: FastifyReply, status: number, code: string, message: string): FastifyReply =>
    reply.code(status).type('application/json').send(failureEnvelope(opts.version, code, message));

  scope.setNotFoundHandler((req, reply) => fail(reply, 404, 'ERR_NOT_FOUND', `no route ${req.method} ${req.url.split('?')[0]}`));
  scope.setErrorHandler((err: Error & { code?: string; statusCode?: number }, req, reply) => {
    if (isMappedError(err)) return fail(reply, err.status, err.code, err.message);
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

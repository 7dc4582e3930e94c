/**
 * The node agent API (spec/1 §4.1, §7) under /api/v1: `GET /health` public, everything else
 * behind the bearer pairing token; the envelope with `meta.code: ""` on every success.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../../src/core/app-error.ts';
import { SERVICE_VERSION } from '../../src/core/version.ts';
import { createApiServer, createBearerCheck, type ApiServer } from '../../src/lib/http-api.ts';
import type { Logger } from 'pino';
import type { LimitsPayload } from '../../src/contracts/types.ts';
import type { Agent } from './agent.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Builds the API server around a running agent; the caller listens and closes it. Without
 * `token` it is the local admin socket's API (root-only by the socket's mode): no bearer check,
 * plus `GET /api/v1/status` for `bandwidth-node status`.
 */
export function createNodeApi(agent: Agent, opts: { token?: () => string; logger?: Logger }): ApiServer {
  const api = createApiServer({ codeOnSuccess: true, version: SERVICE_VERSION, ...(opts.logger ? { logger: opts.logger } : {}) });
  const bearerMatches = opts.token ? createBearerCheck(opts.token) : () => true;
  const { app } = api;

  const authenticate = async (req: FastifyRequest, reply: FastifyReply): Promise<void> => {
    if (!bearerMatches(req.headers.authorization)) {
      await api.fail(reply, 401, 'ERR_UNAUTHORIZED', 'missing or invalid bearer token');
    }
  };

  const knownUuid = (raw: string): string => {
    const uuid = raw.toLowerCase();
    if (!UUID.test(uuid) || !agent.knows(uuid)) throw new AppError('ERR_NOT_FOUND', `unknown server ${raw}`, { status: 404 });
    return uuid;
  };

  app.register(
    async (v1) => {
      v1.get('/health', () => api.ok(agent.health()));
      v1.register(async (auth) => {
        auth.addHook('onRequest', authenticate);
        auth.get('/stats', () => api.ok({ servers: agent.stats() }));
        if (!opts.token) auth.get('/status', () => api.ok(agent.status()));
        auth.get<{ Params: { uuid: string }; Querystring: Record<string, string | undefined> }>('/servers/:uuid/history', (req) => {
          const uuid = knownUuid(req.params.uuid);
          const period = req.query['period'] ?? 'day';
          const bucket = req.query['bucket'] ?? 'hour';
          if (period !== 'day' && period !== 'week' && period !== 'month') {
            throw new AppError('ERR_BAD_REQUEST', 'period must be day, week or month', { status: 400 });
          }
          if (bucket !== 'hour' && bucket !== 'day') throw new AppError('ERR_BAD_REQUEST', 'bucket must be hour or day', { status: 400 });
          return api.ok({ uuid, period, bucket, points: agent.history(uuid, period, bucket) });
        });
        auth.put<{ Body: unknown }>('/limits', async (req) => {
          const body = req.body;
          if (body === null || typeof body !== 'object' || Array.isArray(body)) {
            throw new AppError('ERR_BAD_REQUEST', 'body must be a limits payload object', { status: 400 });
          }
          return api.ok(await agent.applyLimits(body as Partial<LimitsPayload>));
        });
        auth.post<{ Params: { uuid: string } }>('/servers/:uuid/unthrottle', async (req) => {
          const uuid = knownUuid(req.params.uuid);
          try {
            return api.ok({ unthrottled: await agent.unthrottle(uuid) });
          } catch (err) {
            if (err instanceof AppError) throw err;
            throw new AppError('ERR_INTERNAL', 'unthrottle failed on the node', { status: 500, cause: err });
          }
        });
      });
    },
    { prefix: '/api/v1' },
  );
  return api;
}

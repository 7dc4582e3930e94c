/**
 * Bearer authentication of the client and application APIs: a preHandler that resolves the key's
 * user onto the request, 401 for a missing or wrong key (and for a key of the other type).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../../../src/core/app-error.ts';
import type { PanelContext } from '../context.ts';
import { authenticateKey, type KeyType } from '../services/api-keys.ts';
import { validationError } from '../services/validation.ts';
import type { ApiKeyRow, UserRow } from '../store/records.ts';
import { DEFAULT_PER_PAGE, MAX_PAGE, MAX_PER_PAGE } from '../store/repository.ts';

declare module 'fastify' {
  interface FastifyRequest {
    apiUser?: UserRow;
    apiKey?: ApiKeyRow;
  }
}

/** Adds the key check to every route of `api`; runs before each request of that scope. */
export function requireApiKey(api: FastifyInstance, ctx: PanelContext, type: KeyType): void {
  api.decorateRequest('apiUser', undefined);
  api.decorateRequest('apiKey', undefined);
  api.addHook('preHandler', async (req) => {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    const found = m?.[1] === undefined ? undefined : await authenticateKey(ctx, type, m[1], req.ip);
    if (found === undefined) throw new AppError('ERR_UNAUTHORIZED', 'unauthenticated: a valid API key is required', { status: 401 });
    req.apiUser = found.user;
    req.apiKey = found.key;
  });
}

/** The authenticated user of an API request (set by requireApiKey). */
export function apiUser(req: FastifyRequest): UserRow {
  if (req.apiUser === undefined) throw new AppError('ERR_UNAUTHORIZED', 'unauthenticated', { status: 401 });
  return req.apiUser;
}

/** The actor of activity entries written by API requests. */
export function apiActor(req: FastifyRequest): { type: string; id: number } {
  return { type: 'user', id: apiUser(req).id };
}

/** An integer path parameter, 404 when it is not one (so `/users/abc` reads like a missing user). */
export function idParam(value: string | undefined, what: string): number {
  if (value === undefined || !/^[1-9]\d{0,15}$/.test(value)) throw new AppError('ERR_NOT_FOUND', `the requested ${what} was not found`, { status: 404 });
  return Number(value);
}

/**
 * Page and per_page query parameters (Pterodactyl names). A page past MAX_PAGE is a 422 naming
 * `page` (a bigger offset is not an SQLite integer); per_page is clamped by the store.
 */
export function pageQuery(query: unknown): { page: number; perPage: number; search: string } {
  const q = (query ?? {}) as Record<string, string | undefined>;
  const num = (v: string | undefined, d: number): number => (v !== undefined && /^\d+$/.test(v) ? Number(v) : d);
  const page = num(q.page, 1);
  if (page > MAX_PAGE) throw validationError([{ field: 'page', rule: 'max', detail: `the page field must not be greater than ${MAX_PAGE}` }]);
  return { page, perPage: Math.min(num(q.per_page, DEFAULT_PER_PAGE), MAX_PER_PAGE), search: q['filter[search]'] ?? q.search ?? '' };
}

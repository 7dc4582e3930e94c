/**
 * Bearer authentication of the client and application APIs: a preHandler that resolves the key's
 * user onto the request, 401 for a missing or wrong key (and for a key of the other type).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../../../src/core/app-error.ts';
import type { PanelContext } from '../context.ts';
import { authenticateKey, type KeyType } from '../services/api-keys.ts';
import { validationError, type FieldProblem } from '../services/validation.ts';
import type { ApiKeyRow, UserRow } from '../store/records.ts';
import { DEFAULT_PER_PAGE, MAX_PAGE, MAX_PER_PAGE, type Value } from '../store/repository.ts';

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
 * `page` (a bigger offset is not an SQLite integer); per_page is clamped by the store. The search
 * term (`filter[search]` or `search`) sent twice is a 422 naming it.
 */
export function pageQuery(query: unknown): { page: number; perPage: number; search: string } {
  const q = (query ?? {}) as Record<string, string | undefined>;
  const num = (v: string | undefined, d: number): number => (v !== undefined && /^\d+$/.test(v) ? Number(v) : d);
  const page = num(q.page, 1);
  if (page > MAX_PAGE) throw validationError([{ field: 'page', rule: 'max', detail: `the page field must not be greater than ${MAX_PAGE}` }]);
  const searchKey = q['filter[search]'] !== undefined ? 'filter[search]' : 'search';
  const search: unknown = q[searchKey] ?? '';
  if (typeof search !== 'string') throw validationError([{ field: searchKey, rule: 'single', detail: `the ${searchKey} field must be sent once` }]);
  return { page, perPage: Math.min(num(q.per_page, DEFAULT_PER_PAGE), MAX_PER_PAGE), search };
}

/**
 * What one list may be filtered and sorted by: each `filter[name]` maps to its column (or to the
 * column and a normalisation of the value, as the column is stored); `sorts` are the columns.
 */
export interface ListRules {
  filters?: Readonly<Record<string, string | { column: string; value: (v: string) => string }>>;
  sorts?: readonly string[];
}

/**
 * pageQuery plus a list's exact-match `filter[name]` parameters and `sort` (`-` for descending;
 * default `id`), as Pterodactyl names them. A filter or sort the list does not have, or one sent
 * twice, is a 422 naming it, never ignored: a billing module that looks a user up by
 * `filter[email]` must not be handed the whole list. Runs per list request.
 */
export function listQuery(query: unknown, rules: ListRules): ReturnType<typeof pageQuery> & { filter: Record<string, Value>; sort: string } {
  const q = (query ?? {}) as Record<string, unknown>;
  const problems: FieldProblem[] = [];
  const filter: Record<string, Value> = {};
  const names = Object.keys(rules.filters ?? {});
  for (const [key, value] of Object.entries(q)) {
    const name = /^filter\[(.*)\]$/s.exec(key)?.[1];
    if (name === undefined || name === 'search') continue;
    const rule = rules.filters?.[name];
    if (rule === undefined) problems.push({ field: key, rule: 'filter', detail: `the ${key} filter is not supported here (filters: ${[...names, 'search'].join(', ')})` });
    else if (typeof value !== 'string') problems.push({ field: key, rule: 'single', detail: `the ${key} filter must be sent once` });
    else if (typeof rule === 'string') filter[rule] = value;
    else filter[rule.column] = rule.value(value);
  }
  const sort = q.sort;
  const sorts = rules.sorts ?? [];
  if (typeof sort === 'string' && !sorts.includes(sort.replace(/^-/, ''))) {
    problems.push({ field: 'sort', rule: 'in', detail: sorts.length === 0 ? `this list cannot be sorted (sort=${sort})` : `cannot sort by ${sort}: the sort field must be one of ${sorts.join(', ')}, with - for descending` });
  } else if (sort !== undefined && typeof sort !== 'string') problems.push({ field: 'sort', rule: 'single', detail: 'the sort field must be sent once' });
  if (problems.length > 0) throw validationError(problems);
  return { ...pageQuery(q), filter, sort: typeof sort === 'string' ? sort : 'id' };
}

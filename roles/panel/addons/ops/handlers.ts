/**
 * What the admin session routes (spec/2 §4.3) and the application API (§4.4) share: query
 * parsing with the spec's limits (422 naming the parameter), request bodies that are JSON or an
 * HTML form, the actor of a request, and the JSON answers both surfaces give.
 */
import type { FastifyRequest } from 'fastify';
import { found } from '../../services/records.ts';
import { validationError } from '../../services/validation.ts';
import { formBody, inputOf, webSessionOf, type InputSpec } from '../../web/index.ts';
import type { BulkRunner } from './bulk.ts';
import { tagAttributes, type OpsService, type Who } from './service.ts';

/** Longest search query (spec/2 §8). */
export const MAX_QUERY = 100;

/** The signed-in admin or the application key's user, and the address, for the audit log. */
export function whoOf(req: FastifyRequest): Who {
  return { actorId: webSessionOf(req)?.user.id ?? req.apiUser?.id ?? null, ip: req.ip };
}

/**
 * Whether the request body is JSON (an API client or a page script) rather than an HTML form: how
 * the body is read. How the answer is given (envelope or redirect with a notice) follows Accept (`wantsHtml`).
 */
export function isJson(req: FastifyRequest): boolean {
  return (req.headers['content-type'] ?? '').includes('application/json');
}

/** A JSON body that is not an object (an array, a string, a number) is refused as a whole. */
export function jsonObject(body: unknown): Record<string, unknown> {
  if (body === undefined || body === null) return {};
  if (typeof body !== 'object' || Array.isArray(body)) throw validationError([{ field: '', rule: 'type', detail: 'the request body must be a JSON object' }]);
  return body as Record<string, unknown>;
}

/** The body as service input: a JSON object as sent (422 when it is not an object), a form converted by `spec`. */
export function bodyOf(req: FastifyRequest, spec: InputSpec): Record<string, unknown> {
  if (isJson(req)) return jsonObject(req.body);
  return inputOf(formBody(req.body), spec);
}

function query(req: FastifyRequest): Record<string, unknown> {
  return req.query as Record<string, unknown>;
}

/**
 * The raw value of query parameter `name`; `name[]=…` or `name[k]=…` (which the parser keeps
 * under its own key) reads as an array, so it is refused like a repeated parameter, not ignored.
 */
function rawQuery(req: FastifyRequest, name: string): unknown {
  const q = query(req);
  return Object.keys(q).some((k) => k.startsWith(`${name}[`)) ? [] : q[name];
}

/** An integer query parameter in [min, max]; `fallback` when absent; 422 naming it otherwise. */
export function intQuery(req: FastifyRequest, name: string, min: number, max: number, fallback: number): number;
export function intQuery(req: FastifyRequest, name: string, min: number, max: number): number | undefined;
export function intQuery(req: FastifyRequest, name: string, min: number, max: number, fallback?: number): number | undefined {
  const v = rawQuery(req, name);
  if (v === undefined || v === '') return fallback;
  const n = typeof v === 'string' && /^-?\d{1,15}$/.test(v) ? Number(v) : NaN;
  if (!(n >= min && n <= max)) throw validationError([{ field: name, rule: 'between', detail: `the ${name} field must be an integer between ${min} and ${max}` }]);
  return n;
}

/**
 * A query parameter sent once as `name=…` (undefined when absent); 422 naming it when it is
 * repeated or sent as `name[]=…` / `name[k]=…`, which a comma list or a search term is not.
 */
export function singleQuery(req: FastifyRequest, name: string): string | undefined {
  const v = rawQuery(req, name);
  if (v !== undefined && typeof v !== 'string') throw validationError([{ field: name, rule: 'type', detail: `the ${name} field must be a single string` }]);
  return v;
}

/** A text query parameter of at most `max` characters ('' when absent unless required). */
export function textQuery(req: FastifyRequest, name: string, max: number, required = false): string {
  const s = (singleQuery(req, name) ?? '').trim();
  if (required && s === '') throw validationError([{ field: name, rule: 'required', detail: `the ${name} field is required` }]);
  if (s.length > max) throw validationError([{ field: name, rule: 'max', detail: `the ${name} field must not be greater than ${max} characters` }]);
  return s;
}

/** A boolean query parameter (true/1/on/yes or false/0/off/no); `fallback` when absent. */
export function boolQuery(req: FastifyRequest, name: string, fallback: boolean): boolean {
  const v = rawQuery(req, name);
  if (v === undefined || v === '') return fallback;
  if (typeof v === 'string' && /^(1|true|on|yes)$/i.test(v)) return true;
  if (typeof v === 'string' && /^(0|false|off|no)$/i.test(v)) return false;
  throw validationError([{ field: name, rule: 'boolean', detail: `the ${name} field must be true or false` }]);
}

/** A numeric path parameter as a record id, 404 naming `what` otherwise. */
export function pathId(req: FastifyRequest, key: string, what: string): number {
  const v = (req.params as Record<string, string | undefined>)[key] ?? '';
  if (!/^[1-9]\d{0,15}$/.test(v)) found(undefined, what);
  return Number(v);
}

/**
 * A tag form sends every field, as the edit form shows them all: a blank slug asks for one made
 * from the name, a blank icon clears it, an unchecked box is false; a blank name or colour is left
 * out (so it is "required").
 */
export const TAG_FORM: InputSpec = { textOrOmit: ['name', 'color'], text: ['slug', 'icon'], bool: ['is_default'] };

/** The JSON answers both surfaces give for the same request. */
export function createHandlers(service: OpsService, bulk: BulkRunner) {
  return {
    async tagList(): Promise<Record<string, unknown>[]> {
      return (await service.store.tags()).map(tagAttributes);
    },
    async templateList(req: FastifyRequest): Promise<Record<string, unknown>[]> {
      const userId = whoOf(req).actorId;
      const favorites = new Set(userId === null ? [] : await service.store.favoriteIds(userId));
      return Promise.all((await service.store.templates()).map((t) => service.templateAttributes(t, favorites)));
    },
    async templateOne(req: FastifyRequest, id: number): Promise<Record<string, unknown>> {
      const userId = whoOf(req).actorId;
      const favorites = new Set(userId === null ? [] : await service.store.favoriteIds(userId));
      return service.templateAttributes(found(await service.store.template(id), 'template'), favorites);
    },
    async bulkDispatch(req: FastifyRequest): Promise<{ uuid: string; total: number; status: string }> {
      const job = await bulk.dispatch(req.body, whoOf(req));
      return { uuid: job.uuid, total: job.total, status: job.status };
    },
    async bulkShow(req: FastifyRequest): Promise<Record<string, unknown>> {
      // Job uuids are stored lower case; a client may send them in either case.
      const uuid = ((req.params as Record<string, string | undefined>).uuid ?? '').toLowerCase();
      return bulk.attributes(found(/^[0-9a-f-]{36}$/.test(uuid) ? await service.store.job(uuid) : undefined, 'bulk job'));
    },
    async search(req: FastifyRequest): Promise<Record<string, unknown>> {
      return service.search(textQuery(req, 'q', MAX_QUERY, true));
    },
    async nodeHealth(req: FastifyRequest): Promise<Record<string, unknown>> {
      return service.nodeHealth(pathId(req, 'node', 'node'));
    },
    async nodeRecommendations(req: FastifyRequest): Promise<unknown[]> {
      return service.recommendations(intQuery(req, 'memory_mb', 0, 1_000_000_000, 0));
    },
  };
}

export type Handlers = ReturnType<typeof createHandlers>;

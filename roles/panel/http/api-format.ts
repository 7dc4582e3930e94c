/**
 * The JSON shapes of the client and application APIs, in the style of Pterodactyl's: an item is
 * `{object, attributes}`, a list is `{object: 'list', data: [...], meta: {pagination}}`, an error
 * is `{errors: [{code, status, detail, meta?}]}` with PascalCase codes (FileTooLargeForTrash,
 * ValidationException, NotFoundHttpException, ...).
 */
import { isAppError } from '../../../src/core/app-error.ts';
import { busyMessage, isDatabaseBusy } from '../../../src/lib/sqlite.ts';
import type { Page } from '../store/repository.ts';
import type { Related } from '../services/relations.ts';
import { problemsOf } from '../services/validation.ts';

export interface ApiItem {
  object: string;
  attributes: Record<string, unknown>;
}

export function item(object: string, attributes: Record<string, unknown>): ApiItem {
  return { object, attributes };
}

/** A paginated list; `items` are already converted to attributes. */
export function list<T>(object: string, page: Page<T>, attributes: (row: T) => Record<string, unknown>): Record<string, unknown> {
  return {
    object: 'list',
    data: page.items.map((r) => item(object, attributes(r))),
    meta: {
      pagination: {
        total: page.total,
        count: page.items.length,
        per_page: page.perPage,
        current_page: page.page,
        total_pages: Math.max(1, Math.ceil(page.total / page.perPage)),
      },
    },
  };
}

/** An unpaginated list (a server's subusers, a directory listing). */
export function plainList<T>(object: string, rows: readonly T[], attributes: (row: T) => Record<string, unknown>): Record<string, unknown> {
  return { object: 'list', data: rows.map((r) => item(object, attributes(r))) };
}

/**
 * One entry of `attributes.relationships` (an `?include=`) as Pterodactyl's Fractal serializer
 * writes it: related records as an unpaginated list, one as an item, a missing one as
 * `{object: 'null_resource', attributes: null}`.
 */
export function relationship(r: Related): ApiItem | Record<string, unknown> {
  if ('list' in r) return plainList(r.object, r.list, (a) => a);
  return r.one === undefined ? { object: 'null_resource', attributes: null } : item(r.object, r.one);
}

export interface ApiError {
  code: string;
  status: string;
  detail: string;
  meta?: Record<string, unknown>;
}

const CODE_BY_STATUS: Record<number, string> = {
  400: 'BadRequestHttpException',
  401: 'AuthenticationException',
  403: 'AccessDeniedHttpException',
  404: 'NotFoundHttpException',
  405: 'MethodNotAllowedHttpException',
  409: 'ConflictHttpException',
  413: 'PayloadTooLargeHttpException',
  415: 'UnsupportedMediaTypeHttpException',
  422: 'ValidationException',
  429: 'TooManyRequestsHttpException',
  500: 'InternalServerError',
  503: 'ServiceUnavailableHttpException',
};

/**
 * The `errors[]` of an error: one entry per field for a validation failure; an AppError whose code
 * is already PascalCase (an addon's FileTooLargeForTrash) keeps it, with `cause.meta` as meta; a
 * database another process kept locked past the busy timeout is a 503 the client can retry.
 */
export function apiErrors(err: unknown): { status: number; body: { errors: ApiError[] } } {
  if (isDatabaseBusy(err)) return { status: 503, body: { errors: [{ code: CODE_BY_STATUS[503] as string, status: '503', detail: busyMessage() }] } };
  if (!isAppError(err)) return { status: 500, body: { errors: [{ code: CODE_BY_STATUS[500] as string, status: '500', detail: 'an unexpected error was encountered while processing this request' }] } };
  const status = err.status;
  if (err.code === 'ERR_VALIDATION') {
    return {
      status,
      body: { errors: problemsOf(err).map((p) => ({ code: 'ValidationException', status: String(status), detail: p.detail, meta: { source_field: p.field, rule: p.rule } })) },
    };
  }
  const code = /^[A-Z][A-Za-z]+$/.test(err.code) ? err.code : (CODE_BY_STATUS[status] ?? CODE_BY_STATUS[500] as string);
  const meta = (err.cause as { meta?: Record<string, unknown> } | undefined)?.meta;
  return { status, body: { errors: [{ code, status: String(status), detail: err.message, ...(meta !== undefined ? { meta } : {}) }] } };
}

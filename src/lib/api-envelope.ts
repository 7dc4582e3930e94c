/**
 * The response envelope of spec/1 §2.1 and the pieces every role's JSON API shares, whatever
 * serves it (Fastify in the panel, the daemon and the proxy's admin API; node:http in the node
 * agent): success and failure envelopes, errors that carry their HTTP mapping, the first failing
 * field of a validation, and the bearer-token check.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export interface Envelope<T> {
  success: boolean;
  data: T | null;
  error: string | null;
  meta: { version: string; code?: string };
}

/** A success envelope around `data`; `meta.code` is "" when the API sends one on success. */
export function successEnvelope<T>(version: string, codeOnSuccess: boolean, data: T): Envelope<T> {
  return { success: true, data, error: null, meta: codeOnSuccess ? { version, code: '' } : { version } };
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

export function isMappedError(err: unknown): err is MappedError {
  const e = err as Partial<MappedError> | null;
  return typeof e?.code === 'string' && e.code.startsWith('ERR_') && typeof e.status === 'number';
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

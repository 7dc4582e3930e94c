/**
 * The request-limits phase (spec/3 §2.5 `protection.request_limits`): method allow-list, request
 * target and header-section caps, always-blocked path prefixes, and the declared body size. A body
 * without a Content-Length is capped while it streams (see body-limit.ts).
 */
import { posix } from 'node:path';
import type { RequestContext } from './request-context.ts';
import { ALLOW, deny, type Verdict } from './verdict.ts';

export interface RequestLimitsConfig {
  max_uri_bytes: number;
  max_header_bytes: number;
  max_body_bytes: number;
  allowed_methods: readonly string[];
  blocked_path_prefixes: readonly string[];
}

/** Rule ids and statuses of this phase; also written in docs/proxy-admin-api.md. */
export const REQUEST_RULES = {
  method: 'request.method',
  uriLen: 'request.uri_len',
  headerLen: 'request.header_len',
  pathBlocked: 'request.path_blocked',
  bodyLen: 'request.body_len',
} as const;

const URI_TOO_LONG = deny(414, REQUEST_RULES.uriLen);
const HEADERS_TOO_LARGE = deny(431, REQUEST_RULES.headerLen);
const PATH_BLOCKED = deny(403, REQUEST_RULES.pathBlocked);
export const BODY_TOO_LARGE = deny(413, REQUEST_RULES.bodyLen);

/** Bytes of the header section as received: `name: value\r\n` per field. */
export function headerSectionBytes(rawHeaders: readonly string[]): number {
  let n = 0;
  // Node decodes header bytes as latin1, so string length is the byte count.
  for (let i = 0; i < rawHeaders.length; i++) n += (rawHeaders[i] as string).length;
  return n + (rawHeaders.length / 2) * 4;
}

/** Percent-decodes once (the WAF's and the path rules' view); stray `%`s stay as they are. */
export function decodeOnce(path: string): string {
  if (!path.includes('%')) return path;
  try {
    return decodeURIComponent(path);
  } catch {
    // A stray `%` is not an escape; decode the valid ones and leave the rest.
    return path.replace(/%[0-9a-fA-F]{2}/g, (esc) => String.fromCharCode(parseInt(esc.slice(1), 16)));
  }
}

/**
 * The form a path is compared in: percent-decoded once, lower case, repeated slashes collapsed
 * and dot segments resolved, so `/%61dmin`, `//admin` and `/x/../admin` all read `/admin`.
 */
export function canonicalPath(path: string): string {
  const decoded = decodeOnce(path).toLowerCase().replace(/\\/g, '/');
  return posix.normalize(decoded.startsWith('/') ? decoded : `/${decoded}`);
}

/**
 * Compiles a site's request limits once per config generation; the returned check runs once per
 * request after routing (and, in part 2, after bans, ACLs, connection and rate limits).
 */
export function createRequestLimits(cfg: RequestLimitsConfig): (ctx: RequestContext) => Verdict {
  const methods = new Set(cfg.allowed_methods.map((m) => m.toUpperCase()));
  const methodDenied = deny(405, REQUEST_RULES.method, { allow: [...methods].join(', ') });
  const prefixes = cfg.blocked_path_prefixes.filter((p) => p !== '').map((p) => canonicalPath(p));
  const maxUri = cfg.max_uri_bytes;
  const maxHeader = cfg.max_header_bytes;
  const maxBody = cfg.max_body_bytes;

  return function checkRequestLimits(ctx) {
    const req = ctx.req;
    if (!methods.has(req.method ?? '')) return methodDenied;
    if ((req.url ?? '').length > maxUri) return URI_TOO_LONG;
    if (headerSectionBytes(req.rawHeaders) > maxHeader) return HEADERS_TOO_LARGE;
    if (prefixes.length > 0) {
      const path = canonicalPath(ctx.path);
      for (const prefix of prefixes) if (path.startsWith(prefix)) return PATH_BLOCKED;
    }
    const declared = req.headers['content-length'];
    if (declared !== undefined && Number(declared) > maxBody) return BODY_TOO_LARGE;
    return ALLOW;
  };
}

/**
 * `tls.redirect_http_to_https` (spec/3 §2.3): a cleartext request for a TLS site gets a 308 to the
 * same target over https. A non-default port in the request Host is kept; 80 and 443 are dropped.
 */
import { hostPort, normalizeHost } from './host-router.ts';
import type { RequestContext } from './request-context.ts';
import { ALLOW, type Verdict } from './verdict.ts';

export const REDIRECT_RULE = 'tls.redirect';

/** The https URL a cleartext request is sent to; `OPTIONS *`, which no URL can name, to the root. */
export function httpsLocation(hostHeader: string | undefined, target: string): string {
  const host = normalizeHost(hostHeader) ?? '';
  const port = hostPort(hostHeader);
  const keep = port !== undefined && port !== 80 && port !== 443;
  return `https://${host}${keep ? `:${port}` : ''}${target === '*' ? '/' : target}`;
}

/**
 * Compiles the redirect rule of one site; returns undefined when the site has nothing to redirect
 * to (TLS off) or the rule is off. The check runs once per request, right after the ban and ACL phase.
 */
export function createHttpsRedirect(tls: { enabled: boolean; redirect_http_to_https: boolean }): ((ctx: RequestContext) => Verdict) | undefined {
  if (!tls.enabled || !tls.redirect_http_to_https) return undefined;
  return function redirectToHttps(ctx) {
    if (ctx.scheme === 'https') return ALLOW;
    return { kind: 'redirect', status: 308, location: httpsLocation(ctx.hostHeader, ctx.target), rule: REDIRECT_RULE };
  };
}

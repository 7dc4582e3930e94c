/**
 * Client IP resolution (spec/3 §2.4): an untrusted peer is the client and its X-Forwarded-For is
 * ignored; behind trusted peers the chain is walked right to left past trusted hops, and the
 * first untrusted address is the client. A fully trusted chain gives its rightmost parseable
 * entry, then X-Real-Ip, then the peer.
 */
import { canonicalIp, plainIp, type IpMatcher } from '../../src/lib/ip-match.ts';

/** Resolves the client IP of one request from its peer address and inbound headers. */
export type ClientIpResolver = (peer: string, xForwardedFor: string | string[] | undefined, xRealIp: string | string[] | undefined) => string;

/**
 * One X-Forwarded-For entry as an address, or undefined when it is not one. Accepts what proxies
 * write in practice: `1.2.3.4`, `1.2.3.4:5678`, `2001:db8::1`, `[2001:db8::1]:443`, quoted forms.
 * The address comes out in canonicalIp() form, the form of peers and of the admin API's bans, so
 * a ban matches the client whatever spelling the upstream proxy used.
 */
export function parseForwardedEntry(raw: string): string | undefined {
  let s = raw.trim();
  if (s.startsWith('"') && s.endsWith('"') && s.length >= 2) s = s.slice(1, -1);
  if (s.startsWith('[')) {
    const end = s.indexOf(']');
    if (end === -1) return undefined;
    const rest = s.slice(end + 1);
    if (rest !== '' && !/^:[0-9]{1,5}$/.test(rest)) return undefined;
    s = s.slice(1, end);
  } else if (/^[0-9.]+:[0-9]{1,5}$/.test(s)) {
    s = s.slice(0, s.lastIndexOf(':'));
  }
  return canonicalIp(s);
}

/** Every entry of every X-Forwarded-For header in wire order (repeated headers join as one list). */
function chainOf(header: string | string[] | undefined): string[] {
  if (header === undefined) return [];
  return (Array.isArray(header) ? header.join(',') : header).split(',');
}

function firstValue(header: string | string[] | undefined): string | undefined {
  return Array.isArray(header) ? header[0] : header;
}

/**
 * Compiles a site's `client_ip.trusted_proxies` once per config generation. The returned
 * closure runs on every request before any check that needs the client IP. Unparseable chain
 * entries are skipped: they are neither a trusted hop nor a client.
 */
export function createClientIpResolver(trusted: IpMatcher): ClientIpResolver {
  return function resolveClientIp(rawPeer, xForwardedFor, xRealIp) {
    const peer = plainIp(rawPeer);
    if (!trusted(peer)) return peer;
    const chain = chainOf(xForwardedFor);
    let rightmost: string | undefined;
    for (let i = chain.length - 1; i >= 0; i--) {
      const ip = parseForwardedEntry(chain[i] as string);
      if (ip === undefined) continue;
      rightmost ??= ip;
      if (!trusted(ip)) return ip;
    }
    if (rightmost !== undefined) return rightmost;
    const real = firstValue(xRealIp);
    const realIp = real === undefined ? undefined : parseForwardedEntry(real);
    return realIp ?? peer;
  };
}

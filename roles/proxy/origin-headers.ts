/**
 * The request headers sent to the origin: the client's headers minus hop-by-hop ones, Host as
 * configured (`origin.host_header`, else the client's), and the client IP in the header the
 * site's `client_ip.forward_mode` names (spec/3 §2.4). The mode's own header is always written
 * by the proxy, so a client cannot pass a forged value through it: `x_forwarded_for` extends the
 * inbound chain only when the peer is a trusted proxy, and starts a new one otherwise.
 * `X-Forwarded-Proto` (not in the spec's table) follows the same trust: an inbound one passes
 * only from a trusted proxy, which knows the scheme its client used; `x_forwarded_for`, the mode
 * that speaks X-Forwarded-*, writes the listener's scheme when no trusted one came in.
 */
import { isIP } from 'node:net';
import { HOP_BY_HOP, connectionListed } from './hop-headers.ts';
import { plainIp, type IpMatcher } from '../../src/lib/ip-match.ts';
import type { Scheme } from './request-context.ts';

export type ForwardMode = 'none' | 'x_forwarded_for' | 'x_real_ip' | 'forwarded' | 'custom';

export interface OriginHeaderOptions {
  forwardMode: ForwardMode;
  customHeader: string | null;
  hostHeader: string | null;
  /** `client_ip.trusted_proxies` compiled: the peers whose inbound X-Forwarded-For is extended. */
  trusted: IpMatcher;
}

/**
 * Builds the flat `[name, value, ...]` header list for the origin from the client's raw headers.
 * `host` is the client's Host header as received (used when no host_header is configured);
 * `peer` is the TCP peer's address; `scheme` the listener's.
 */
export type OriginHeaderBuilder = (rawHeaders: readonly string[], host: string | undefined, clientIp: string, peer: string, scheme: Scheme) => string[];

// `expect` is answered by node (100-continue); the origin client writes the body's framing itself.
const ALWAYS_DROPPED: ReadonlySet<string> = new Set([...HOP_BY_HOP, 'host', 'expect', 'content-length']);
const CLIENT_IP_HEADERS = ['x-forwarded-for', 'x-real-ip', 'forwarded'] as const;
const PROTO = 'x-forwarded-proto';

// Header names as clients spell them, lower-cased once: the same few dozen recur (and the same
// strings, from the request parser's cache, so their lookup here is cheap).
const LOWER = new Map<string, string>();
const LOWER_MAX = 1024;

function lowerName(name: string): string {
  let lower = LOWER.get(name);
  if (lower === undefined) {
    lower = name.toLowerCase();
    if (LOWER.size < LOWER_MAX) LOWER.set(name, lower);
  }
  return lower;
}

/** `for=` value of RFC 7239: IPv6 addresses are bracketed and quoted. */
function forwardedFor(ip: string): string {
  return isIP(ip) === 6 ? `for="[${ip}]"` : `for=${ip}`;
}

/**
 * Compiles a site's header rules once per config generation; the returned closure runs once per
 * forwarded request.
 */
export function createOriginHeaders(opts: OriginHeaderOptions): OriginHeaderBuilder {
  const mode = opts.forwardMode;
  const custom = opts.customHeader?.toLowerCase() ?? '';
  // Inbound headers the mode replaces (in `none` mode all three client-IP headers go), and
  // X-Forwarded-Proto, which passes only from a trusted peer.
  const replaced = new Set<string>(mode === 'none' ? [...CLIENT_IP_HEADERS, PROTO] : [PROTO]);
  if (mode === 'x_forwarded_for') replaced.add('x-forwarded-for');
  if (mode === 'x_real_ip') replaced.add('x-real-ip');
  if (mode === 'forwarded') replaced.add('forwarded');
  if (mode === 'custom' && custom !== '') replaced.add(custom);
  const fixedHost = opts.hostHeader;
  const trusted = opts.trusted;

  return function buildOriginHeaders(raw, host, clientIp, peer, scheme) {
    const out: string[] = [];
    let listed: Set<string> | undefined;
    let chain: string | undefined;
    // Looked up only for a request that carries a header whose fate depends on it.
    let peerTrusted: boolean | undefined;
    let protoKept = false;
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i] as string;
      const lower = lowerName(name);
      if (lower === 'connection') listed = connectionListed(raw[i + 1]);
      if (ALWAYS_DROPPED.has(lower)) continue;
      if (replaced.has(lower)) {
        if (lower === 'x-forwarded-for' && mode === 'x_forwarded_for') {
          const v = (raw[i + 1] as string).trim();
          if (v !== '') chain = chain === undefined ? v : `${chain}, ${v}`;
        } else if (lower === PROTO && mode !== 'none' && (peerTrusted ??= trusted(plainIp(peer)))) {
          out.push(name, raw[i + 1] as string);
          protoKept = true;
        }
        continue;
      }
      out.push(name, raw[i + 1] as string);
    }
    if (listed) {
      for (let i = out.length - 2; i >= 0; i -= 2) if (listed.has((out[i] as string).toLowerCase())) out.splice(i, 2);
    }
    const hostValue = fixedHost ?? host;
    if (hostValue !== undefined) out.push('host', hostValue);
    switch (mode) {
      case 'x_forwarded_for':
        // An untrusted peer's chain is whatever its client wrote: the origin gets the client alone.
        if (chain !== undefined && !(peerTrusted ??= trusted(plainIp(peer)))) chain = undefined;
        out.push('x-forwarded-for', chain === undefined ? clientIp : `${chain}, ${clientIp}`);
        if (!protoKept) out.push(PROTO, scheme);
        break;
      case 'x_real_ip':
        out.push('x-real-ip', clientIp);
        break;
      case 'forwarded':
        out.push('forwarded', forwardedFor(clientIp));
        break;
      case 'custom':
        if (custom !== '') out.push(custom, clientIp);
        break;
      case 'none':
        break;
    }
    return out;
  };
}

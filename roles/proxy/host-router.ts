/**
 * Hostname routing of spec/3 §2.7: exact names first, then the longest `*.suffix`; case-insensitive;
 * a port and a trailing dot are stripped; IPv6 literals and malformed names are never routed. Two
 * enabled sites claiming one name: the first file in sorted order keeps it. Disabled sites claim
 * nothing, but a name only they list still finds them, so the caller can answer 503 instead of 421.
 * Configured names are checked by hostnameProblem when their file loads, so every name here can match.
 */
import { domainToASCII } from 'node:url';

/** What a router needs to know about a site. */
export interface RoutableSite {
  id: string;
  file: string;
  enabled: boolean;
  hostnames: readonly string[];
}

/** A name one site lost to another, for the log. */
export interface RouteConflict {
  hostname: string;
  winner: RoutableSite;
  loser: RoutableSite;
}

/** Looks up the site for a Host header or SNI name; undefined when nothing matches. */
export type HostRouter<S extends RoutableSite> = (host: string | undefined) => S | undefined;

// What a configured name can hold (hostnameProblem), and the digits of a port (RFC 9110 §7.2).
const HOST_NAME = /^[a-z0-9_.-]+$/;
const PORT = /^[0-9]*$/;

/**
 * Normalizes a Host header or SNI name for lookup: lower case, port and trailing dot stripped.
 * Returns undefined for an IPv6 literal (bracketed or bare), an empty name, or anything that is no
 * `name[:port]`: those are not routed. A wildcard site must not take `evil.example/x.shop.example`
 * for one of its names: the origin would get that Host and the HTTPS redirect would point at it.
 */
export function normalizeHost(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  let host = raw.trim().toLowerCase();
  const colon = host.indexOf(':');
  if (colon !== -1) {
    // A bare IPv6 address fails here too: its second colon is no port digit.
    if (!PORT.test(host.slice(colon + 1))) return undefined;
    host = host.slice(0, colon);
  }
  if (host.endsWith('.')) host = host.slice(0, -1);
  return HOST_NAME.test(host) ? host : undefined;
}

/** The port written in a Host header, or undefined when there is none. */
export function hostPort(raw: string | undefined): number | undefined {
  const m = raw === undefined ? null : /:([0-9]{1,5})$/.exec(raw.trim());
  return m ? Number(m[1]) : undefined;
}

interface Table<S> {
  exact: Map<string, S>;
  // Keyed by the suffix with its leading dot (`.example.com` for `*.example.com`).
  wildcard: Map<string, S>;
}

function claim<S extends RoutableSite>(table: Table<S>, site: S, conflicts: RouteConflict[]): void {
  for (const written of site.hostnames) {
    const name = normalizeName(written);
    const map = name.startsWith('*.') ? table.wildcard : table.exact;
    const key = name.startsWith('*.') ? name.slice(1) : name;
    const owner = map.get(key);
    if (owner === undefined) map.set(key, site);
    else if (owner !== site) conflicts.push({ hostname: name, winner: owner, loser: site });
  }
}

const NON_ASCII = /[^\x00-\x7f]/;
// Underscores are no DNS hostname characters but do occur in internal names (and nginx routes them).
const LABEL = /^[a-z0-9_-]+$/;

/**
 * A configured hostname in lookup form: lower case, a trailing dot dropped, an internationalised
 * name in its ASCII (punycode) form, which is what clients send in Host and SNI; `*.` kept.
 */
export function normalizeName(written: string): string {
  const wildcard = written.startsWith('*.');
  let rest = (wildcard ? written.slice(2) : written).toLowerCase();
  if (rest.endsWith('.')) rest = rest.slice(0, -1);
  // domainToASCII answers '' for what is no domain; the name is then left for hostnameProblem to refuse.
  if (NON_ASCII.test(rest)) rest = domainToASCII(rest) || rest;
  return wildcard ? `*.${rest}` : rest;
}

/**
 * Why a configured hostname can never match a request, or undefined; runs when a site file loads.
 * Labels of letters, digits, hyphens and underscores (after the punycode conversion), `*.` only as the whole
 * first label, DNS length limits (63 per label, 253 in all).
 */
export function hostnameProblem(written: string): string | undefined {
  const name = normalizeName(written);
  const rest = name.startsWith('*.') ? name.slice(2) : name;
  if (NON_ASCII.test(rest)) return 'is no valid internationalised name';
  if (rest.length > 253) return 'is longer than 253 characters';
  for (const label of rest.split('.')) {
    if (label === '') return 'has an empty label (a leading dot or two dots in a row)';
    if (label.length > 63) return 'has a label longer than 63 characters';
    if (LABEL.test(label)) continue;
    if (label.includes('*')) return 'uses * other than as the whole first label (write *.example.com)';
    return 'may hold only letters, digits, hyphens, underscores and dots (no spaces, ports or IPv6 literals: those are never routed)';
  }
  return undefined;
}

function lookup<S>(table: Table<S>, host: string): S | undefined {
  const exact = table.exact.get(host);
  if (exact !== undefined) return exact;
  if (table.wildcard.size === 0) return undefined;
  // Longest suffix first: drop one label at a time from the left.
  for (let dot = host.indexOf('.'); dot !== -1; dot = host.indexOf('.', dot + 1)) {
    const hit = table.wildcard.get(host.slice(dot));
    if (hit !== undefined) return hit;
  }
  return undefined;
}

/**
 * Compiles the routing table of one config generation; runs on every reload. `sites` must be in
 * sorted file order (that order breaks ties). Conflicts among enabled sites are returned for the
 * caller to log; the returned closure does two map lookups per label at most.
 */
export function createHostRouter<S extends RoutableSite>(sites: readonly S[]): { route: HostRouter<S>; conflicts: RouteConflict[] } {
  const enabled: Table<S> = { exact: new Map(), wildcard: new Map() };
  const disabled: Table<S> = { exact: new Map(), wildcard: new Map() };
  const conflicts: RouteConflict[] = [];
  for (const site of sites) claim(site.enabled ? enabled : disabled, site, site.enabled ? conflicts : []);
  return {
    conflicts,
    route: function routeHost(raw) {
      const host = normalizeHost(raw);
      if (host === undefined) return undefined;
      return lookup(enabled, host) ?? lookup(disabled, host);
    },
  };
}

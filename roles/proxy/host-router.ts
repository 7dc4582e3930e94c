/**
 * Hostname routing of spec/3 §2.7: exact names first, then the longest `*.suffix`; case-insensitive;
 * a port and a trailing dot are stripped; IPv6 literals are never routed. Two enabled sites
 * claiming one name: the first file in sorted order keeps it. Disabled sites claim nothing, but a
 * name only they list still finds them, so the caller can answer 503 instead of 421.
 */

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

/**
 * Normalizes a Host header or SNI name for lookup: lower case, port and trailing dot stripped.
 * Returns undefined for an IPv6 literal (bracketed or bare) or an empty name: those are not routed.
 */
export function normalizeHost(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  let host = raw.trim().toLowerCase();
  if (host.startsWith('[')) return undefined;
  const colon = host.indexOf(':');
  if (colon !== -1) {
    // A second colon means a bare IPv6 address, which no site can claim.
    if (host.indexOf(':', colon + 1) !== -1) return undefined;
    host = host.slice(0, colon);
  }
  if (host.endsWith('.')) host = host.slice(0, -1);
  return host === '' ? undefined : host;
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

/** A configured name no request can ever match (an IPv6 literal, a misplaced `*`), for the log. */
export interface UnroutableName {
  hostname: string;
  site: RoutableSite;
}

function claim<S extends RoutableSite>(table: Table<S>, site: S, conflicts: RouteConflict[], unroutable: UnroutableName[]): void {
  for (const written of site.hostnames) {
    const name = normalizeName(written);
    if (name === undefined) {
      unroutable.push({ hostname: written, site });
      continue;
    }
    const map = name.startsWith('*.') ? table.wildcard : table.exact;
    const key = name.startsWith('*.') ? name.slice(1) : name;
    const owner = map.get(key);
    if (owner === undefined) map.set(key, site);
    else if (owner !== site) conflicts.push({ hostname: name, winner: owner, loser: site });
  }
}

/** A configured hostname in lookup form (`*.` kept); undefined when it can never match. */
export function normalizeName(written: string): string | undefined {
  const wildcard = written.startsWith('*.');
  const rest = normalizeHost(wildcard ? written.slice(2) : written);
  // `*` only stands for labels as the first one: `*`, `a.*.b` or `*x.b` are no Host anyone sends.
  if (rest === undefined || rest.includes('*')) return undefined;
  return wildcard ? `*.${rest}` : rest;
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
export function createHostRouter<S extends RoutableSite>(sites: readonly S[]): { route: HostRouter<S>; conflicts: RouteConflict[]; unroutable: UnroutableName[] } {
  const enabled: Table<S> = { exact: new Map(), wildcard: new Map() };
  const disabled: Table<S> = { exact: new Map(), wildcard: new Map() };
  const conflicts: RouteConflict[] = [];
  const unroutable: UnroutableName[] = [];
  for (const site of sites) claim(site.enabled ? enabled : disabled, site, site.enabled ? conflicts : [], unroutable);
  return {
    conflicts,
    unroutable,
    route: function routeHost(raw) {
      const host = normalizeHost(raw);
      if (host === undefined) return undefined;
      return lookup(enabled, host) ?? lookup(disabled, host);
    },
  };
}

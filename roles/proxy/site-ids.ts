/**
 * Site ids (spec/3 §2.3): `[A-Za-z0-9._-]{1,64}`. A site file with an empty id gets one derived
 * from its file name (the API derives one from the first hostname), made unique with `-2`, `-3`...
 */
import { basename } from 'node:path';

export const SITE_ID = /^[A-Za-z0-9._-]{1,64}$/;
const MAX_LEN = 64;

/** The id a name suggests: invalid characters become `-`, at most 64 characters, `site` if nothing is left. */
export function siteIdFrom(name: string): string {
  const cleaned = name
    .replace(/[^A-Za-z0-9._-]+/g, '-')
    .replace(/^[-.]+|[-.]+$/g, '')
    .slice(0, MAX_LEN);
  return cleaned === '' ? 'site' : cleaned;
}

/** The id a site file's name suggests: `sites.d/shop.yaml` -> `shop`. */
export function siteIdFromFile(file: string): string {
  return siteIdFrom(basename(file).replace(/\.ya?ml$/, ''));
}

/** `base`, or `base-N` with the smallest N >= 2 that is not taken (shortening base to stay within 64). */
export function uniqueSiteId(base: string, taken: ReadonlySet<string>): string {
  if (!taken.has(base)) return base;
  for (let n = 2; ; n++) {
    const suffix = `-${n}`;
    const id = `${base.slice(0, MAX_LEN - suffix.length)}${suffix}`;
    if (!taken.has(id)) return id;
  }
}

/** One site file's say in id assignment. */
export interface SiteIdClaim {
  file: string;
  /** The id the file's text gives (or that was written into it), undefined when it has none. */
  wanted: string | undefined;
  /** The id the file's site serves under now, undefined when it is not served. */
  serving: string | undefined;
}

/** A file that wants an id another file keeps. */
export interface SiteIdDuplicate {
  file: string;
  id: string;
  /** The file that keeps the id. */
  owner: string;
}

/**
 * Decides every file's id; runs on every rebuild of the served sites and in `check` (where nothing
 * is served). `claims` must be in sorted file order. An id stays with the file serving under it
 * (a copied file never takes over a running site's id, counters and bans); an id nobody serves
 * goes to the first file in sorted order that wants it. Files that want an id another file keeps
 * are duplicates and get none; files without an id keep the one they serve under, or get a new
 * one from their file name.
 */
export function resolveSiteIds(claims: readonly SiteIdClaim[]): { ids: Map<string, string>; duplicates: SiteIdDuplicate[] } {
  const owners = new Map<string, string>();
  for (const c of claims) if (c.serving !== undefined) owners.set(c.serving, c.file);
  for (const c of claims) if (c.wanted !== undefined && !owners.has(c.wanted)) owners.set(c.wanted, c.file);
  const ids = new Map<string, string>();
  const duplicates: SiteIdDuplicate[] = [];
  for (const c of claims) {
    if (c.wanted === undefined) continue;
    const owner = owners.get(c.wanted) as string;
    if (owner === c.file) ids.set(c.file, c.wanted);
    else duplicates.push({ file: c.file, id: c.wanted, owner });
  }
  const taken = new Set(owners.keys());
  for (const c of claims) {
    if (c.wanted !== undefined) continue;
    const id = c.serving ?? uniqueSiteId(siteIdFromFile(c.file), taken);
    taken.add(id);
    ids.set(c.file, id);
  }
  return { ids, duplicates };
}

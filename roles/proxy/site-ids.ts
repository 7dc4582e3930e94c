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

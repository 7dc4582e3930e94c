/**
 * Hop-by-hop headers (RFC 9110 §7.6.1): they describe one connection, so a proxy consumes them
 * on each side and never forwards them, nor any header the Connection header names.
 */

/** Always removed, in both directions. `expect` too: node has already answered 100-continue. */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'http2-settings',
]);

/**
 * A Transfer-Encoding value (RFC 9112 §6.1) as a proxy relays it: whether chunked is its last
 * coding (the framing, taken off on receipt and applied anew when sent on), and the codings the
 * body keeps besides that (`gzip`), joined as sent, or undefined when there are none. `identity`
 * (RFC 2616's "no coding", no longer registered) labels nothing and is left out.
 */
export function transferCodings(value: string): { chunked: boolean; others: string | undefined } {
  const codings = value
    .split(',')
    .map((c) => c.trim())
    .filter((c) => c !== '');
  const chunked = codings.at(-1)?.toLowerCase() === 'chunked';
  if (chunked) codings.pop();
  const others = codings.filter((c) => c.toLowerCase() !== 'identity');
  return { chunked, others: others.length > 0 ? others.join(', ') : undefined };
}

/** The header names a Connection header lists (lower case), besides the fixed set. */
export function connectionListed(value: string | string[] | undefined): Set<string> | undefined {
  if (value === undefined) return undefined;
  const text = Array.isArray(value) ? value.join(',') : value;
  let names: Set<string> | undefined;
  for (const token of text.split(',')) {
    const name = token.trim().toLowerCase();
    if (name !== '' && name !== 'close' && name !== 'keep-alive') (names ??= new Set()).add(name);
  }
  return names;
}

/**
 * Removes hop-by-hop headers from an origin response header object (the origin client's parsed form, lower
 * case keys) in place; runs once per forwarded response before it is written to the client.
 */
export function stripResponseHopHeaders(headers: Record<string, string | string[] | undefined>): void {
  const listed = connectionListed(headers['connection']);
  for (const name of HOP_BY_HOP) delete headers[name];
  if (listed) for (const name of listed) delete headers[name];
}

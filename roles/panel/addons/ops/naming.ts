/**
 * The naming pattern (spec/2 §2.5): tokens replaced by a server's values, then every character
 * other than word characters, whitespace, `-`, `_`, `.`, `:`, `(`, `)`, `[`, `]`, `#` and `@`
 * removed, and the result cut to 191 characters. Unknown text (an unknown `{token}` included)
 * stays literal apart from that cleaning. Pure.
 */

export const NAME_MAX = 191;

export interface NamingValues {
  /** The sequential server id the caller supplies (the id the next server will get, plus any offset). */
  server_id?: number | null;
  username?: string | null;
  memory?: number | null;
  disk?: number | null;
  cpu?: number | null;
  egg?: string | null;
  node?: string | null;
  /** 1-based position in a batch. */
  index?: number | null;
}

const NOT_ALLOWED = /[^A-Za-z0-9_\s\-.:()[\]#@]/g;

/** The name `pattern` gives for `v`. */
export function resolveName(pattern: string, v: NamingValues): string {
  const tokens: Record<string, string> = {
    server_id: String(v.server_id ?? ''),
    username: v.username ?? 'admin',
    ram: `${v.memory ?? 0}MB`,
    disk: `${v.disk ?? 0}MB`,
    cpu: `${v.cpu ?? 0}%`,
    egg: v.egg ?? 'unknown',
    node: v.node ?? 'unknown',
    index: String(v.index ?? 1),
  };
  const replaced = pattern.replace(/\{([a-z_]+)\}/g, (whole, name: string) => tokens[name] ?? whole);
  return replaced.replace(NOT_ALLOWED, '').slice(0, NAME_MAX);
}

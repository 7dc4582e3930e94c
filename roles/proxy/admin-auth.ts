/**
 * Admin API access (spec/3 §2.2, §5): the Host allow-list first, then a bearer token from the
 * live config, then the token's role. Tokens and the allow-list are read from the current global
 * config on every request, so a rotation applies to the next request.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';
import type { ProxyGlobalConfig } from '../../src/contracts/types.ts';

export type AdminRole = 'admin' | 'operator' | 'readonly';

const RANK: Readonly<Record<AdminRole, number>> = { readonly: 0, operator: 1, admin: 2 };

/** True when `role` may do what `needed` may. */
export function roleAllows(role: AdminRole, needed: AdminRole): boolean {
  return RANK[role] >= RANK[needed];
}

export interface AdminAuth {
  /**
   * The allow-list check: true when the list is empty or holds the Host (with or without its
   * port; an IPv6 Host also without its brackets). A missing Host is not in any list.
   */
  hostAllowed(host: string | undefined): boolean;
  /** The token's name and role, or undefined for a missing or unknown bearer token. */
  authenticate(authorization: string | undefined): { name: string; role: AdminRole } | undefined;
}

/**
 * Creates the checks around a getter of the live global config; runs once at start. Tokens are
 * compared as HMACs under a per-process key with timingSafeEqual, every configured token each
 * time, so neither a token's content, its length nor its position leaks through timing.
 */
export function createAdminAuth(global: () => Readonly<ProxyGlobalConfig>): AdminAuth {
  const key = randomBytes(32);
  const digest = (s: string): Buffer => createHmac('sha256', key).update(s).digest();
  return {
    hostAllowed(host) {
      const allowed = global().admin.allow_hosts;
      if (allowed.length === 0) return true;
      if (host === undefined) return false;
      const h = host.trim().toLowerCase();
      const bare = h.startsWith('[') ? h.slice(0, h.indexOf(']') + 1) : h.replace(/:[0-9]*$/, '');
      // Clients bracket an IPv6 Host (`[::1]:9090`); the entry may name the address bare (`::1`).
      const inner = bare.slice(1, -1);
      const address = bare.startsWith('[') && isIP(inner) === 6 ? inner : undefined;
      return allowed.some((a) => {
        const entry = a.trim().toLowerCase();
        return entry === h || entry === bare || entry === address;
      });
    },
    authenticate(authorization) {
      const m = /^Bearer[ ]+(\S+)\s*$/i.exec(authorization ?? '');
      if (!m) return undefined;
      const presented = digest(m[1] as string);
      let found: { name: string; role: AdminRole } | undefined;
      for (const t of global().admin.tokens) {
        if (timingSafeEqual(presented, digest(t.token)) && found === undefined) found = { name: t.name, role: t.role };
      }
      return found;
    },
  };
}

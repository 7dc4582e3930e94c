/**
 * IP ACLs (spec/3 §2.2 `global_acl`, §2.5 `protection.acl`, §2.7 rule 5): the whitelist wins
 * over the blacklist, and a non-empty whitelist denies every address not on it. The global ACL
 * runs in the data plane before routing, on the TCP peer (trusted proxies are per site, so no
 * client IP exists yet); the site ACL runs in the pipeline's ban_acl phase after the ban check,
 * on the resolved client IP.
 */
import { createIpRanges } from './ip-ranges.ts';
import type { RequestContext } from './request-context.ts';
import { ALLOW, deny, type Verdict } from './verdict.ts';

/** Rule ids of the ACLs; also written in docs/proxy-admin-api.md. */
export const ACL_RULES = { global: 'acl.global', site: 'acl.site' } as const;

export const GLOBAL_ACL_DENY = deny(403, ACL_RULES.global);
const SITE_ACL_DENY = deny(403, ACL_RULES.site);

export interface AclConfig {
  whitelist: readonly string[];
  blacklist: readonly string[];
}

/** True when the address may pass; compiled once per generation. */
export type AclTest = (ip: string) => boolean;

/** Compiles an ACL; returns undefined when both lists are empty (nothing to check). */
export function createAclTest(acl: AclConfig): AclTest | undefined {
  if (acl.whitelist.length === 0 && acl.blacklist.length === 0) return undefined;
  const white = createIpRanges(acl.whitelist);
  const black = createIpRanges(acl.blacklist);
  if (acl.whitelist.length > 0) return (ip) => white(ip);
  return (ip) => !black(ip);
}

/** The site ACL check of the ban_acl phase, or undefined when the site has no ACL. */
export function createSiteAcl(acl: AclConfig): ((ctx: RequestContext) => Verdict) | undefined {
  const passes = createAclTest(acl);
  if (!passes) return undefined;
  return function siteAcl(ctx) {
    return passes(ctx.clientIp) ? ALLOW : SITE_ACL_DENY;
  };
}

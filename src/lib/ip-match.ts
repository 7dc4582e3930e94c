/**
 * IP/CIDR lists (the proxy's trusted proxies, ACLs and bans; the panel's API key allowed_ips)
 * compiled into node's BlockList, which matches IPv4, IPv6 and IPv4-mapped IPv6 addresses against
 * both families of rules.
 */
import { BlockList, isIP } from 'node:net';

/** True when `ip` is inside one of the compiled ranges. */
export type IpMatcher = (ip: string) => boolean;

/**
 * Compiles a list of `IP` / `IP/bits` entries (already validated by the loader) once per config
 * generation; returns a matcher that never throws. An empty list matches nothing.
 */
export function createIpMatcher(entries: readonly string[]): IpMatcher {
  if (entries.length === 0) return () => false;
  const list = new BlockList();
  for (const entry of entries) {
    const [addr = '', bits] = entry.split('/');
    const family = isIP(addr);
    if (family === 0) continue;
    const type = family === 4 ? 'ipv4' : 'ipv6';
    if (bits === undefined) list.addAddress(addr, type);
    else list.addSubnet(addr, Number(bits), type);
  }
  return function ipMatches(ip) {
    const family = isIP(ip);
    return family !== 0 && list.check(ip, family === 4 ? 'ipv4' : 'ipv6');
  };
}

/** The address as clients and logs know it: an IPv4-mapped IPv6 peer (`::ffff:1.2.3.4`) becomes IPv4. */
export function plainIp(address: string | undefined): string {
  if (address === undefined) return '';
  return address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address;
}

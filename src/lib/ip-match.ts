/**
 * IP/CIDR lists (the proxy's trusted proxies, ACLs and bans; the panel's API key allowed_ips)
 * compiled into node's BlockList, which matches IPv4, IPv6 and IPv4-mapped IPv6 addresses against
 * both families of rules; and the one spelling of an address, for what is keyed by its text.
 */
import { BlockList, SocketAddress, isIP } from 'node:net';

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

/**
 * The one spelling of an address, or undefined when `text` is not an IP address: IPv4 as is,
 * IPv6 as the kernel and node's sockets print it (RFC 5952: lower case, leading zeros dropped,
 * the longest zero run as `::`, no zone), and an IPv4-mapped IPv6 address as its IPv4 address.
 * So a ban or a log line written `2001:DB8:0::1` names the client node reports as `2001:db8::1`.
 * IPv4, the common case, costs one isIP() and no allocation.
 */
export function canonicalIp(text: string): string | undefined {
  const family = isIP(text);
  if (family === 4) return text;
  if (family === 0) return undefined;
  // SocketAddress stores the parsed bytes and prints them with inet_ntop, as node does a peer's.
  return plainIp(new SocketAddress({ address: text, family: 'ipv6' }).address);
}

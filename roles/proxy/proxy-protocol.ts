/**
 * PROXY protocol headers (HAProxy's proxy-protocol.txt, v1 text and v2 binary) that the proxy
 * writes before any other byte on an upstream connection when a site sets
 * `client_ip.proxy_protocol`, so the origin learns the client's address and the address the
 * client connected to.
 */
import { isIP } from 'node:net';

export type ProxyProtocolVersion = 'v1' | 'v2';

/** The two ends of the client's connection: the resolved client and the proxy's listener. */
export interface ProxyEndpoints {
  sourceIp: string;
  sourcePort: number;
  destIp: string;
  destPort: number;
}

const V2_SIGNATURE = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);
// Version 2, command PROXY.
const V2_PROXY = 0x21;
const V2_TCP4 = 0x11;
const V2_TCP6 = 0x21;

/** `::ffff:a.b.c.d` for an IPv4 address, so both ends of a mixed pair are written as IPv6. */
function asV6(ip: string): string {
  return isIP(ip) === 4 ? `::ffff:${ip}` : ip;
}

/** Both addresses in one family: IPv4 when both are, else IPv6 (IPv4 mapped). */
function sameFamily(e: ProxyEndpoints): { v6: boolean; src: string; dst: string } {
  if (isIP(e.sourceIp) === 4 && isIP(e.destIp) === 4) return { v6: false, src: e.sourceIp, dst: e.destIp };
  return { v6: true, src: asV6(e.sourceIp), dst: asV6(e.destIp) };
}

/** 16 bytes of an IPv6 address (any textual form node accepts, IPv4-mapped included). */
function v6Bytes(ip: string): Buffer {
  let text = ip;
  const out = Buffer.alloc(16);
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  let tail: number[] = [];
  if (dotted) {
    tail = (dotted[1] as string).split('.').map(Number);
    text = `${text.slice(0, dotted.index)}0:0`;
  }
  const [head = '', rest] = text.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = rest === undefined || rest === '' ? [] : rest.split(':');
  const groups = [...left, ...new Array<string>(8 - left.length - right.length).fill('0'), ...right];
  groups.forEach((g, i) => out.writeUInt16BE(parseInt(g, 16), i * 2));
  if (tail.length === 4) tail.forEach((b, i) => (out[12 + i] = b));
  return out;
}

function v4Bytes(ip: string): Buffer {
  return Buffer.from(ip.split('.').map(Number));
}

/**
 * The header for one upstream connection; runs when the connection is opened. An endpoint that
 * is not an IP address (it cannot happen on TCP listeners) gives v1 `PROXY UNKNOWN` / v2 LOCAL.
 */
export function proxyProtocolHeader(version: ProxyProtocolVersion, e: ProxyEndpoints): Buffer {
  const known = isIP(e.sourceIp) !== 0 && isIP(e.destIp) !== 0;
  if (version === 'v1') {
    if (!known) return Buffer.from('PROXY UNKNOWN\r\n');
    const { v6, src, dst } = sameFamily(e);
    return Buffer.from(`PROXY ${v6 ? 'TCP6' : 'TCP4'} ${src} ${dst} ${e.sourcePort} ${e.destPort}\r\n`);
  }
  if (!known) return Buffer.concat([V2_SIGNATURE, Buffer.from([0x20, 0x00, 0x00, 0x00])]);
  const { v6, src, dst } = sameFamily(e);
  const addrs = v6 ? Buffer.concat([v6Bytes(src), v6Bytes(dst)]) : Buffer.concat([v4Bytes(src), v4Bytes(dst)]);
  const ports = Buffer.alloc(4);
  ports.writeUInt16BE(e.sourcePort, 0);
  ports.writeUInt16BE(e.destPort, 2);
  const head = Buffer.alloc(4);
  head[0] = V2_PROXY;
  head[1] = v6 ? V2_TCP6 : V2_TCP4;
  head.writeUInt16BE(addrs.length + 4, 2);
  return Buffer.concat([V2_SIGNATURE, head, addrs, ports]);
}

/**
 * Client IP resolution and forwarding (spec/3 §2.4), as a table: every forward mode behind a
 * trusted and an untrusted peer (the test client is 127.0.0.1), with X-Forwarded-For chains,
 * X-Real-Ip fallbacks, ports, brackets, IPv6 and garbage entries. The resolved IP is read from the
 * request events; the headers from what the origin received.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Daemon } from '../hostkit-process.ts';
import { api, makeRoot, request, seenOf, startOrigin, startProxy, type Origin, type ProxyRoot } from './harness.ts';

const MODES = ['none', 'x_forwarded_for', 'x_real_ip', 'forwarded', 'custom'] as const;
type Mode = (typeof MODES)[number];

let root: ProxyRoot;
let proxy: Daemon;
let origin: Origin;

const siteId = (mode: Mode, trusted: boolean): string => `${mode.replace(/_/g, '-')}-${trusted ? 't' : 'u'}`;

before(async () => {
  origin = await startOrigin();
  const sites: Record<string, Record<string, unknown>> = {};
  for (const mode of MODES) {
    for (const trusted of [true, false]) {
      const id = siteId(mode, trusted);
      sites[`${id}.yaml`] = {
        id,
        hostnames: [`${id}.test`],
        origin: { url: origin.url },
        client_ip: {
          trusted_proxies: trusted ? ['127.0.0.1', '10.0.0.0/8', '2001:db8::/32'] : ['10.0.0.0/8', '::1'],
          forward_mode: mode,
          ...(mode === 'custom' ? { custom_header: 'X-Client-Ip' } : {}),
        },
      };
    }
  }
  root = await makeRoot({ sites });
  proxy = await startProxy(root);
});

after(async () => {
  await proxy?.stop('SIGKILL');
  await origin?.close();
});

async function send(mode: Mode, trusted: boolean, headers: Record<string, string | string[]>) {
  const id = siteId(mode, trusted);
  const reply = await request({ port: root.httpPort, host: `${id}.test`, path: '/ip', headers });
  assert.equal(reply.status, 200, reply.text);
  const events = await api(root, 'GET', `/events/recent?site=${id}&limit=1`);
  return { clientIp: events.body.data.events[0].client_ip as string, seen: seenOf(reply).headers };
}

// [inbound headers, client IP behind a trusted peer, why]
const RESOLUTION: [Record<string, string | string[]>, string, string][] = [
  [{}, '127.0.0.1', 'no headers: the peer'],
  [{ 'x-forwarded-for': '203.0.113.7' }, '203.0.113.7', 'one entry'],
  [{ 'x-forwarded-for': '198.51.100.1, 203.0.113.7, 10.1.1.1' }, '203.0.113.7', 'right to left past trusted hops; the spoofable left part is ignored'],
  [{ 'x-forwarded-for': '10.0.0.1, 10.0.0.2' }, '10.0.0.2', 'whole chain trusted: the rightmost entry'],
  [{ 'x-forwarded-for': '10.0.0.3, not-an-ip' }, '10.0.0.3', 'whole chain trusted: the rightmost parseable entry'],
  [{ 'x-forwarded-for': 'garbage, 203.0.113.5' }, '203.0.113.5', 'garbage entries are skipped'],
  [{ 'x-real-ip': '198.51.100.9' }, '198.51.100.9', 'no chain: X-Real-Ip'],
  [{ 'x-forwarded-for': 'unknown', 'x-real-ip': '198.51.100.9' }, '198.51.100.9', 'no parseable chain entry: X-Real-Ip'],
  [{ 'x-forwarded-for': '10.0.0.4', 'x-real-ip': '198.51.100.9' }, '10.0.0.4', 'a trusted chain still beats X-Real-Ip'],
  [{ 'x-forwarded-for': '203.0.113.8:5555' }, '203.0.113.8', 'IPv4 with a port'],
  [{ 'x-forwarded-for': '[2a00:1450::2]:8443, 2001:db8::7' }, '2a00:1450::2', 'bracketed IPv6 with a port, behind a trusted IPv6 hop'],
  [{ 'x-forwarded-for': '2a00:1450::1' }, '2a00:1450::1', 'bare IPv6'],
  [{ 'x-forwarded-for': '2A00:1450:0:0::3' }, '2a00:1450::3', 'IPv6 in any spelling: the canonical form bans and ACLs see'],
  [{ 'x-forwarded-for': '::FFFF:203.0.113.10' }, '203.0.113.10', 'IPv4-mapped IPv6: the IPv4 address'],
  [{ 'x-forwarded-for': ['198.51.100.1', '203.0.113.9, 10.0.0.1'] }, '203.0.113.9', 'repeated headers form one chain'],
];

test('resolution behind a trusted peer: right-to-left walk, rightmost parseable, X-Real-Ip, peer', async () => {
  for (const [headers, expected, why] of RESOLUTION) {
    const { clientIp } = await send('x_real_ip', true, headers);
    assert.equal(clientIp, expected, why);
  }
});

test('an untrusted peer is the client; its X-Forwarded-For and X-Real-Ip are ignored', async () => {
  for (const [headers] of RESOLUTION) {
    const { clientIp } = await send('x_real_ip', false, headers);
    assert.equal(clientIp, '127.0.0.1', JSON.stringify(headers));
  }
});

const INBOUND = { 'x-forwarded-for': '198.51.100.1, 203.0.113.7, 10.1.1.1', 'x-real-ip': '6.6.6.6', forwarded: 'for=6.6.6.6', 'x-client-ip': '6.6.6.6' };

// [mode, trusted, expected origin headers (undefined = absent), why]
const FORWARDING: [Mode, boolean, Record<string, string | undefined>, string][] = [
  [
    'none',
    true,
    { 'x-forwarded-for': undefined, 'x-real-ip': undefined, forwarded: undefined, 'x-client-ip': '6.6.6.6' },
    'none removes the three client-IP headers and nothing else',
  ],
  ['none', false, { 'x-forwarded-for': undefined, 'x-real-ip': undefined, forwarded: undefined }, 'none, untrusted peer'],
  [
    'x_forwarded_for',
    true,
    { 'x-forwarded-for': '198.51.100.1, 203.0.113.7, 10.1.1.1, 203.0.113.7', 'x-real-ip': '6.6.6.6', forwarded: 'for=6.6.6.6' },
    'the client IP is appended to the inbound chain',
  ],
  ['x_forwarded_for', false, { 'x-forwarded-for': '127.0.0.1' }, 'untrusted: the forged chain is dropped, the origin gets the peer alone'],
  ['x_real_ip', true, { 'x-real-ip': '203.0.113.7', 'x-forwarded-for': INBOUND['x-forwarded-for'], forwarded: 'for=6.6.6.6' }, 'X-Real-Ip replaced'],
  ['x_real_ip', false, { 'x-real-ip': '127.0.0.1' }, 'a forged X-Real-Ip from an untrusted peer never reaches the origin'],
  ['forwarded', true, { forwarded: 'for=203.0.113.7', 'x-real-ip': '6.6.6.6' }, 'Forwarded replaced'],
  ['forwarded', false, { forwarded: 'for=127.0.0.1' }, 'Forwarded, untrusted peer'],
  ['custom', true, { 'x-client-ip': '203.0.113.7', 'x-real-ip': '6.6.6.6' }, 'the custom header replaced'],
  ['custom', false, { 'x-client-ip': '127.0.0.1' }, 'custom, untrusted peer'],
];

test('the five forward modes, behind trusted and untrusted peers', async () => {
  for (const [mode, trusted, expected, why] of FORWARDING) {
    const { seen } = await send(mode, trusted, INBOUND);
    for (const [header, value] of Object.entries(expected)) assert.equal(seen[header], value, `${mode}/${trusted ? 'trusted' : 'untrusted'} ${header}: ${why}`);
  }
});

test('x_forwarded_for creates the header when absent; forwarded brackets and quotes IPv6', async () => {
  assert.equal((await send('x_forwarded_for', true, {})).seen['x-forwarded-for'], '127.0.0.1');
  assert.equal((await send('forwarded', true, { 'x-forwarded-for': '2a00:1450::9' })).seen['forwarded'], 'for="[2a00:1450::9]"');
});

test('X-Forwarded-Proto: kept from a trusted proxy, replaced after any other peer in x_forwarded_for, dropped elsewhere', async () => {
  const proto = { 'x-forwarded-proto': 'https' };
  assert.equal((await send('x_forwarded_for', true, proto)).seen['x-forwarded-proto'], 'https', 'the trusted proxy terminated TLS');
  assert.equal((await send('x_forwarded_for', true, {})).seen['x-forwarded-proto'], 'http');
  assert.equal((await send('x_forwarded_for', false, proto)).seen['x-forwarded-proto'], 'http', 'a client cannot claim https');
  assert.equal((await send('x_real_ip', true, proto)).seen['x-forwarded-proto'], 'https');
  assert.equal((await send('x_real_ip', false, proto)).seen['x-forwarded-proto'], undefined);
  assert.equal((await send('none', true, proto)).seen['x-forwarded-proto'], undefined, 'none sends no forwarding headers');
});

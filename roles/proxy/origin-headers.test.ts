import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createIpMatcher } from '../../src/lib/ip-match.ts';
import { createOriginHeaders } from './origin-headers.ts';

const RAW = ['Host', 'a.example:8080', 'Connection', 'keep-alive, X-Hop', 'X-Hop', '1', 'Keep-Alive', '5', 'TE', 'trailers', 'Expect', '100-continue', 'X-Forwarded-For', '1.1.1.1', 'x-forwarded-for', '2.2.2.2', 'X-Real-Ip', '6.6.6.6', 'Forwarded', 'for=6.6.6.6', 'Cookie', 'a=1', 'Content-Length', '3'];

function pairs(flat: string[]): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 0; i < flat.length; i += 2) out.push([flat[i] as string, flat[i + 1] as string]);
  return out;
}

test('hop-by-hop, Connection-listed and framing headers dropped; end-to-end headers kept in order', () => {
  const build = createOriginHeaders({ forwardMode: 'none', customHeader: null, hostHeader: null, trusted: createIpMatcher([]) });
  assert.deepEqual(pairs(build(RAW, 'a.example:8080', '9.9.9.9', '9.9.9.9', 'http')), [
    ['Cookie', 'a=1'],
    ['host', 'a.example:8080'],
  ]);
});

test('each forward mode writes its header and replaces an inbound one (the peer a trusted proxy)', () => {
  const modes = {
    x_forwarded_for: ['x-forwarded-for', '1.1.1.1, 2.2.2.2, 9.9.9.9'],
    x_real_ip: ['x-real-ip', '9.9.9.9'],
    forwarded: ['forwarded', 'for=9.9.9.9'],
    custom: ['x-client', '9.9.9.9'],
  } as const;
  for (const [mode, [name, value]] of Object.entries(modes)) {
    const build = createOriginHeaders({ forwardMode: mode as keyof typeof modes, customHeader: 'X-Client', hostHeader: 'origin.internal', trusted: createIpMatcher(['10.0.0.0/8']) });
    const out = pairs(build(RAW, 'a.example', '9.9.9.9', '::ffff:10.1.2.3', 'http'));
    assert.deepEqual(out.filter(([n]) => n.toLowerCase() === name), [[name, value]], mode);
    assert.deepEqual(out.filter(([n]) => n.toLowerCase() === 'host'), [['host', 'origin.internal']]);
  }
  const v6 = createOriginHeaders({ forwardMode: 'forwarded', customHeader: null, hostHeader: null, trusted: createIpMatcher([]) });
  assert.deepEqual(pairs(v6([], 'a', '2001:db8::1', '2001:db8::1', 'http')).find(([n]) => n === 'forwarded'), ['forwarded', 'for="[2001:db8::1]"']);
});

test('x_forwarded_for drops the chain an untrusted peer sent: the origin gets the client alone', () => {
  const build = createOriginHeaders({ forwardMode: 'x_forwarded_for', customHeader: null, hostHeader: null, trusted: createIpMatcher(['10.0.0.0/8']) });
  const xff = (peer: string, client: string): string[] =>
    pairs(build(RAW, 'a', client, peer, 'http'))
      .filter(([n]) => n === 'x-forwarded-for')
      .map(([, v]) => v);
  assert.deepEqual(xff('203.0.113.7', '203.0.113.7'), ['203.0.113.7']);
  assert.deepEqual(xff('10.0.0.1', '2.2.2.2'), ['1.1.1.1, 2.2.2.2, 2.2.2.2']);
  // No inbound chain: the header is created from the client either way.
  assert.deepEqual(pairs(build([], 'a', '203.0.113.7', '203.0.113.7', 'https')), [['host', 'a'], ['x-forwarded-for', '203.0.113.7'], ['x-forwarded-proto', 'https']]);
});

test('X-Forwarded-Proto: written by x_forwarded_for from the listener scheme; an inbound one kept only from a trusted proxy', () => {
  const inbound = ['X-Forwarded-Proto', 'https', 'Accept', '*/*'];
  const proto = (mode: 'none' | 'x_forwarded_for' | 'x_real_ip' | 'forwarded' | 'custom', peer: string, scheme: 'http' | 'https', raw: string[] = inbound): string[] => {
    const build = createOriginHeaders({ forwardMode: mode, customHeader: 'X-Client', hostHeader: null, trusted: createIpMatcher(['10.0.0.0/8']) });
    return pairs(build(raw, 'a', '203.0.113.7', peer, scheme))
      .filter(([n]) => n.toLowerCase() === 'x-forwarded-proto')
      .map(([, v]) => v);
  };
  // A client that says https over a cleartext listener: dropped, the origin learns http.
  assert.deepEqual(proto('x_forwarded_for', '203.0.113.7', 'http'), ['http']);
  assert.deepEqual(proto('x_forwarded_for', '203.0.113.7', 'https', []), ['https']);
  // A trusted proxy terminated TLS in front of this cleartext listener: its value stands.
  assert.deepEqual(proto('x_forwarded_for', '10.0.0.1', 'http'), ['https']);
  assert.deepEqual(proto('x_forwarded_for', '10.0.0.1', 'http', []), ['http']);
  for (const mode of ['x_real_ip', 'forwarded', 'custom'] as const) {
    assert.deepEqual(proto(mode, '203.0.113.7', 'https'), [], `${mode}: an untrusted peer's is dropped, none written`);
    assert.deepEqual(proto(mode, '10.0.0.1', 'http'), ['https'], `${mode}: a trusted peer's passes`);
  }
  assert.deepEqual(proto('none', '10.0.0.1', 'https'), [], 'none sends no forwarding headers at all');
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createClientIpResolver, parseForwardedEntry } from './client-ip.ts';
import { createIpMatcher } from '../../src/lib/ip-match.ts';

test('X-Forwarded-For entries: plain, with ports, bracketed, quoted, IPv4-mapped; garbage refused', () => {
  const cases: [string, string | undefined][] = [
    [' 203.0.113.7 ', '203.0.113.7'],
    ['203.0.113.7:8080', '203.0.113.7'],
    ['2001:db8::1', '2001:db8::1'],
    ['[2001:db8::1]', '2001:db8::1'],
    ['[2001:db8::1]:443', '2001:db8::1'],
    ['"[2001:db8::1]:443"', '2001:db8::1'],
    ['::ffff:10.0.0.1', '10.0.0.1'],
    ['2001:DB8:0::1', '2001:db8::1'],
    ['[2001:0db8:0000:0000:0000:0000:0000:0001]:80', '2001:db8::1'],
    ['::FFFF:C000:0209', '192.0.2.9'],
    ['unknown', undefined],
    ['', undefined],
    ['[2001:db8::1]x', undefined],
    ['999.1.1.1', undefined],
  ];
  for (const [raw, want] of cases) assert.equal(parseForwardedEntry(raw), want, raw);
});

test('CIDR matching covers both families and IPv4-mapped peers', () => {
  const m = createIpMatcher(['10.0.0.0/8', '192.0.2.1', '2001:db8::/32']);
  for (const ip of ['10.1.2.3', '::ffff:10.1.2.3', '192.0.2.1', '2001:db8:ffff::1']) assert.equal(m(ip), true, ip);
  for (const ip of ['11.0.0.1', '192.0.2.2', '2001:db9::1', 'nonsense']) assert.equal(m(ip), false, ip);
  assert.equal(createIpMatcher([])('10.0.0.1'), false);
});

test('resolution: untrusted peer, right-to-left walk, whole chain trusted, X-Real-Ip, peer', () => {
  const resolve = createClientIpResolver(createIpMatcher(['10.0.0.0/8']));
  assert.equal(resolve('203.0.113.1', '1.2.3.4', '5.6.7.8'), '203.0.113.1');
  assert.equal(resolve('::ffff:10.0.0.1', '1.1.1.1, 2.2.2.2, 10.9.9.9', undefined), '2.2.2.2');
  assert.equal(resolve('10.0.0.1', '10.0.0.2, 10.0.0.3', '5.6.7.8'), '10.0.0.3');
  assert.equal(resolve('10.0.0.1', 'junk, 10.0.0.3, junk', undefined), '10.0.0.3');
  assert.equal(resolve('10.0.0.1', 'junk', '5.6.7.8'), '5.6.7.8');
  assert.equal(resolve('10.0.0.1', undefined, 'junk'), '10.0.0.1');
  assert.equal(resolve('10.0.0.1', ['1.1.1.1', '2.2.2.2, 10.0.0.9'], undefined), '2.2.2.2');
});

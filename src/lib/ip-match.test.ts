import { test } from 'node:test';
import assert from 'node:assert/strict';
import { canonicalIp, plainIp } from './ip-match.ts';

test('canonicalIp: one spelling per address, IPv4-mapped as IPv4, anything else undefined', () => {
  const cases: [string, string | undefined][] = [
    ['192.0.2.9', '192.0.2.9'],
    ['2001:db8::1', '2001:db8::1'],
    ['2001:DB8:0::1', '2001:db8::1'],
    ['2001:0db8:0000:0000:0000:0000:0000:0001', '2001:db8::1'],
    // RFC 5952: the longest run of zero groups is the one compressed.
    ['1:0:0:1:0:0:0:1', '1:0:0:1::1'],
    ['::FFFF:192.0.2.9', '192.0.2.9'],
    ['::ffff:c000:209', '192.0.2.9'],
    ['fe80::1%eth0', 'fe80::1'],
    ['::1', '::1'],
    ['01.2.3.4', undefined],
    ['2001:db8::/32', undefined],
    ['', undefined],
    ['example.com', undefined],
  ];
  for (const [text, want] of cases) assert.equal(canonicalIp(text), want, text);
});

test('canonicalIp agrees with the form node gives peers (plainIp of a socket address)', () => {
  for (const peer of ['::ffff:127.0.0.1', '::1', '10.0.0.1']) assert.equal(canonicalIp(peer), plainIp(peer), peer);
});

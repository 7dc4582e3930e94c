import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BlockList } from 'node:net';
import { createIpRanges } from './ip-ranges.ts';
import { createAclTest } from './acl.ts';
import { createRateCounters, type WindowHit } from './rate-limit.ts';

test('IPv4 and IPv6 CIDRs; a plain IP is /32 or /128', () => {
  const m = createIpRanges(['10.0.0.0/8', '192.0.2.7', '2001:db8::/32', '::1', 'fe80::1/128', '203.0.113.0/24', 'garbage', '1.2.3.4/33']);
  for (const ip of ['10.0.0.0', '10.255.255.255', '192.0.2.7', '2001:db8::', '2001:db8:ffff:ffff:ffff:ffff:ffff:ffff', '::1', 'fe80::1', '203.0.113.200', '::ffff:10.1.2.3', '::ffff:203.0.113.9']) {
    assert.equal(m(ip), true, ip);
  }
  for (const ip of ['11.0.0.0', '9.255.255.255', '192.0.2.8', '192.0.2.6', '2001:db9::', '::2', 'fe80::2', '1.2.3.4', 'nonsense', '']) {
    assert.equal(m(ip), false, ip);
  }
  assert.equal(createIpRanges([])('1.2.3.4'), false);
  assert.equal(createIpRanges(['0.0.0.0/0'])('255.255.255.255'), true);
  assert.equal(createIpRanges(['::/0'])('ffff::1'), true);
  assert.equal(createIpRanges(['::ffff:192.0.2.0/120'])('192.0.2.77'), true, 'a mapped rule covers the plain IPv4 address');
});

test('overlapping and adjacent ranges merge; random addresses agree with BlockList', () => {
  const entries = ['10.0.0.0/24', '10.0.0.128/25', '10.0.1.0/24', '172.16.0.0/12', '172.20.0.0/16', '2001:db8::/48', '2001:db8::/64'];
  const bl = new BlockList();
  for (const e of entries) {
    const [a = '', b = ''] = e.split('/');
    bl.addSubnet(a, Number(b), a.includes(':') ? 'ipv6' : 'ipv4');
  }
  const m = createIpRanges(entries);
  let seed = 7;
  const rnd = (n: number): number => (seed = (seed * 1103515245 + 12345) % 2147483648) % n;
  for (let i = 0; i < 2000; i++) {
    const v4 = `${[10, 172, 11][rnd(3)]}.${rnd(40)}.${rnd(3)}.${rnd(256)}`;
    assert.equal(m(v4), bl.check(v4, 'ipv4'), v4);
    const v6 = `2001:db8:${rnd(2).toString(16)}:${rnd(2).toString(16)}::${rnd(65536).toString(16)}`;
    assert.equal(m(v6), bl.check(v6, 'ipv6'), v6);
  }
});

test('ACL: whitelist wins, a non-empty whitelist denies the rest, empty lists compile to nothing', () => {
  assert.equal(createAclTest({ whitelist: [], blacklist: [] }), undefined);
  const black = createAclTest({ whitelist: [], blacklist: ['198.51.100.0/24'] });
  assert.equal(black?.('198.51.100.1'), false);
  assert.equal(black?.('198.51.101.1'), true);
  const both = createAclTest({ whitelist: ['198.51.100.1'], blacklist: ['198.51.100.0/24'] });
  assert.equal(both?.('198.51.100.1'), true, 'whitelisted and blacklisted: whitelist wins');
  assert.equal(both?.('198.51.100.2'), false);
  assert.equal(both?.('203.0.113.1'), false, 'not on a non-empty whitelist');
});

test('ACL entries match by value, not spelling: upper case, leading zeros and IPv4-mapped entries cover the canonical client', () => {
  const acl = createAclTest({ whitelist: [], blacklist: ['2001:DB8:0::1', '2001:0db8:00ff::/48', '::FFFF:192.0.2.9'] });
  for (const ip of ['2001:db8::1', '2001:db8:ff::7', '192.0.2.9', '::ffff:192.0.2.9']) assert.equal(acl?.(ip), false, ip);
  assert.equal(acl?.('2001:db8::2'), true);
});

test('diagnostic: lookup cost with 10 and 100,000 entries (sorted ranges vs BlockList)', (t) => {
  const make = (n: number): string[] => Array.from({ length: n }, (_, i) => `${10 + (i >>> 16)}.${(i >>> 8) & 255}.${i & 255}.0/24`);
  const probes = Array.from({ length: 2000 }, (_, i) => `${10 + (i % 3)}.${(i * 7) & 255}.${(i * 13) & 255}.${i & 255}`);
  const measure = (fn: (ip: string) => boolean): number => {
    const rounds = 20;
    const t0 = performance.now();
    let hits = 0;
    for (let r = 0; r < rounds; r++) for (const p of probes) if (fn(p)) hits++;
    assert.ok(hits >= 0);
    return ((performance.now() - t0) * 1e6) / (rounds * probes.length);
  };
  const lines: string[] = [];
  for (const n of [10, 100_000]) {
    const entries = make(n);
    const ranges = createIpRanges(entries);
    const bl = new BlockList();
    // BlockList is linear; 100,000 rules would make the diagnostic itself slow, so it gets 1,000.
    for (const e of entries.slice(0, Math.min(n, 1000))) bl.addSubnet(e.split('/')[0] as string, 24, 'ipv4');
    lines.push(`${n} entries: ranges ${measure(ranges).toFixed(0)} ns/lookup; BlockList(${Math.min(n, 1000)}) ${measure((ip) => bl.check(ip, 'ipv4')).toFixed(0)} ns/lookup`);
  }
  t.diagnostic(lines.join(' | '));
});

test('rate counters: fixed windows, counts over the limit, Retry-After to the window end', () => {
  const c = createRateCounters();
  const hit = (prefix: string, id: string, limit: number, windowSecs: number, now: number): WindowHit => {
    c.lock();
    const h = c.count(prefix, id, limit, windowSecs, now);
    c.unlock();
    return h;
  };
  const t0 = 60_000 * 1000;
  for (let i = 1; i <= 3; i++) assert.equal(hit('p\0', 'k', 3, 60, t0 + i).over, 0);
  const h = hit('p\0', 'k', 3, 60, t0 + 10_000);
  assert.deepEqual(h, { count: 4, over: 1, retryAfter: 50 });
  assert.equal(hit('p\0', 'k', 3, 60, t0 + 10_001).over, 2);
  assert.equal(hit('p\0', 'k', 3, 60, t0 + 60_000).count, 1, 'a new window starts at zero');
  // A key is its two parts joined: however it is split, it is one window.
  assert.equal(hit('p\0k', '', 3, 60, t0 + 60_001).count, 2);
  assert.equal(hit('p', '\0k', 3, 60, t0 + 60_002).count, 3);
  // Two windows under one lock, as a site's rate limit counts them.
  c.lock();
  const a = c.count('p\0', 'a', 1, 60, t0 + 60_003);
  const b = c.count('p\0', 'b', 1, 60, t0 + 60_003);
  c.unlock();
  assert.deepEqual([a.count, b.count], [1, 1]);
  assert.equal(hit('p\0', 'a', 1, 60, t0 + 60_004).over, 1);
});

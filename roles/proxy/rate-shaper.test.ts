import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRateShaper } from './rate-shaper.ts';

test('a sender that waits as told sends at the cap; caps never reject', () => {
  const shaper = createRateShaper();
  const site = { id: 's', maxSiteBps: 100_000, maxIpBps: null };
  let now = 0;
  let sent = 0;
  while (now < 10_000) {
    sent += 16_384;
    now += shaper.take(site, '192.0.2.1', 16_384, now);
  }
  assert.ok(Math.abs(sent / (now / 1000) - 100_000) < 5_000, `rate ${sent / (now / 1000)}`);
});

test('the per-IP cap applies per client; the site cap is shared', () => {
  const shaper = createRateShaper();
  const site = { id: 's', maxSiteBps: 1_000_000, maxIpBps: 10_000 };
  assert.ok(shaper.take(site, 'a', 20_000, 0) > 1000);
  assert.equal(shaper.take(site, 'b', 100, 0), 0);
  assert.equal(shaper.take({ id: 't', maxSiteBps: null, maxIpBps: null }, 'a', 1e9, 0), 0);
});

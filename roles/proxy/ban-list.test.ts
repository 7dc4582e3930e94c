import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createBanList, MAX_BAN_SECS, type Ban } from './ban-list.ts';
import { createRateLimit, createRateCounters } from './rate-limit.ts';
import type { RequestContext } from './request-context.ts';
import { SharedTable } from './shared-table.ts';

test('bans: a site ban or the global one, whichever ends last; expiry, doubling for repeat offenders capped at 24 h, removal', () => {
  const bans = createBanList();
  const t0 = 1_000_000;
  const b1 = bans.banOffender('s', '192.0.2.1', 600, t0) as Ban;
  assert.equal(b1.until - b1.since, 600_000);
  assert.equal(bans.active('s', '192.0.2.1', t0 + 1)?.reason, 'rate_limit');
  assert.equal(bans.active('other', '192.0.2.1', t0 + 1), undefined, 'automatic bans are per site');
  assert.equal(bans.active('s', '192.0.2.1', t0 + 600_000), undefined, 'expired');
  const b2 = bans.banOffender('s', '192.0.2.1', 600, t0 + 700_000) as Ban;
  assert.equal(b2.until - b2.since, 1_200_000, 'second offence doubles');
  let last = b2;
  for (let i = 0; i < 12; i++) last = bans.banOffender('s', '192.0.2.1', 600, last.until + 1) as Ban;
  assert.equal(last.until - last.since, MAX_BAN_SECS * 1000, 'capped at 24 h');
  const fresh = bans.banOffender('s', '192.0.2.1', 600, last.until + MAX_BAN_SECS * 1000 + 1) as Ban;
  assert.equal(fresh.until - fresh.since, 600_000, 'a day without bans forgets the strikes');
  bans.add('192.0.2.9', null, 60, 'admin', t0);
  assert.equal(bans.active('any-site', '192.0.2.9', t0 + 1)?.site, null);
  // Both a site ban and an every-site ban: the later end is the one in force (and Retry-After).
  bans.add('192.0.2.9', 'any-site', 30, 'admin', t0);
  assert.equal(bans.active('any-site', '192.0.2.9', t0 + 1)?.site, null);
  bans.add('192.0.2.9', 'any-site', 90, 'admin', t0);
  assert.equal(bans.active('any-site', '192.0.2.9', t0 + 1)?.site, 'any-site');
  assert.equal(bans.remove('192.0.2.9'), 0, 'the ban above had expired by Date.now()');
  bans.add('192.0.2.9', null, 60, 'admin');
  assert.equal(bans.list().length, 1);
  assert.equal(bans.remove('192.0.2.9'), 1);
  assert.equal(bans.list().length, 0);
});

test('an automatic ban is made once per offence, logged once with site, client IP, duration and offence count', () => {
  const lines: [Record<string, unknown>, string][] = [];
  const bans = createBanList(undefined, { warn: (obj: Record<string, unknown>, msg: string) => lines.push([obj, msg]) } as never);
  const t0 = 5_000_000;
  assert.ok(bans.banOffender('shop', '192.0.2.1', 600, t0));
  // A second worker's request that passed the ban check before the ban existed: no second strike.
  assert.equal(bans.banOffender('shop', '192.0.2.1', 600, t0 + 5), undefined);
  assert.equal((bans.banOffender('shop', '192.0.2.1', 600, t0 + 600_001) as Ban).until - (t0 + 600_001), 1_200_000, 'the next offence doubles once');
  assert.deepEqual(
    lines.map(([o, msg]) => [o['site'], o['client_ip'], o['duration_secs'], o['offence'], msg]),
    [
      ['shop', '192.0.2.1', 600, 1, 'client banned by the rate limiter'],
      ['shop', '192.0.2.1', 1200, 2, 'client banned by the rate limiter'],
    ],
  );
  // Bans through the API are logged by the API, not here.
  bans.add('192.0.2.2', null, 60, 'admin', t0);
  assert.equal(lines.length, 2);
});

test('a ban that the full shared table cannot hold is not reported as made', () => {
  // Eight slots hold six live entries.
  const bans = createBanList(SharedTable.create({ slots: 8 }));
  const made = Array.from({ length: 8 }, (_, i) => bans.add(`192.0.2.${i}`, null, 60, 'admin'));
  assert.equal(made.filter((b) => b !== undefined).length, 6);
  assert.equal(made[7], undefined);
  assert.equal(bans.active('shop', '192.0.2.7'), undefined);
  assert.equal(bans.list().length, 6);
});

test('the rate limiter bans at ban_after_violations and logs that ban only', () => {
  const lines: string[] = [];
  const bans = createBanList(undefined, { warn: (_o: unknown, msg: string) => lines.push(msg) } as never);
  const check = createRateLimit({
    siteId: 'shop',
    config: { enabled: true, per_ip: { requests: 1, window_secs: 3600 }, per_site: { requests: 1000, window_secs: 3600 }, action: 'block', ban_after_violations: 2, ban_duration_secs: 60 },
    challengeMode: 'off',
    counters: createRateCounters(),
    bans,
  }) as (ctx: RequestContext) => { kind: string; status?: number };
  const ctx = { clientIp: '198.51.100.4' } as RequestContext;
  assert.deepEqual([check(ctx).kind, check(ctx).status, check(ctx).status], ['allow', 429, 403]);
  assert.equal(bans.active('shop', '198.51.100.4')?.reason, 'rate_limit');
  // Requests that still reach the limiter (the ban check is a separate phase) ban nobody again.
  check(ctx);
  check(ctx);
  assert.deepEqual(lines, ['client banned by the rate limiter']);
});

test('a rate-limit ban starts the count of the banned IP afresh, on that site only', () => {
  const bans = createBanList();
  const counters = createRateCounters();
  const config = { enabled: true, per_ip: { requests: 2, window_secs: 3600 }, per_site: { requests: 1000, window_secs: 3600 }, action: 'block' as const, ban_after_violations: 2, ban_duration_secs: 1 };
  const limiter = (siteId: string): ((ctx: RequestContext) => { kind: string; status?: number }) =>
    createRateLimit({ siteId, config, challengeMode: 'off', counters, bans }) as (ctx: RequestContext) => { kind: string; status?: number };
  const shop = limiter('shop');
  const blog = limiter('blog');
  const ip = { clientIp: '198.51.100.5' } as RequestContext;
  const statuses = (check: (ctx: RequestContext) => { kind: string; status?: number }, n: number): (number | string)[] =>
    Array.from({ length: n }, () => check(ip).status ?? 'allow');
  assert.deepEqual(statuses(blog, 2), ['allow', 'allow']);
  assert.deepEqual(statuses(shop, 4), ['allow', 'allow', 429, 403]);
  assert.equal(bans.active('shop', ip.clientIp)?.reason, 'rate_limit');
  // The window that counted the flood is gone: a ban shorter than the window ends into a fresh
  // count instead of a doubled ban at the first request.
  assert.deepEqual(statuses(shop, 3), ['allow', 'allow', 429]);
  assert.equal(blog(ip).status, 429, 'the other site keeps its count');
});

test('lifting a ban forgets the strikes of its scope: the next ban starts at the base length again', () => {
  const bans = createBanList();
  const now = Date.now();
  const length = (b: Ban | undefined): number => ((b as Ban).until - (b as Ban).since) / 1000;
  const ip = '192.0.2.40';
  assert.equal(length(bans.banOffender('shop', ip, 60, now)), 60);
  assert.equal(length(bans.banOffender('blog', ip, 60, now)), 60);
  // Lifting another site's ban, or the every-site ban alone, leaves the shop strike.
  assert.equal(bans.remove(ip, 'blog'), 1);
  bans.add(ip, null, 60, 'admin', now);
  assert.equal(bans.remove(ip, null), 1);
  assert.equal(bans.remove(ip, 'shop'), 1);
  assert.equal(length(bans.banOffender('shop', ip, 60, now)), 60, 'the lifted shop ban took its strike with it');
  assert.equal(length(bans.banOffender('blog', ip, 60, now)), 60, 'the lifted blog ban took its strike with it');
  // Without a site: every ban of the IP and every strike.
  assert.equal(length(bans.banOffender('shop', ip, 60, now + 70_000)), 120);
  assert.equal(bans.remove(ip), 2);
  assert.deepEqual(bans.state().strikes, []);
  assert.equal(length(bans.banOffender('shop', ip, 60, now)), 60);
  // No ban to lift, nothing forgotten: the answer says nothing changed.
  const other = '192.0.2.41';
  bans.banOffender('shop', other, 1, now - 10_000);
  assert.equal(bans.remove(other), 0);
  assert.equal(bans.state().strikes.filter((s) => s.ip === other).length, 1);
});

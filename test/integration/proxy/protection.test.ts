/**
 * Protection checks of issue 8 items 1-3 (spec/3 §2.2 global_acl, §2.5 acl / rate_limit /
 * connections, §2.7 rule 5, §3 bans): each check alone, the order between them, a bounded flood
 * that ends in bans, ban doubling, the ban admin API, bans across a reload, and connection slots
 * given back after aborts and origin failures. Every site trusts 127.0.0.1 as a proxy, so the
 * test client names any client IP in X-Forwarded-For.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import type { Daemon } from '../hostkit-process.ts';
import { connectWs, startWsOrigin, type WsOrigin } from './websocket.ts';
import { api, DAY, freePort, makeRoot, protectedSite, QUIET_RATE, READONLY_TOKEN, request, startOrigin, startProxy, until, type Origin, type ProxyRoot, withBrowserHeaders } from './harness.ts';

let root: ProxyRoot;
let proxy: Daemon;
let origin: Origin;
let wsOrigin: WsOrigin;


const site = (id: string, protection: Record<string, unknown>, originUrl?: string): Record<string, unknown> => protectedSite(id, originUrl ?? origin.url, protection);

before(async () => {
  origin = await startOrigin();
  wsOrigin = await startWsOrigin();
  const dead = `http://127.0.0.1:${await freePort()}`;
  root = await makeRoot({
    sites: {
      'acl.yaml': site('acl', { acl: { blacklist: ['203.0.113.0/24', '2001:db8:bad::/48', '192.0.2.66'] }, rate_limit: { ...QUIET_RATE, per_ip: { requests: 2, window_secs: DAY } } }),
      'wl.yaml': site('wl', { acl: { whitelist: ['198.51.100.7', '2001:db8::/32'], blacklist: ['198.51.100.0/24', '2001:db8::/32'] } }),
      'conn.yaml': site('conn', { connections: { per_ip: 1, per_site: 2 } }),
      'tun.yaml': site('tun', { connections: { per_ip: 1, per_site: 0 } }, wsOrigin.url),
      'dead.yaml': site('dead', { connections: { per_ip: 1, per_site: 0 } }, dead),
      'rate.yaml': site('rate', { rate_limit: { per_ip: { requests: 5, window_secs: DAY }, per_site: { requests: 100_000, window_secs: DAY }, ban_after_violations: 3, ban_duration_secs: 1 } }),
      'flood.yaml': site('flood', { rate_limit: { per_ip: { requests: 10, window_secs: DAY }, per_site: { requests: 100_000, window_secs: DAY }, ban_after_violations: 5, ban_duration_secs: 600 } }),
      'psite.yaml': site('psite', { rate_limit: { per_ip: { requests: 100, window_secs: DAY }, per_site: { requests: 3, window_secs: DAY } } }),
      'chal.yaml': site('chal', { rate_limit: { ...QUIET_RATE, per_ip: { requests: 1, window_secs: DAY }, action: 'challenge' }, challenge: { mode: 'off' } }),
    },
  });
  proxy = await startProxy(root);
});

after(async () => {
  await proxy?.stop('SIGKILL');
  await origin?.close();
  await wsOrigin?.close();
});

async function hit(siteId: string, ip: string, path = '/'): Promise<{ status: number; retryAfter: string | undefined }> {
  const r = await request({ port: root.httpPort, host: `${siteId}.test`, path, headers: { 'x-forwarded-for': ip } });
  return { status: r.status, retryAfter: r.headers['retry-after'] as string | undefined };
}

/** The rule of the site's latest request event. */
async function lastRule(siteId: string): Promise<string | null> {
  const r = await api(root, 'GET', `/events/recent?site=${siteId}&limit=1`);
  return r.body.data.events[0]?.rule ?? null;
}

async function connections(siteId: string): Promise<number> {
  return (await api(root, 'GET', `/sites/${siteId}/usage`)).body.data.connections as number;
}

test('site ACL: blacklist with IPv4 and IPv6 CIDRs and a plain IP, on the resolved client IP', async () => {
  for (const ip of ['203.0.113.9', '2001:db8:bad::1', '192.0.2.66']) {
    assert.equal((await hit('acl', ip)).status, 403, ip);
    assert.equal(await lastRule('acl'), 'acl.site');
  }
  assert.equal((await hit('acl', '192.0.2.67')).status, 200, 'a plain IP is /32');
  assert.equal((await hit('acl', '2001:db8:bae::1')).status, 200);
});

test('site ACL: whitelist wins over blacklist, a non-empty whitelist denies the rest', async () => {
  assert.equal((await hit('wl', '198.51.100.7')).status, 200);
  assert.equal((await hit('wl', '2001:db8::42')).status, 200);
  assert.equal((await hit('wl', '198.51.100.8')).status, 403);
  assert.equal((await hit('wl', '192.0.2.1')).status, 403, 'not whitelisted');
  assert.equal(await lastRule('wl'), 'acl.site');
});

test('order: a rate-limited request from a blacklisted IP gets the ACL verdict', async () => {
  // per_ip is 2 on this site: the later requests are over it, but the ACL runs first.
  for (let i = 0; i < 4; i++) assert.equal((await hit('acl', '203.0.113.50')).status, 403);
  assert.equal(await lastRule('acl'), 'acl.site');
  // An allowed IP over the same limit meets the rate limiter.
  for (let i = 0; i < 2; i++) assert.equal((await hit('acl', '192.0.2.80')).status, 200);
  assert.equal((await hit('acl', '192.0.2.80')).status, 429);
  assert.equal(await lastRule('acl'), 'rate.per_ip');
});

test('order: the ban check runs before the site ACL, so a banned whitelisted IP is refused', async () => {
  const add = await api(root, 'POST', '/bans', { body: { ip: '198.51.100.7', duration_secs: 300, site: 'wl' } });
  assert.equal(add.status, 201);
  const r = await hit('wl', '198.51.100.7');
  assert.equal(r.status, 403);
  assert.ok(Number(r.retryAfter) > 290 && Number(r.retryAfter) <= 300, String(r.retryAfter));
  assert.equal(await lastRule('wl'), 'ban');
  assert.equal((await hit('acl', '198.51.100.7')).status, 200, 'a site ban leaves other sites alone');
  assert.equal((await api(root, 'DELETE', '/bans/198.51.100.7')).status, 200);
  assert.equal((await hit('wl', '198.51.100.7')).status, 200);
});

test('rate limit per IP: 429 then 403 with Retry-After, a ban at ban_after_violations, doubling for a repeat offender', async () => {
  const ip = '192.0.2.10';
  for (let i = 0; i < 5; i++) assert.equal((await hit('rate', ip)).status, 200);
  const first = await hit('rate', ip);
  assert.equal(first.status, 429);
  assert.ok(Number(first.retryAfter) >= 1 && Number(first.retryAfter) <= DAY, String(first.retryAfter));
  assert.equal(await lastRule('rate'), 'rate.per_ip');
  const second = await hit('rate', ip);
  assert.equal(second.status, 403, 'repeat hit in the window');
  assert.ok(second.retryAfter);
  // The third violation bans the IP for ban_duration_secs (1 s).
  assert.equal((await hit('rate', ip)).status, 403);
  assert.equal(await lastRule('rate'), 'rate.per_ip');
  assert.equal((await hit('rate', ip)).status, 403);
  assert.equal(await lastRule('rate'), 'ban');
  const bans = (await api(root, 'GET', '/bans')).body.data.bans as { ip: string; site: string; since: string; until: string; reason: string }[];
  const ban = bans.find((b) => b.ip === ip);
  assert.ok(ban);
  assert.equal(ban.site, 'rate');
  assert.equal(ban.reason, 'rate_limit');
  assert.equal(Date.parse(ban.until) - Date.parse(ban.since), 1000);
  assert.equal((await hit('rate', '192.0.2.11')).status, 200, 'other clients pass');
  // The ban (1 s) is shorter than the window (a day) that caused it, and it started the count
  // afresh: once it expires the client has its 5 requests again, not a doubled ban at once.
  await until('the ban to expire', async () => !(await api(root, 'GET', '/bans')).body.data.bans.some((b: { ip: string }) => b.ip === ip), 5000);
  for (let i = 0; i < 5; i++) assert.equal((await hit('rate', ip)).status, 200, `request ${i + 1} after the ban`);
  assert.deepEqual([(await hit('rate', ip)).status, (await hit('rate', ip)).status, (await hit('rate', ip)).status], [429, 403, 403]);
  // The third violation of the new count bans again, twice as long (the strike is remembered).
  const again = ((await api(root, 'GET', '/bans')).body.data.bans as { ip: string; since: string; until: string }[]).find((b) => b.ip === ip);
  assert.ok(again, 'banned again');
  assert.equal(Date.parse(again.until) - Date.parse(again.since), 2000);
  // Each automatic ban is logged once, with its offence count (the worker writes it).
  await until('both bans logged', () => (proxy.output().match(/"client_ip":"192\.0\.2\.10".*client banned by the rate limiter/g) ?? []).length === 2);
  assert.match(proxy.output(), /"level":"warn".*"site":"rate","client_ip":"192\.0\.2\.10","duration_secs":1,"offence":1,.*"msg":"client banned by the rate limiter"/);
  assert.match(proxy.output(), /"site":"rate","client_ip":"192\.0\.2\.10","duration_secs":2,"offence":2,/);
});

test('DELETE /bans/{ip} forgives: the next ban of the address is not doubled', async () => {
  const ip = '192.0.2.12';
  const flood = async (): Promise<{ since: string; until: string }> => {
    for (let i = 0; i < 5; i++) assert.equal((await hit('rate', ip)).status, 200);
    for (let i = 0; i < 3; i++) await hit('rate', ip);
    const ban = ((await api(root, 'GET', '/bans')).body.data.bans as { ip: string; since: string; until: string }[]).find((b) => b.ip === ip);
    assert.ok(ban, 'banned at the third violation');
    return ban;
  };
  await flood();
  const lifted = await api(root, 'DELETE', `/bans/${ip}?site=rate`);
  assert.deepEqual([lifted.status, lifted.body.data.removed], [200, 1]);
  const ban = await flood();
  assert.equal(Date.parse(ban.until) - Date.parse(ban.since), 1000, 'the base ban_duration_secs, not twice it');
});

test('rate limit per site: 429 with Retry-After whatever the client', async () => {
  for (let i = 0; i < 3; i++) assert.equal((await hit('psite', `192.0.2.${100 + i}`)).status, 200);
  const r = await hit('psite', '192.0.2.200');
  assert.equal(r.status, 429);
  assert.ok(r.retryAfter);
  assert.equal(await lastRule('psite'), 'rate.per_site');
  assert.equal((await hit('psite', '192.0.2.201')).status, 429, 'never 403: a site-wide surge is no one client\'s repeat');
});

test('action challenge with challenge.mode off: 429 with Retry-After, also for repeat hits', async () => {
  assert.equal((await hit('chal', '192.0.2.30')).status, 200);
  for (let i = 0; i < 3; i++) {
    const r = await hit('chal', '192.0.2.30');
    assert.equal(r.status, 429);
    assert.ok(r.retryAfter);
  }
  assert.equal(await lastRule('chal'), 'rate.per_ip');
});

test('a small flood from 20 client IPs: 429s, 403s and a ban for each, other clients unaffected', async () => {
  const ips = Array.from({ length: 20 }, (_, i) => `198.18.0.${i + 1}`);
  const counts = new Map<number, number>();
  // 15 rounds x 20 IPs = 300 requests, 20 at a time; per IP: 10 pass, 429, 403 x4 (the 5th violation bans).
  for (let round = 0; round < 15; round++) {
    const replies = await Promise.all(ips.map((ip) => hit('flood', ip)));
    for (const r of replies) counts.set(r.status, (counts.get(r.status) ?? 0) + 1);
  }
  assert.equal(counts.get(200), 200);
  assert.equal(counts.get(429), 20);
  assert.equal(counts.get(403), 80);
  const banned = ((await api(root, 'GET', '/bans')).body.data.bans as { ip: string; site: string }[]).filter((b) => b.site === 'flood');
  assert.deepEqual(banned.map((b) => b.ip).sort(), [...ips].sort());
  // The 5th violation (the last round) made the ban; from now on the ban check answers.
  assert.equal((await hit('flood', ips[0] as string)).status, 403);
  assert.equal(await lastRule('flood'), 'ban');
  assert.equal((await hit('flood', '198.18.1.1')).status, 200);
  // One log line per ban, however many requests the flood sent.
  await until('20 bans logged', () => (proxy.output().match(/"site":"flood".*client banned by the rate limiter/g) ?? []).length >= 20);
  assert.equal(proxy.output().match(/"site":"flood".*client banned by the rate limiter/g)?.length, 20);
});

test('admin API: ban list CRUD, validation and roles', async () => {
  const bad = await api(root, 'POST', '/bans', { body: { ip: 'not-an-ip', duration_secs: 60 } });
  assert.equal(bad.status, 400);
  assert.equal((await api(root, 'POST', '/bans', { body: { ip: '192.0.2.1', duration_secs: 0 } })).status, 400);
  assert.equal((await api(root, 'POST', '/bans', { body: { ip: '192.0.2.1', duration_secs: 60, site: 5 } })).status, 400);
  // Not site ids: an empty one was stored as the every-site ban, a NUL split the stored key.
  for (const notAnId of ['', 'a\u0000b', 'a b', 'x'.repeat(65)]) {
    const refused = await api(root, 'POST', '/bans', { body: { ip: '198.18.0.77', duration_secs: 60, site: notAnId } });
    assert.deepEqual([refused.status, refused.body.meta.code], [400, 'ERR_BAD_REQUEST'], JSON.stringify(notAnId));
  }
  assert.ok(!(await api(root, 'GET', '/bans')).body.data.bans.some((b: { ip: string }) => b.ip.includes('198.18.0.77')), 'nothing was stored');
  assert.equal((await hit('conn', '198.18.0.77')).status, 200);
  assert.equal((await api(root, 'POST', '/bans', { token: READONLY_TOKEN, body: { ip: '192.0.2.1', duration_secs: 60 } })).status, 403);
  const add = await api(root, 'POST', '/bans', { body: { ip: '2001:db8::99', duration_secs: 120 } });
  assert.equal(add.status, 201);
  assert.equal(add.body.data.site, null);
  assert.equal(add.body.data.reason, 'admin');
  // A ban with no site applies to every site.
  assert.equal((await hit('acl', '2001:db8::99')).status, 403);
  assert.equal((await hit('conn', '2001:db8::99')).status, 403);
  assert.equal(await lastRule('conn'), 'ban');
  const list = await api(root, 'GET', '/bans', { token: READONLY_TOKEN });
  assert.equal(list.status, 200);
  assert.ok(list.body.data.bans.some((b: { ip: string; remaining_secs: number }) => b.ip === '2001:db8::99' && b.remaining_secs > 100));
  assert.equal((await api(root, 'DELETE', '/bans/2001:db8::99', { token: READONLY_TOKEN })).status, 403);
  for (const query of ['?site=conn&site=other', '?site=no%20site']) {
    const twice = await api(root, 'DELETE', `/bans/2001:db8::99${query}`);
    assert.deepEqual([twice.status, twice.body.meta.code], [400, 'ERR_BAD_REQUEST'], `${query} is a bad request, not "no ban"`);
  }
  const del = await api(root, 'DELETE', '/bans/2001:db8::99');
  assert.equal(del.status, 200);
  assert.equal(del.body.data.removed, 1);
  assert.equal((await api(root, 'DELETE', '/bans/2001:db8::99')).status, 404);
  assert.equal((await hit('conn', '2001:db8::99')).status, 200);
});

test('admin API: a ban written in any spelling of an address applies to the client and is lifted by either spelling', async () => {
  const add = await api(root, 'POST', '/bans', { body: { ip: ' 2001:DB8:0::1 ', duration_secs: 600, site: 'conn' } });
  assert.equal(add.status, 201);
  assert.equal(add.body.data.ip, '2001:db8::1', 'stored and shown in the canonical form');
  assert.equal((await hit('conn', '2001:db8::1')).status, 403);
  assert.equal((await hit('conn', '2001:0db8::0001')).status, 403, 'whatever spelling the upstream proxy used');
  assert.equal(await lastRule('conn'), 'ban');
  const del = await api(root, 'DELETE', '/bans/2001:db8:0:0::1');
  assert.deepEqual([del.status, del.body.data.ip, del.body.data.removed], [200, '2001:db8::1', 1]);
  assert.equal((await hit('conn', '2001:db8::1')).status, 200);
  // An IPv4-mapped address is the IPv4 client, as the ACLs see it.
  const mapped = await api(root, 'POST', '/bans', { body: { ip: '::ffff:192.0.2.9', duration_secs: 600 } });
  assert.equal(mapped.body.data.ip, '192.0.2.9');
  assert.equal((await hit('conn', '192.0.2.9')).status, 403);
  assert.equal((await api(root, 'DELETE', '/bans/192.0.2.9')).body.data.removed, 1);
  assert.equal((await api(root, 'DELETE', '/bans/not-an-ip')).status, 400);
});

test('bans and rate counters survive a reload', async () => {
  await api(root, 'POST', '/bans', { body: { ip: '192.0.2.55', duration_secs: 300, site: 'acl' } });
  const before = (await api(root, 'GET', '/health')).body.data.generation as number;
  const reload = await api(root, 'POST', '/reload');
  assert.equal(reload.status, 200);
  assert.ok(reload.body.data.generation > before);
  assert.equal((await hit('acl', '192.0.2.55')).status, 403);
  assert.equal(await lastRule('acl'), 'ban');
  // 192.0.2.80 used its 2 requests before the reload.
  assert.equal((await hit('acl', '192.0.2.80')).status, 403);
  assert.equal(await lastRule('acl'), 'rate.per_ip');
  await api(root, 'DELETE', '/bans/192.0.2.55');
});

/** Starts a request and resolves once the proxy has answered... or never: `abort` cuts it. */
function openSlow(siteId: string, ip: string, ms: number): { done: Promise<number>; abort: () => void } {
  const req = httpRequest({ host: '127.0.0.1', port: root.httpPort, path: `/slow/${ms}`, headers: withBrowserHeaders({ host: `${siteId}.test`, 'x-forwarded-for': ip }), agent: false });
  const done = new Promise<number>((resolve) => {
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', () => resolve(-1));
  });
  req.end();
  return { done, abort: () => req.destroy() };
}

test('connection limits: conn.per_ip (429) and conn.per_site (503) on in-flight requests, slots back after responses', async () => {
  const a = openSlow('conn', '192.0.2.1', 700);
  await until('the first request to hold a slot', async () => (await connections('conn')) === 1);
  const sameIp = await hit('conn', '192.0.2.1');
  assert.equal(sameIp.status, 429);
  assert.equal(sameIp.retryAfter, '1');
  assert.equal(await lastRule('conn'), 'conn.per_ip');
  const b = openSlow('conn', '192.0.2.2', 700);
  await until('two slots', async () => (await connections('conn')) === 2);
  const full = await hit('conn', '192.0.2.3');
  assert.equal(full.status, 503);
  assert.equal(await lastRule('conn'), 'conn.per_site');
  assert.deepEqual(await Promise.all([a.done, b.done]), [200, 200]);
  await until('the slots to be given back', async () => (await connections('conn')) === 0);
  assert.equal((await hit('conn', '192.0.2.1')).status, 200);
});

test('connection slots are given back after client aborts and origin failures', async () => {
  const aborted = Array.from({ length: 2 }, (_, i) => openSlow('conn', `192.0.2.${40 + i}`, 5000));
  await until('two slots', async () => (await connections('conn')) === 2);
  for (const a of aborted) a.abort();
  await until('the aborted requests to give their slots back', async () => (await connections('conn')) === 0);
  assert.equal((await hit('conn', '192.0.2.40')).status, 200);
  // per_ip 1 on a site whose origin is down: each 502 gives its slot back, so none becomes a 429.
  for (let i = 0; i < 3; i++) assert.equal((await hit('dead', '192.0.2.41')).status, 502);
  assert.equal(await connections('dead'), 0);
});

test('a live WebSocket tunnel holds its slot until it ends', async () => {
  const ws = await connectWs({ port: root.httpPort, host: 'tun.test', headers: { 'x-forwarded-for': '192.0.2.60' } });
  assert.equal(ws.status, 101);
  await assert.rejects(connectWs({ port: root.httpPort, host: 'tun.test', headers: { 'x-forwarded-for': '192.0.2.60' } }), /429/);
  assert.equal((await hit('tun', '192.0.2.60')).status, 429);
  assert.equal(await lastRule('tun'), 'conn.per_ip');
  assert.equal((await hit('tun', '192.0.2.61')).status, 200, 'another client has its own slot');
  ws.socket.destroy();
  await until('the tunnel to give its slot back', async () => (await connections('tun')) === 0);
  assert.equal((await hit('tun', '192.0.2.60')).status, 200);
});

test('global ACL: on the TCP peer before routing, whitelist wins', async () => {
  // Last: it closes the proxy to the test client. The blacklist covers the peer (127.0.0.1).
  root.writeGlobal({ global_acl: { blacklist: ['127.0.0.0/8', '::1'] } });
  await api(root, 'POST', '/reload');
  const r = await request({ port: root.httpPort, host: 'nowhere.test', headers: { 'x-forwarded-for': '192.0.2.1' } });
  assert.equal(r.status, 403, 'before routing: an unknown host gets 403, not 421');
  assert.equal((await hit('acl', '192.0.2.90')).status, 403, 'X-Forwarded-For does not matter');
  // Refused before routing: the event has no site.
  const unrouted = await api(root, 'GET', '/events/recent?site=-&limit=1');
  assert.equal(unrouted.body.data.events[0].host, 'acl.test');
  assert.equal(unrouted.body.data.events[0].client_ip, '127.0.0.1', 'the peer: no site decided the client IP');
  assert.equal(unrouted.body.data.events[0].rule, 'acl.global');
  root.writeGlobal({ global_acl: { blacklist: ['127.0.0.0/8'], whitelist: ['127.0.0.1'] } });
  await api(root, 'POST', '/reload');
  assert.equal((await hit('acl', '192.0.2.91')).status, 200, 'whitelisted peer');
  root.writeGlobal({ global_acl: { whitelist: ['10.0.0.0/8'] } });
  await api(root, 'POST', '/reload');
  assert.equal((await hit('acl', '192.0.2.92')).status, 403, 'a non-empty whitelist denies the rest');
});

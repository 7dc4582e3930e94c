/**
 * The proof-of-work challenge over real HTTP (spec/3 §2.5 `challenge` and "Challenge flow", §3,
 * §4.1): the page and its headers, the verify endpoint (solved in Node here, as the page's worker
 * does), the clearance cookie and what it is bound to, mode on / auto / off, clearance skipping
 * challenges but never blocks, and the secret in data/ (mode 0600) across a restart and after its
 * deletion. Every site trusts 127.0.0.1, so the test names client IPs in X-Forwarded-For.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Daemon } from '../hostkit-process.ts';
import { api, DAY, makeRoot, protectedSite, QUIET_RATE, request, startOrigin, startProxy, type Origin, type ProxyRoot, type Reply } from './harness.ts';

let root: ProxyRoot;
let proxy: Daemon;
let origin: Origin;

const HTML = 'text/html,application/xhtml+xml,*/*;q=0.8';
const VERIFY = '/__osc_challenge/verify';

// The test client sends no browser headers: bot scoring is on only where a test is about it.
const site = (id: string, protection: Record<string, unknown>): Record<string, unknown> => protectedSite(id, origin.url, { bot: { enabled: false }, ...protection });

before(async () => {
  origin = await startOrigin();
  root = await makeRoot({
    sites: {
      'on.yaml': site('on', { challenge: { mode: 'on', difficulty: 3, ttl_secs: 60 } }),
      'on2.yaml': site('on2', { challenge: { mode: 'on', difficulty: 3 } }),
      'big.yaml': site('big', { challenge: { mode: 'on', difficulty: 40 } }),
      'auto.yaml': site('auto', {
        challenge: { mode: 'auto', difficulty: 2 },
        rate_limit: { ...QUIET_RATE, per_ip: { requests: 2, window_secs: DAY }, action: 'challenge' },
        request_limits: { blocked_path_prefixes: ['/admin'] },
      }),
      'bot.yaml': site('bot', { challenge: { mode: 'auto', difficulty: 2 }, bot: { enabled: true } }),
      'botoff.yaml': site('botoff', { challenge: { mode: 'off' }, bot: { enabled: true } }),
      'off.yaml': site('off', { challenge: { mode: 'off' }, rate_limit: { ...QUIET_RATE, per_ip: { requests: 1, window_secs: DAY }, action: 'challenge' } }),
    },
  });
  proxy = await startProxy(root);
});

after(async () => {
  await proxy?.stop('SIGKILL');
  await origin?.close();
});

function get(siteId: string, opts: { ip?: string; cookie?: string; accept?: string; path?: string; ua?: string } = {}): Promise<Reply> {
  const headers: Record<string, string> = { 'x-forwarded-for': opts.ip ?? '192.0.2.1', accept: opts.accept ?? HTML };
  if (opts.cookie) headers['cookie'] = opts.cookie;
  if (opts.ua) headers['user-agent'] = opts.ua;
  return request({ port: root.httpPort, host: `${siteId}.test`, path: opts.path ?? '/', headers });
}

function post(siteId: string, body: unknown, ip = '192.0.2.1'): Promise<Reply> {
  return request({ port: root.httpPort, host: `${siteId}.test`, path: VERIFY, method: 'POST', headers: { 'x-forwarded-for': ip, 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

function seedOf(page: Reply): string {
  const m = /"seed":"([0-9a-f]{64})"/.exec(page.text);
  assert.ok(m, `no seed in the page: ${page.text.slice(0, 200)}`);
  return m[1] as string;
}

/** What the page's worker does. */
function solve(seed: string, difficulty: number): string {
  const zeros = '0'.repeat(difficulty);
  for (let n = 0; ; n++) if (createHash('sha256').update(`${seed}${n}`).digest('hex').startsWith(zeros)) return String(n);
}

/** Gets a page, solves it, posts the answer; returns the verify reply and the cookie pair. */
async function clear(siteId: string, difficulty: number, ip = '192.0.2.1'): Promise<{ reply: Reply; cookie: string }> {
  const page = await get(siteId, { ip });
  assert.equal(page.status, 403);
  const seed = seedOf(page);
  const reply = await post(siteId, { seed, nonce: solve(seed, difficulty) }, ip);
  const setCookie = reply.headers['set-cookie']?.[0] ?? '';
  return { reply, cookie: setCookie.split(';')[0] as string };
}

async function lastRule(siteId: string): Promise<string | null> {
  const r = await api(root, 'GET', `/events/recent?site=${siteId}&limit=1`);
  return r.body.data.events[0]?.rule ?? null;
}

test('mode on: the page is a 403 with no-store, a strict CSP with a nonce, no external resources', async () => {
  const r = await get('on');
  assert.equal(r.status, 403);
  assert.equal(r.headers['content-type'], 'text/html; charset=utf-8');
  assert.equal(r.headers['cache-control'], 'no-store');
  assert.equal(r.headers['x-osc-challenge'], 'required');
  const csp = String(r.headers['content-security-policy']);
  const nonce = /script-src 'nonce-([A-Za-z0-9+/=]+)'/.exec(csp)?.[1];
  assert.ok(nonce, csp);
  assert.match(csp, /default-src 'none'/);
  assert.match(csp, /worker-src blob:/);
  assert.ok(r.text.includes(`<script nonce="${nonce}">`));
  assert.doesNotMatch(r.text, /\b(src|href)=/, 'nothing loaded from elsewhere');
  assert.match(r.text, /"difficulty":3/);
  assert.equal(await lastRule('on'), 'challenge');
  assert.equal(origin.seen.length, 0);
  // Each page has its own seed and CSP nonce.
  const again = await get('on');
  assert.notEqual(seedOf(again), seedOf(r));
  assert.notEqual(again.headers['content-security-policy'], csp);
});

test('clients that do not accept HTML get a plain 403', async () => {
  for (const accept of ['application/json', '*/*']) {
    const r = await get('on', { accept });
    assert.equal(r.status, 403);
    assert.equal(r.headers['content-type'], 'text/plain; charset=utf-8');
    assert.equal(r.headers['x-osc-challenge'], 'required');
  }
});

test('solving gives a clearance cookie bound to site and client IP; the origin is reached with it', async () => {
  const { reply, cookie } = await clear('on', 3);
  assert.equal(reply.status, 200, reply.text);
  assert.deepEqual(JSON.parse(reply.text), { ok: true, ttl_secs: 60 });
  const setCookie = String(reply.headers['set-cookie']?.[0]);
  assert.match(setCookie, /^osc_clear=[0-9]+\.[0-9a-f]{32}; Path=\/; Max-Age=60; HttpOnly; SameSite=Lax$/);
  assert.equal(await lastRule('on'), 'challenge.passed');

  const through = await get('on', { cookie, path: '/landing?x=1' });
  assert.equal(through.status, 200);
  assert.equal(JSON.parse(through.text).url, '/landing?x=1');
  assert.equal((await get('on', { cookie, accept: '*/*' })).status, 200, 'clearance is not about Accept');
  assert.equal((await get('on', { cookie, ip: '192.0.2.2' })).status, 403, 'another client IP');
  assert.equal((await get('on2', { cookie })).status, 403, 'another site');
  assert.equal((await get('on', { cookie: 'osc_clear=99999999999.00000000000000000000000000000000' })).status, 403, 'forged');
});

test('verify refuses reused seeds, wrong nonces, foreign and malformed seeds, other methods', async () => {
  const seed = seedOf(await get('on'));
  const nonce = solve(seed, 3);
  let wrong = 0;
  while (createHash('sha256').update(`${seed}${wrong}`).digest('hex').startsWith('000')) wrong++;
  const bad = await post('on', { seed, nonce: String(wrong) });
  assert.equal(bad.status, 403);
  assert.deepEqual(JSON.parse(bad.text), { ok: false, error: 'wrong_nonce' });
  assert.equal(bad.headers['set-cookie'], undefined);
  assert.equal(await lastRule('on'), 'challenge.failed');
  assert.equal((await post('on', { seed, nonce })).status, 200);
  assert.equal(JSON.parse((await post('on', { seed, nonce })).text).error, 'reused');

  const foreign = seedOf(await get('on2'));
  assert.equal(JSON.parse((await post('on', { seed: foreign, nonce: solve(foreign, 3) })).text).error, 'bad_tag', 'a seed of another site');
  assert.equal(JSON.parse((await post('on', { seed: 'ab'.repeat(32), nonce: '1' })).text).error, 'bad_tag');
  assert.equal(JSON.parse((await post('on', 'not an object')).text).error, 'malformed');
  const raw = await request({ port: root.httpPort, host: 'on.test', path: VERIFY, method: 'POST', headers: { 'x-forwarded-for': '192.0.2.1' }, body: '{oops' });
  assert.equal(JSON.parse(raw.text).error, 'malformed');
  const huge = await request({ port: root.httpPort, host: 'on.test', path: VERIFY, method: 'POST', headers: { 'x-forwarded-for': '192.0.2.1' }, body: 'x'.repeat(5000) });
  assert.equal(huge.status, 413);
  const getVerify = await get('on', { path: VERIFY });
  assert.equal(getVerify.status, 405);
  assert.equal(getVerify.headers['allow'], 'POST');
});

test('difficulty is capped at 16 in the page', async () => {
  assert.match((await get('big')).text, /"difficulty":16/);
});

test('mode auto: a rate-limit challenge serves the page; with clearance the limit no longer challenges, blocks still apply', async () => {
  const ip = '198.51.100.9';
  assert.equal((await get('auto', { ip })).status, 200);
  assert.equal((await get('auto', { ip })).status, 200);
  const page = await get('auto', { ip });
  assert.equal(page.status, 403);
  assert.match(page.text, /"difficulty":2/);
  assert.equal(await lastRule('auto'), 'rate.per_ip');
  const seed = seedOf(page);
  const ok = await post('auto', { seed, nonce: solve(seed, 2) }, ip);
  assert.equal(ok.status, 200, 'the verify POST passes its own rate-limit challenge');
  const cookie = String(ok.headers['set-cookie']?.[0]).split(';')[0] as string;
  for (let i = 0; i < 3; i++) assert.equal((await get('auto', { ip, cookie })).status, 200);
  const blocked = await get('auto', { ip, cookie, path: '/admin' });
  assert.equal(blocked.status, 403);
  assert.equal(blocked.headers['x-osc-challenge'], undefined, 'a block, not a challenge');
  assert.equal(await lastRule('auto'), 'request.path_blocked');
  // A request without the cookie from the same IP is still over the limit.
  assert.equal((await get('auto', { ip })).status, 403);
});

test('mode auto: a bot-score challenge serves the page, clearance skips it, a WAF block stays a block', async () => {
  const ip = '198.51.100.30';
  // A command-line tool's user agent scores over challenge_score (50), under block_score (80).
  const page = await get('bot', { ip, ua: 'curl/8.5.0' });
  assert.equal(page.status, 403);
  assert.equal(page.headers['x-osc-challenge'], 'required');
  assert.equal(await lastRule('bot'), 'bot');
  const seed = seedOf(page);
  const ok = await post('bot', { seed, nonce: solve(seed, 2) }, ip);
  assert.equal(ok.status, 200);
  const cookie = String(ok.headers['set-cookie']?.[0]).split(';')[0] as string;
  assert.equal((await get('bot', { ip, ua: 'curl/8.5.0', cookie })).status, 200, 'cleared: the bot challenge is skipped');
  const sqli = await get('bot', { ip, ua: 'curl/8.5.0', cookie, path: "/item?id=1'%20OR%20'1'='1" });
  assert.equal(sqli.status, 403);
  assert.equal(sqli.headers['x-osc-challenge'], undefined);
  assert.equal(await lastRule('bot'), 'sqli');
  // mode off: the same request is a plain block.
  const off = await get('botoff', { ip, ua: 'curl/8.5.0' });
  assert.equal(off.status, 403);
  assert.equal(off.headers['x-osc-challenge'], undefined);
  assert.equal(off.headers['content-type'], 'text/plain; charset=utf-8');
  assert.equal(await lastRule('botoff'), 'bot');
});

test('mode off: a rate-limit challenge is a 429 and the verify path belongs to the origin', async () => {
  const ip = '198.51.100.10';
  assert.equal((await get('off', { ip })).status, 200);
  assert.equal((await get('off', { ip })).status, 429);
  const r = await post('off', { seed: 'x', nonce: 'y' }, '198.51.100.11');
  assert.equal(r.status, 200);
  assert.equal(JSON.parse(r.text).url, VERIFY);
});

test('the secret is data/challenge.key with mode 0600; clearances survive a restart, not its deletion', async () => {
  const file = join(root.dir, 'data', 'challenge.key');
  assert.equal(statSync(file).mode & 0o777, 0o600);
  const { cookie } = await clear('on', 3, '192.0.2.77');
  assert.equal((await get('on', { cookie, ip: '192.0.2.77' })).status, 200);
  await proxy.stop();
  proxy = await startProxy(root);
  assert.equal((await get('on', { cookie, ip: '192.0.2.77' })).status, 200, 'still cleared after a restart');
  await proxy.stop();
  rmSync(file);
  proxy = await startProxy(root);
  assert.equal(statSync(file).mode & 0o777, 0o600, 'a new secret');
  assert.equal((await get('on', { cookie, ip: '192.0.2.77' })).status, 403, 'the old clearance is gone');
  // Deleting it while running applies at the next reload.
  const { cookie: fresh } = await clear('on', 3, '192.0.2.78');
  assert.equal((await get('on', { cookie: fresh, ip: '192.0.2.78' })).status, 200);
  rmSync(file);
  assert.equal((await api(root, 'POST', '/reload')).status, 200);
  assert.equal((await get('on', { cookie: fresh, ip: '192.0.2.78' })).status, 403);
});

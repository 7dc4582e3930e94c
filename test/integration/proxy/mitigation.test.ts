/**
 * Auto-mitigation under a flood (spec/3 §2.5 `auto_mitigation`, §3 "proxy site", §6.1): a burst
 * above a low `threshold_rps` puts a `mitigation` enter event in the site's events, the site's
 * rate limits shrink by `factor` (so a client gets 429, 403 and then a ban far below the normal
 * limit), a reload keeps the mitigation, and after `duration_secs` without another hot second the
 * exit event comes and the normal limits are back. The site trusts 127.0.0.1, so the test names
 * client IPs in X-Forwarded-For.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Daemon } from '../hostkit-process.ts';
import { ADMIN_TOKEN, api, DAY, makeRoot, request, startOrigin, startProxy, until, type Origin, type ProxyRoot } from './harness.ts';

let root: ProxyRoot;
let proxy: Daemon;
let origin: Origin;

// per_ip 40 a day, 4 while mitigating (factor 0.1).
const PER_IP = 40;
const FACTOR = 0.1;
const DURATION_SECS = 3;

before(async () => {
  origin = await startOrigin();
  root = await makeRoot({
    sites: {
      'flood.yaml': {
        id: 'flood',
        hostnames: ['flood.test'],
        origin: { url: origin.url },
        client_ip: { trusted_proxies: ['127.0.0.1'], forward_mode: 'x_forwarded_for' },
        protection: {
          // The test client sends no browser headers.
          bot: { enabled: false },
          rate_limit: { per_ip: { requests: PER_IP, window_secs: DAY }, per_site: { requests: 100_000, window_secs: DAY }, ban_after_violations: 2, ban_duration_secs: 600 },
          auto_mitigation: { enabled: true, threshold_rps: 20, duration_secs: DURATION_SECS, factor: FACTOR },
        },
      },
    },
  });
  proxy = await startProxy(root);
});

after(async () => {
  await proxy?.stop('SIGKILL');
  await origin?.close();
});

async function hit(ip: string): Promise<number> {
  return (await request({ port: root.httpPort, host: 'flood.test', headers: { 'x-forwarded-for': ip } })).status;
}

interface MitigationEvent {
  kind: 'mitigation';
  state: 'enter' | 'exit';
  site: string;
  rps: number;
  threshold_rps: number;
  factor: number;
  since: string;
  until: string;
}

async function mitigationEvents(): Promise<MitigationEvent[]> {
  const r = await api(root, 'GET', '/events/recent?site=flood&limit=5000');
  return (r.body.data.events as { kind: string }[]).filter((e): e is MitigationEvent => e.kind === 'mitigation').reverse();
}

async function lastRule(): Promise<string | null> {
  const r = await api(root, 'GET', '/events/recent?site=flood&limit=1');
  return r.body.data.events[0]?.rule ?? null;
}

test('a flood over threshold_rps tightens the limits (429s, then a ban), survives a reload, and ends after duration_secs', async () => {
  // Below the threshold: nothing happens.
  for (let i = 0; i < 5; i++) assert.equal(await hit('192.0.2.1'), 200);
  assert.deepEqual(await mitigationEvents(), []);

  // 80 requests at once from 80 addresses: each IP is far under its limit, the site is not.
  const flood = await Promise.all(Array.from({ length: 80 }, (_, i) => hit(`10.9.${i >> 8}.${i & 255}`)));
  assert.ok(flood.every((s) => s === 200), `the flood itself is under every per-IP limit: ${flood.join(',')}`);
  await until('the mitigation enter event', async () => (await mitigationEvents()).length > 0);
  const [enter] = await mitigationEvents();
  assert.equal(enter?.state, 'enter');
  assert.equal(enter?.threshold_rps, 20);
  assert.equal(enter?.factor, FACTOR);
  assert.ok((enter?.rps ?? 0) > 20, String(enter?.rps));
  assert.match(proxy.output(), /"msg":"mitigation: site over its RPS threshold, rate limits tightened"/);
  const metrics = await request({ port: root.adminPort, path: '/metrics', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  assert.match(metrics.text, /osproxy_mitigating\{site="flood"\} 1/);

  // A reload compiles a new generation; the mitigation lives in the services and carries on.
  assert.equal((await api(root, 'POST', '/reload')).status, 200);

  // per_ip is 40 * 0.1 = 4 now: the 5th request is 429, the 6th 403 and the second violation bans.
  const ip = '198.51.100.20';
  for (let i = 0; i < 4; i++) assert.equal(await hit(ip), 200, `request ${i + 1}`);
  assert.equal(await hit(ip), 429);
  assert.equal(await lastRule(), 'rate.per_ip');
  assert.equal(await hit(ip), 403);
  assert.equal(await hit(ip), 403);
  assert.equal(await lastRule(), 'ban', 'banned after ban_after_violations');
  const bans = await api(root, 'GET', '/bans');
  assert.ok(JSON.stringify(bans.body.data).includes(ip), JSON.stringify(bans.body.data));

  // No more hot seconds: the exit event comes duration_secs after the last one.
  await until('the mitigation exit event', async () => (await mitigationEvents()).length > 1, (DURATION_SECS + 5) * 1000);
  const events = await mitigationEvents();
  assert.deepEqual(events.map((e) => e.state), ['enter', 'exit']);
  const exit = events[1] as MitigationEvent;
  const lasted = Date.parse(exit.until) - Date.parse(exit.since);
  assert.ok(lasted >= DURATION_SECS * 1000 && lasted < (DURATION_SECS + 3) * 1000, `lasted ${lasted} ms`);
  assert.match(proxy.output(), /"msg":"mitigation ended: rate limits restored"/);

  // The normal limit is back: a fresh client gets well past 4 requests.
  for (let i = 0; i < 10; i++) assert.equal(await hit('198.51.100.21'), 200, `request ${i + 1} after the exit`);
  assert.equal(await hit(ip), 403, 'the ban outlives the mitigation');
});

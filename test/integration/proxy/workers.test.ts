/**
 * Issue 7 item 10: the proxy serves from several worker threads (global `workers`, each listener
 * bound by every worker with SO_REUSEPORT) and every counter stays exact across them: quota
 * bytes, per-site rate limits, connection slots, bans. Four workers on this 2-core machine, and
 * bursts of concurrent fresh connections, so the kernel spreads requests over the workers and
 * they race for the same counters.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { runHostkit, type Daemon } from '../hostkit-process.ts';
import { ADMIN_TOKEN, api, DAY, makeRoot, protectedSite, QUIET_RATE, request, startOrigin, startProxy, until, type Origin, type ProxyRoot } from './harness.ts';

const WORKERS = 4;

let root: ProxyRoot;
let proxy: Daemon;
let origin: Origin;

const site = (id: string, extra: Record<string, unknown> = {}, protection: Record<string, unknown> = {}): Record<string, unknown> => ({ ...protectedSite(id, origin.url, protection), ...extra });

before(async () => {
  origin = await startOrigin();
  root = await makeRoot({
    global: { workers: WORKERS, log_level: 'info' },
    sites: {
      'count.yaml': site('count', { bandwidth: { monthly_quota_bytes: 1_000_000_000_000 } }, { rate_limit: { ...QUIET_RATE, per_site: { requests: 300, window_secs: DAY } } }),
      'conn.yaml': site('conn', {}, { connections: { per_ip: 0, per_site: 5 } }),
      'spread.yaml': site('spread'),
      'ban.yaml': site('ban', {}, { rate_limit: { ...QUIET_RATE, per_ip: { requests: 10, window_secs: DAY }, ban_after_violations: 5, ban_duration_secs: 600 } }),
    },
  });
  proxy = await startProxy(root);
});

after(async () => {
  await proxy?.stop('SIGKILL');
  await origin?.close();
});

/** `n` requests, `concurrency` at a time, each on its own connection; resolves with their statuses. */
async function burst(n: number, concurrency: number, make: (i: number) => Promise<{ status: number }>): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < n; i += concurrency) {
    const batch = await Promise.all(Array.from({ length: Math.min(concurrency, n - i) }, (_, k) => make(i + k)));
    statuses.push(...batch.map((r) => r.status));
  }
  return statuses;
}

const countOf = (statuses: number[], status: number): number => statuses.filter((s) => s === status).length;

async function workerInFlight(): Promise<number[]> {
  const r = await fetch(`http://127.0.0.1:${root.adminPort}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  const text = await r.text();
  return [...text.matchAll(/^osproxy_worker_in_flight_requests\{worker="([0-9]+)"\} ([0-9]+)$/gm)].map((m) => Number(m[2]));
}

test('the proxy starts the configured number of workers, and concurrent requests land on several of them', async () => {
  assert.match(proxy.output(), new RegExp(`"workers":${WORKERS}[,}].*"msg":"data-plane workers listening"`));
  assert.equal((await workerInFlight()).length, WORKERS);
  const held = Array.from({ length: 40 }, () => request({ port: root.httpPort, host: 'spread.test', path: '/slow/1500' }));
  let busy: number[] = [];
  await until('the 40 slow requests to be in flight', async () => (busy = await workerInFlight()).reduce((a, b) => a + b, 0) === 40, 5_000);
  assert.ok(busy.filter((n) => n > 0).length >= 2, `in flight per worker: ${busy.join(', ')}`);
  for (const r of await Promise.all(held)) assert.equal(r.status, 200);
  assert.deepEqual(await workerInFlight(), new Array<number>(WORKERS).fill(0), 'every slot is given back');
});

test('a per-site rate limit and the quota counter are exact across workers', async () => {
  const statuses = await burst(400, 50, (i) => request({ port: root.httpPort, host: 'count.test', path: `/bytes/1000?i=${i}`, headers: { 'x-forwarded-for': `198.51.100.${i % 250}` } }));
  assert.equal(countOf(statuses, 200), 300, 'exactly per_site.requests pass');
  assert.equal(countOf(statuses, 429), 100);
  const events = (await api(root, 'GET', '/events/recent?site=count&limit=1000')).body.data.events as { status: number; bytes_in: number; bytes_out: number }[];
  assert.equal(events.length, 400, 'one event per request, from every worker');
  const counted = events.reduce((sum, e) => sum + e.bytes_in + e.bytes_out, 0);
  const usage = (await api(root, 'GET', '/sites/count/usage')).body.data as { bytes: number };
  assert.equal(usage.bytes, counted, 'the quota holds every byte every worker moved');
  assert.ok(usage.bytes >= 300 * 1000);
});

test('connection slots are exact across workers: per_site 5 admits exactly 5 of 20 concurrent requests', async () => {
  const statuses = await Promise.all(Array.from({ length: 20 }, () => request({ port: root.httpPort, host: 'conn.test', path: '/slow/1500' }).then((r) => r.status)));
  assert.equal(countOf(statuses, 200), 5);
  assert.equal(countOf(statuses, 503), 15);
  assert.equal((await api(root, 'GET', '/sites/conn/usage')).body.data.connections, 0, 'every slot is back');
});

test('a flood from one IP over every worker: exactly per_ip.requests pass, then a ban every worker applies', async () => {
  const statuses = await burst(60, 20, () => request({ port: root.httpPort, host: 'ban.test', path: '/x', headers: { 'x-forwarded-for': '203.0.113.50' } }));
  assert.equal(countOf(statuses, 200), 10);
  const bans = (await api(root, 'GET', '/bans')).body.data.bans as { ip: string; site: string }[];
  assert.deepEqual(bans.filter((b) => b.ip === '203.0.113.50').map((b) => b.site), ['ban']);
  const after = await burst(20, 20, () => request({ port: root.httpPort, host: 'ban.test', path: '/x', headers: { 'x-forwarded-for': '203.0.113.50' } }));
  assert.deepEqual([...new Set(after)], [403], 'banned on every worker');
  const events = (await api(root, 'GET', '/events/recent?site=ban&limit=20')).body.data.events as { rule: string | null }[];
  assert.deepEqual([...new Set(events.map((e) => e.rule))], ['ban']);
});

test('a second proxy on a listen address in use refuses to start (SO_REUSEPORT would share the port silently)', async () => {
  const other = await makeRoot({ sites: { 's.yaml': site('s') } });
  other.writeGlobal({ listen_http: [`127.0.0.1:${root.httpPort}`], workers: 2 });
  const r = runHostkit(['proxy', '--root', other.dir]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, new RegExp(`cannot listen on 127\\.0\\.0\\.1:${root.httpPort}: .*EADDRINUSE`));
  assert.equal((await request({ port: root.httpPort, host: 'spread.test', path: '/x' })).status, 200, 'the first proxy keeps serving');
});

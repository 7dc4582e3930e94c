/**
 * Bandwidth (spec/3 §2.6, §3, §7) through the real proxy: the monthly quota answers 509 once
 * crossed (or closes the connection in `close` mode) with one `quota_exceeded` event per window;
 * the counter survives a clean restart and a kill -9 (at most the last second is lost, nothing
 * double-counted); data_dir is created 0700; a per-IP send-rate cap holds a download to its rate.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import type { Daemon } from '../hostkit-process.ts';
import { api, makeRoot, request, startOrigin, startProxy, until, type Origin, type ProxyRoot } from './harness.ts';

let root: ProxyRoot;
let proxy: Daemon;
let origin: Origin;

before(async () => {
  origin = await startOrigin();
  root = await makeRoot({
    // Two workers: the quota counter and the send-rate buckets are shared between them.
    global: { data_dir: 'state/proxy', workers: 2 },
    sites: {
      'quota.yaml': { id: 'quota', hostnames: ['quota.test'], origin: { url: origin.url }, bandwidth: { monthly_quota_bytes: 300_000 } },
      'closing.yaml': { id: 'closing', hostnames: ['closing.test'], origin: { url: origin.url }, bandwidth: { monthly_quota_bytes: 100_000, quota_action: 'close', quota_reset_day: 28 } },
      'kept.yaml': { id: 'kept', hostnames: ['kept.test'], origin: { url: origin.url } },
      'slow.yaml': { id: 'slow', hostnames: ['slow.test'], origin: { url: origin.url }, bandwidth: { max_ip_bps: 200_000 } },
      'shared.yaml': { id: 'shared', hostnames: ['shared.test'], origin: { url: origin.url }, bandwidth: { max_site_bps: 200_000 } },
    },
  });
  proxy = await startProxy(root);
});

after(async () => {
  await proxy?.stop('SIGKILL');
  await origin?.close();
});

async function usage(site: string): Promise<{ bytes: number; limit: number | null; exceeded: boolean; window_start: string }> {
  return (await api(root, 'GET', `/sites/${site}/usage`)).body.data;
}

test('data_dir is created with mode 0700', () => {
  assert.equal(statSync(join(root.dir, 'state', 'proxy')).mode & 0o777, 0o700);
});

test('crossing the quota gives 509 with one quota_exceeded event for the window', async () => {
  assert.equal((await request({ port: root.httpPort, host: 'quota.test', path: '/bytes/200000' })).status, 200);
  assert.equal((await request({ port: root.httpPort, host: 'quota.test', path: '/bytes/200000' })).status, 200, 'under the quota when it starts');
  const seen = origin.seen.length;
  for (let i = 0; i < 3; i++) {
    const r = await request({ port: root.httpPort, host: 'quota.test', path: '/x' });
    assert.equal(r.status, 509);
  }
  assert.equal(origin.seen.length, seen, 'the origin is not contacted over quota');
  const u = await usage('quota');
  assert.equal(u.bytes, 400_000);
  assert.equal(u.exceeded, true);
  assert.match(u.window_start, /^\d{4}-\d{2}-01$/);
  const events = (await api(root, 'GET', '/events/recent?site=quota&limit=20')).body.data.events as { kind: string; rule: string | null; status?: number; limit?: number }[];
  assert.equal(events.filter((e) => e.kind === 'quota_exceeded').length, 1);
  assert.equal(events.find((e) => e.kind === 'quota_exceeded')?.limit, 300_000);
  assert.equal(events.filter((e) => e.rule === 'quota.exceeded').length, 3);
  assert.match(proxy.output(), /"site":"quota".*quota_exceeded/);
});

test('quota_action close closes the connection without an answer', async () => {
  assert.equal((await request({ port: root.httpPort, host: 'closing.test', path: '/bytes/150000' })).status, 200);
  await assert.rejects(request({ port: root.httpPort, host: 'closing.test', path: '/x' }), /socket hang up|ECONNRESET/);
  assert.match((await usage('closing')).window_start, /^\d{4}-\d{2}-28$/);
});

test('the counter survives a clean restart and a kill -9', async () => {
  assert.equal((await request({ port: root.httpPort, host: 'kept.test', path: '/bytes/100000' })).status, 200);
  assert.equal((await usage('kept')).bytes, 100_000);
  assert.equal(await proxy.stop('SIGTERM'), 0);
  proxy = await startProxy(root);
  assert.equal((await usage('kept')).bytes, 100_000, 'written at shutdown');
  assert.equal((await usage('quota')).exceeded, true);

  assert.equal((await request({ port: root.httpPort, host: 'kept.test', path: '/bytes/50000' })).status, 200);
  // Counters reach the disk within a second.
  await new Promise((r) => setTimeout(r, 1_500));
  await proxy.stop('SIGKILL');
  proxy = await startProxy(root);
  assert.equal((await usage('kept')).bytes, 150_000, 'nothing lost after a second, nothing counted twice');
  // Still one quota_exceeded for the window: the restarted proxy knows it was sent.
  assert.equal((await request({ port: root.httpPort, host: 'quota.test', path: '/x' })).status, 509);
  await until('the 509 event', async () => (await api(root, 'GET', '/events/recent?site=quota&limit=5')).body.data.events.length > 0);
  const events = (await api(root, 'GET', '/events/recent?site=quota&limit=20')).body.data.events as { kind: string }[];
  assert.equal(events.filter((e) => e.kind === 'quota_exceeded').length, 0);
});

test('max_ip_bps 200 KB/s holds a 600 KB download to about 3 s, and never rejects', async () => {
  const started = performance.now();
  const r = await request({ port: root.httpPort, host: 'slow.test', path: '/bytes/600000' });
  const secs = (performance.now() - started) / 1000;
  assert.equal(r.status, 200);
  assert.equal(r.body.length, 600_000);
  const rate = 600_000 / secs;
  assert.ok(Math.abs(rate - 200_000) / 200_000 < 0.15, `measured ${Math.round(rate)} B/s over ${secs.toFixed(2)} s`);
  const fast = performance.now();
  assert.equal((await request({ port: root.httpPort, host: 'kept.test', path: '/bytes/600000' })).status, 200);
  assert.ok(performance.now() - fast < 1_000, 'other sites are not shaped');
});

test('max_site_bps is shared: two parallel 300 KB downloads take about 3 s together', async () => {
  const started = performance.now();
  const replies = await Promise.all([0, 1].map(() => request({ port: root.httpPort, host: 'shared.test', path: '/bytes/300000' })));
  const secs = (performance.now() - started) / 1000;
  assert.deepEqual(replies.map((r) => r.body.length), [300_000, 300_000]);
  const rate = 600_000 / secs;
  assert.ok(Math.abs(rate - 200_000) / 200_000 < 0.15, `measured ${Math.round(rate)} B/s over ${secs.toFixed(2)} s`);
});

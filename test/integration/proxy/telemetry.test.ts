/**
 * Telemetry (spec/3 §6.1, §2.2 events.*) through the real proxy: the Prometheus page on the admin
 * listener (token required, any role), per-minute aggregates with status classes, bytes and rule
 * hits, and the bounded bus: every request is either counted or counted as dropped.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Daemon } from '../hostkit-process.ts';
import { READONLY_TOKEN, api, makeRoot, request, startOrigin, startProxy, until, type Origin, type ProxyRoot } from './harness.ts';

let root: ProxyRoot;
let proxy: Daemon;
let origin: Origin;

before(async () => {
  origin = await startOrigin();
  root = await makeRoot({
    global: { events: { channel_capacity: 64 } },
    sites: {
      'tm.yaml': { id: 'tm', hostnames: ['tm.test'], origin: { url: origin.url }, protection: { request_limits: { allowed_methods: ['GET'] } } },
      'burst.yaml': { id: 'burst', hostnames: ['burst.test'], origin: { url: origin.url } },
    },
  });
  proxy = await startProxy(root);
});

after(async () => {
  await proxy?.stop('SIGKILL');
  await origin?.close();
});

async function metrics(token: string | null = READONLY_TOKEN): Promise<{ status: number; type: string; text: string }> {
  const r = await request({ port: root.adminPort, path: '/metrics', headers: token === null ? {} : { authorization: `Bearer ${token}` } });
  return { status: r.status, type: String(r.headers['content-type']), text: r.text };
}

function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

test('GET /metrics needs a token; it counts requests, bytes and rule hits per site', async () => {
  assert.equal((await metrics(null)).status, 401);
  for (let i = 0; i < 3; i++) assert.equal((await request({ port: root.httpPort, host: 'tm.test', path: '/bytes/1000' })).status, 200);
  assert.equal((await request({ port: root.httpPort, host: 'tm.test', path: '/', method: 'DELETE' })).status, 405);
  await until('the requests in the metrics', async () => sample((await metrics()).text, 'osproxy_requests_total{site="tm",status_class="4xx"}') === 1);
  const m = await metrics();
  assert.equal(m.status, 200);
  assert.match(m.type, /^text\/plain; version=0\.0\.4/);
  assert.equal(sample(m.text, 'osproxy_requests_total{site="tm",status_class="2xx"}'), 3);
  assert.equal(sample(m.text, 'osproxy_bytes_total{site="tm",direction="out"}'), 3000);
  assert.equal(sample(m.text, 'osproxy_rule_hits_total{site="tm",rule="request.method"}'), 1);
  assert.equal(sample(m.text, 'osproxy_request_duration_seconds_count{site="tm"}'), 4);
  assert.equal(sample(m.text, 'osproxy_quota_used_bytes{site="tm"}'), 3000);
  assert.equal(sample(m.text, 'osproxy_config_generation'), 1);
});

test('per-minute aggregates: requests, status classes, bytes, rule hits', async () => {
  const r = await api(root, 'GET', '/stats/minutes?site=tm&limit=5');
  assert.equal(r.status, 200);
  const minutes = r.body.data.minutes as { minute: string; requests: number; status: Record<string, number>; bytes_out: number; rule_hits: Record<string, number> }[];
  const total = minutes.reduce((n, m) => n + m.requests, 0);
  assert.equal(total, 4);
  assert.equal(minutes.reduce((n, m) => n + (m.rule_hits['request.method'] ?? 0), 0), 1);
  assert.equal(minutes.reduce((n, m) => n + m.bytes_out, 0), 3000);
  assert.match(minutes[0]?.minute ?? '', /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:00\.000Z$/);
  assert.equal((await api(root, 'GET', '/stats/minutes')).status, 400);
  assert.deepEqual((await api(root, 'GET', '/stats/minutes?site=nope')).body.data.minutes, []);
});

test('the bus is bounded: each of 200 concurrent requests is counted or counted as dropped', async () => {
  const before = await metrics();
  const dropped0 = sample(before.text, 'osproxy_events_dropped_total') ?? 0;
  const replies = await Promise.all(Array.from({ length: 200 }, () => request({ port: root.httpPort, host: 'burst.test', path: '/' })));
  assert.ok(replies.every((r) => r.status === 200));
  await until('every event delivered or dropped', async () => {
    const t = (await metrics()).text;
    return (sample(t, 'osproxy_requests_total{site="burst",status_class="2xx"}') ?? 0) + (sample(t, 'osproxy_events_dropped_total') ?? 0) - dropped0 === 200;
  });
});

test('at log_level debug each request is one access-log line, the path without its query as in the events', async () => {
  assert.equal((await request({ port: root.httpPort, host: 'tm.test', path: '/bytes/7?access=log' })).status, 200);
  await until('the access-log line', () => proxy.output().includes('"msg":"GET tm.test/bytes/7 200"'));
  const line = proxy.output().split('\n').find((l) => l.includes('"msg":"GET tm.test/bytes/7 200"')) ?? '';
  const entry = JSON.parse(line) as Record<string, unknown>;
  assert.equal(entry.level, 'debug');
  assert.deepEqual(
    { site: entry.site, client_ip: entry.client_ip, method: entry.method, host: entry.host, path: entry.path, status: entry.status, bytes_out: entry.bytes_out, rule: entry.rule },
    { site: 'tm', client_ip: '127.0.0.1', method: 'GET', host: 'tm.test', path: '/bytes/7', status: 200, bytes_out: 7, rule: null },
  );
  assert.equal(typeof entry.duration_ms, 'number');
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { RequestEvent } from './recent-events.ts';
import { createTelemetry } from './telemetry.ts';

const req = (site: string | null, status: number, rule: string | null = null): RequestEvent => ({
  kind: 'request', time: '', site, client_ip: '192.0.2.1', method: 'GET', host: 'h', path: '/', status, bytes_in: 10, bytes_out: 100, duration_ms: 20, rule,
});

test('per-minute aggregates per site, kept for the retention period', () => {
  let t = Date.UTC(2026, 10, 23, 8, 0, 30);
  const tm = createTelemetry(1, () => t);
  tm.record(req('a', 200));
  tm.record(req('a', 404));
  tm.record(req('a', 403, 'request.path_blocked'));
  tm.tunnelBytes('a', 5, 7);
  t += 60_000;
  tm.record(req('a', 200));
  const [latest, first] = tm.minutes('a', 10);
  assert.deepEqual(latest, { minute: '2026-11-23T08:01:00.000Z', requests: 1, status: { '2xx': 1 }, bytes_in: 10, bytes_out: 100, rule_hits: {} });
  assert.deepEqual(first, { minute: '2026-11-23T08:00:00.000Z', requests: 3, status: { '2xx': 1, '4xx': 2 }, bytes_in: 35, bytes_out: 307, rule_hits: { 'request.path_blocked': 1 } });
  t += 3_600_000;
  assert.deepEqual(tm.minutes('a', 10), [], 'older than the retention');
  tm.record(req(null, 421, 'route.no_match'));
  assert.equal(tm.minutes(null, 10)[0]?.requests, 1);
});

test('the metrics page: counters, rule hits, histogram, gauges; labels escaped', () => {
  const tm = createTelemetry(1);
  tm.record(req('a', 200));
  tm.record(req('a"b', 502, 'origin.connect'));
  const text = tm.renderMetrics({ generation: 3, inFlight: [1, 2], eventsDropped: 2, eventsQueued: 0, sites: [{ id: 'a', connections: 1, quotaBytes: 110, quotaLimit: 1000 }] });
  assert.match(text, /^osproxy_requests_total\{site="a",status_class="2xx"\} 1$/m);
  assert.match(text, /^osproxy_rule_hits_total\{site="a\\"b",rule="origin.connect"\} 1$/m);
  assert.match(text, /^osproxy_request_duration_seconds_bucket\{site="a",le="0.025"\} 1$/m);
  assert.match(text, /^osproxy_request_duration_seconds_bucket\{site="a",le="0.01"\} 0$/m);
  assert.match(text, /^osproxy_quota_limit_bytes\{site="a"\} 1000$/m);
  assert.match(text, /^osproxy_events_dropped_total 2$/m);
  assert.match(text, /^# TYPE osproxy_connections gauge$/m);
  assert.match(text, /^osproxy_in_flight_requests 3$/m);
  assert.match(text, /^osproxy_worker_in_flight_requests\{worker="1"\} 2$/m);
});

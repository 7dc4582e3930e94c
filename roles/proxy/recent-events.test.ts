import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRecentEvents, type ProxyEvent, type RequestEvent } from './recent-events.ts';

const pathOf = (e: ProxyEvent): string => (e.kind === 'request' ? e.path : e.kind);

const ev = (site: string | null, n: number): RequestEvent => ({
  kind: 'request',
  time: new Date(Date.UTC(2026, 0, 1, 0, 0, n)).toISOString(),
  site,
  client_ip: '203.0.113.1',
  method: 'GET',
  host: 'a.example',
  path: `/${n}`,
  status: 200,
  bytes_in: 0,
  bytes_out: 1,
  duration_ms: 1,
  rule: null,
});

test('a ring per site keeps the newest events, newest first; resizing keeps the newest', () => {
  const events = createRecentEvents(3);
  for (let n = 0; n < 5; n++) events.record(ev('a', n));
  events.record(ev(null, 10));
  events.record(ev('b', 7));
  assert.deepEqual(events.recent({ site: 'a', limit: 10 }).map(pathOf), ['/4', '/3', '/2']);
  assert.deepEqual(events.recent({ site: null, limit: 10 }).map(pathOf), ['/10']);
  assert.deepEqual(events.recent({ limit: 3 }).map(pathOf), ['/10', '/7', '/4']);
  events.configure(2, new Set(['a']));
  assert.deepEqual(events.recent({ site: 'a', limit: 10 }).map(pathOf), ['/4', '/3']);
  assert.deepEqual(events.recent({ site: 'b', limit: 10 }), [], 'rings of removed sites are dropped');
  events.configure(4, new Set(['a']));
  events.record(ev('a', 5));
  events.record(ev('a', 6));
  assert.deepEqual(events.recent({ site: 'a', limit: 10 }).map(pathOf), ['/6', '/5', '/4', '/3']);
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CHAT_A_LIMITS, chatABody, chatBBody, cut, EVENT_STYLE, EVENTS, genericBody, type Notice } from './payloads.ts';
import { backoffMs, parseRetryAfter } from './notifier.ts';

const notice = (over: Partial<Notice> = {}): Notice => ({ event: 'quota_warning', timestamp: '2026-03-01T00:00:00.000Z', message: 'm', data: {}, ...over });
const chars = (s: string): number => Array.from(s).length;

test('the twelve events of §6.2 with their defaults and colours', () => {
  assert.equal(EVENTS.length, 12);
  assert.deepEqual(EVENTS.filter((e) => !EVENT_STYLE[e].on), ['reset', 'cleanup', 'config_updated']);
  assert.equal(EVENT_STYLE.daemon_started.color, 0x57f287);
  assert.equal(EVENT_STYLE.docker_error.color, 0xe74c3c);
});

test('cut counts code points and marks the cut', () => {
  assert.equal(cut('abc', 3), 'abc');
  assert.equal(cut('abcd', 3), 'ab…');
  assert.equal(chars(cut('😀'.repeat(10), 5)), 5);
});

test('chat_a: 30 fields become 25, long values are cut, the total stays within 6000 over 10 embeds', () => {
  const data = Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`k${i}`, 'v'.repeat(2000)]));
  const body = chatABody(Array.from({ length: 12 }, () => notice({ message: 'd'.repeat(5000), data })));
  assert.equal(body.embeds.length, 10);
  let total = 0;
  for (const e of body.embeds) {
    assert.ok(e.fields.length <= 25);
    assert.ok(chars(e.description) <= 4096);
    for (const f of e.fields) assert.ok(chars(f.value) <= 1024);
    total += chars(e.title) + chars(e.description) + chars(e.footer.text) + e.fields.reduce((t, f) => t + chars(f.name) + chars(f.value), 0);
  }
  assert.ok(total <= CHAT_A_LIMITS.total, `total ${total}`);
  assert.ok(body.embeds.every((e) => e.title.includes('Quota warning')));
});

test('chat_b: a colour bar per notice and a section cut at 3000; mrkdwn escaped', () => {
  const body = chatBBody([notice({ event: 'error', message: '<b>&' + 'x'.repeat(4000) })], { channel: '#c' });
  assert.equal(body.channel, '#c');
  assert.equal(body.attachments[0]?.color, '#ed4245');
  const section = body.attachments[0]?.blocks[1] as { text: { text: string } };
  assert.ok(section.text.text.startsWith('&lt;b&gt;&amp;'));
  assert.equal(chars(section.text.text), 3000);
});

test('generic: event, timestamp, daemon_version, data', () => {
  const b = genericBody(notice({ data: { container: 'web', usage_pct: 90 } }));
  assert.deepEqual(Object.keys(b), ['event', 'timestamp', 'daemon_version', 'data']);
  assert.equal(b.data['container'], 'web');
});

test('backoff: base x 2^(n-1), capped at 60 s', () => {
  assert.deepEqual([1, 2, 3, 4].map((n) => backoffMs(2000, n)), [2000, 4000, 8000, 16000]);
  assert.equal(backoffMs(5000, 10), 60_000);
});

test('Retry-After in seconds or as a date, honoured up to one hour', () => {
  assert.equal(parseRetryAfter('2'), 2000);
  assert.equal(parseRetryAfter('0.5'), 500);
  assert.equal(parseRetryAfter('300'), 300_000);
  assert.equal(parseRetryAfter('3600'), 3_600_000);
  assert.equal(parseRetryAfter('86400'), 3_600_000);
  assert.equal(parseRetryAfter('-5'), 0);
  assert.equal(parseRetryAfter(new Date(10_000).toUTCString(), 5_000), 5000);
  assert.equal(parseRetryAfter(null), undefined);
  assert.equal(parseRetryAfter('soon'), undefined);
});

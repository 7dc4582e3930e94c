import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SERVICE_VERSION } from '../../src/core/version.ts';
import { chatABody, chatBBody } from '../../src/lib/chat-payloads.ts';
import { chatNotice, EVENT_STYLE, EVENTS, genericBody, type Notice } from './payloads.ts';

const notice = (over: Partial<Notice> = {}): Notice => ({ event: 'quota_warning', timestamp: '2026-03-01T00:00:00.000Z', message: 'm', data: {}, ...over });

test('the twelve events of §6.2 with their defaults and colours', () => {
  assert.equal(EVENTS.length, 12);
  assert.deepEqual(EVENTS.filter((e) => !EVENT_STYLE[e].on), ['reset', 'cleanup', 'config_updated']);
  assert.equal(EVENT_STYLE.daemon_started.color, 0x57f287);
  assert.equal(EVENT_STYLE.docker_error.color, 0xe74c3c);
});

test('generic: event, timestamp, daemon_version, data', () => {
  const b = genericBody(notice({ data: { container: 'web', usage_pct: 90 } }));
  assert.deepEqual(Object.keys(b), ['event', 'timestamp', 'daemon_version', 'data']);
  assert.equal(b.data['container'], 'web');
});

test('a notice becomes a chat notice with the style of its event, its data as fields and the daemon as source', () => {
  const n = notice({ event: 'quota_exceeded', message: 'over', data: { container: 'web', usage_pct: 101 } });
  assert.deepEqual(chatNotice(n), { event: 'quota_exceeded', title: 'Quota exceeded', emoji: '⛔', color: 0xed4245, timestamp: n.timestamp, message: 'over', fields: { container: 'web', usage_pct: 101 }, source: `bandwidth daemon ${SERVICE_VERSION}` });
  assert.equal(chatNotice(notice({ event: 'test' })).title, 'Webhook test');
  assert.equal(chatABody([chatNotice(n)]).embeds[0]?.footer.text, `bandwidth daemon ${SERVICE_VERSION} · quota_exceeded`);
  const context = chatBBody([chatNotice(n)]).attachments[0]?.blocks[2] as { elements: { text: string }[] };
  assert.equal(context.elements[0]?.text, `${n.timestamp} · bandwidth daemon ${SERVICE_VERSION} · quota_exceeded`);
});

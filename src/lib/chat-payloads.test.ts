import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CHAT_A_LIMITS, chatABody, chatBBody, cut, type ChatNotice } from './chat-payloads.ts';

const notice = (over: Partial<ChatNotice> = {}): ChatNotice => ({
  event: 'quota_warning',
  title: 'Quota warning',
  emoji: '⚠️',
  color: 0xfaa61a,
  timestamp: '2026-03-01T00:00:00.000Z',
  message: 'm',
  fields: {},
  source: 'bandwidth daemon 1.0.0',
  ...over,
});
const chars = (s: string): number => Array.from(s).length;

test('cut counts code points and marks the cut', () => {
  assert.equal(cut('abc', 3), 'abc');
  assert.equal(cut('abcd', 3), 'ab…');
  assert.equal(chars(cut('😀'.repeat(10), 5)), 5);
});

test('chat_a: 30 fields become 25, long values are cut, the total stays within 6000 over 10 embeds', () => {
  const fields = Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`k${i}`, 'v'.repeat(2000)]));
  const body = chatABody(Array.from({ length: 12 }, () => notice({ message: 'd'.repeat(5000), fields })));
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

test('chat_a: emoji and title, colour, fields in order, footer "source · event", username only when given', () => {
  const body = chatABody([notice({ event: 'attack_detected', title: 'Attack detected', emoji: '🛡️', color: 0xed4245, source: 'hostkit panel 1.0.0 · firewall', fields: { server: 'web', pps: 12, blocked: true, note: null } })]);
  assert.deepEqual(Object.keys(body), ['embeds']);
  assert.deepEqual(body.embeds[0], {
    title: '🛡️ Attack detected',
    description: 'm',
    color: 0xed4245,
    timestamp: '2026-03-01T00:00:00.000Z',
    footer: { text: 'hostkit panel 1.0.0 · firewall · attack_detected' },
    fields: [
      { name: 'server', value: 'web', inline: true },
      { name: 'pps', value: '12', inline: true },
      { name: 'blocked', value: 'true', inline: true },
      { name: 'note', value: '-', inline: true },
    ],
  });
  assert.equal(chatABody([notice()], { username: 'hostkit' }).username, 'hostkit');
});

test('chat_b: a colour bar per notice and a section cut at 3000; mrkdwn escaped', () => {
  const body = chatBBody([notice({ event: 'error', color: 0xed4245, message: '<b>&' + 'x'.repeat(4000) })], { channel: '#c' });
  assert.equal(body.channel, '#c');
  assert.equal(body.attachments[0]?.color, '#ed4245');
  const section = body.attachments[0]?.blocks[1] as { text: { text: string } };
  assert.ok(section.text.text.startsWith('&lt;b&gt;&amp;'));
  assert.equal(chars(section.text.text), 3000);
});

test('chat_b: the context line is "timestamp · source · event", the fallback text names the title', () => {
  const body = chatBBody([notice()]);
  assert.equal(body.text, 'Quota warning: m');
  const context = body.attachments[0]?.blocks[2] as { elements: { text: string }[] };
  assert.equal(context.elements[0]?.text, '2026-03-01T00:00:00.000Z · bandwidth daemon 1.0.0 · quota_warning');
});

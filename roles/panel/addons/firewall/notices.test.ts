/**
 * The firewall alerts' words and figures: metrics in readable units against the baseline, the
 * notices of SMART events and node transitions, the digest of a burst (one message, the rest in
 * one line) and the owner e-mail.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chatABody, chatBBody, CHAT_A_LIMITS } from '../../../../src/lib/chat-payloads.ts';
import { emailOf, formatBps, formatPps, formatRatio, nodeOfflineNotice, planMessage, smartNotice, summaryLine, trafficText, PER_MESSAGE, type AlertEvent, type PendingAlert } from './notices.ts';

const EVENT: AlertEvent = {
  type: 'attack_escalated',
  level: 2,
  occurred_at: '2026-12-07T10:02:00.000Z',
  started_at: '2026-12-07T10:00:00.000Z',
  ended_at: null,
  metrics: { pps: 84_000, bps: 1.2e9, peak_pps: 90_000, peak_bps: 1.3e9, baseline_pps: 7_000, baseline_bps: 100e6, ratio: 12 },
  mitigation: { action: 'rate_cap', cap_mbps: 50 },
  message: 'inbound traffic at 12x the baseline',
  server: 'mc-1',
  node: 'node-a',
};

test('metrics read as an operator says them', () => {
  assert.equal(formatPps(84_000), '84,000 packets/s');
  assert.equal(formatBps(1.2e9), '1.2 Gbit/s');
  assert.equal(formatBps(850e6), '850 Mbit/s');
  assert.equal(formatBps(1_234_567), '1.23 Mbit/s');
  assert.equal(formatBps(12.5e3), '12.5 kbit/s');
  assert.equal(formatBps(300), '300 bit/s');
  assert.equal(formatRatio(12), '12x baseline');
  assert.equal(formatRatio(2.54), '2.5x baseline');
  assert.equal(trafficText(EVENT.metrics), '84,000 packets/s, 1.2 Gbit/s (12x baseline)');
});

test('an event notice names the server and level, the admin one the node too', () => {
  const admin = smartNotice(EVENT, 'admin');
  assert.equal(admin.title, 'Attack escalated on mc-1: level 2');
  assert.equal(admin.fields.Node, 'node-a');
  assert.equal(admin.fields.Mitigation, 'inbound traffic capped at 50 Mbit/s');
  assert.equal(admin.fields.Baseline, '7,000 packets/s, 100 Mbit/s');
  const owner = smartNotice({ ...EVENT, mitigation: { action: 'none', cap_mbps: null } }, 'owner');
  assert.equal(owner.fields.Node, undefined, 'owners are not told fleet details');
  assert.equal(owner.fields.Mitigation, 'none (alert only)');
});

test('an offline notice says when further alerts of the incident are held back', () => {
  assert.doesNotMatch(nodeOfflineNotice('n', '3 failed stats polls', 't', { offline_count: 1, offline_alerts: 1 }, 3).message, /held back/);
  const last = nodeOfflineNotice('n', '3 failed stats polls', 't', { offline_count: 4, offline_alerts: 3 }, 3);
  assert.match(last.message, /went offline 4 times in this incident\. Further offline alerts of this incident are held back/);
});

const pending = (n: number, servers = 12): PendingAlert[] =>
  Array.from({ length: n }, (_, i) => ({ id: i + 1, kind: 'smart', server_id: (i % servers) + 1, level: 1, notice: smartNotice({ ...EVENT, server: `s${(i % servers) + 1}` }, 'admin') }));

test('up to five waiting alerts go one per message; more become one digest within the platform limits', () => {
  assert.equal(planMessage([], 10, 't'), undefined);
  const few = planMessage(pending(5), PER_MESSAGE.chat_a, 't');
  assert.deepEqual([few?.notices.length, few?.covers, few?.count], [1, 1, 1]);
  const some = planMessage(pending(8), PER_MESSAGE.chat_a, 't');
  assert.deepEqual([some?.notices.length, some?.covers], [8, 8], 'all eight fit one message');

  const burst = planMessage(pending(104), PER_MESSAGE.chat_a, 't');
  assert.ok(burst !== undefined);
  assert.equal(burst.notices.length, CHAT_A_LIMITS.embeds);
  assert.equal(burst.covers, 104);
  assert.equal(burst.notices[9]?.title, 'And 95 more attack events on 12 servers');
  const body = chatABody(burst.notices);
  assert.equal(body.embeds.length, 10);
  const chars = body.embeds.reduce((t, e) => t + e.title.length + e.description.length + e.footer.text.length + e.fields.reduce((a, f) => a + f.name.length + f.value.length, 0), 0);
  assert.ok(chars <= CHAT_A_LIMITS.total, `${chars} characters`);

  const b = planMessage(pending(104), PER_MESSAGE.chat_b, 't');
  assert.equal(b?.notices.length, 16);
  assert.equal(chatBBody(b?.notices ?? []).attachments.flatMap((a) => a.blocks).length, 48);
  assert.equal(b?.notices[15]?.title, 'And 89 more attack events on 12 servers');
});

test('the summary line counts attack events, servers and node alerts', () => {
  assert.equal(summaryLine(pending(1, 1)), 'and 1 more attack event on 1 server');
  const node: PendingAlert = { id: 99, kind: 'node', server_id: null, level: null, notice: nodeOfflineNotice('n', 'r', 't', { offline_count: 1, offline_alerts: 1 }, 3) };
  assert.equal(summaryLine([node, node]), 'and 2 more node alerts');
  assert.equal(summaryLine([...pending(3, 2), node]), 'and 4 more alerts: 3 attack events on 2 servers, 1 node alert');
});

test('the owner e-mail: subject with server and level, body with level, metrics against baseline and mitigation', () => {
  const one = emailOf([smartNotice(EVENT, 'owner')]);
  assert.equal(one.subject, '[hostkit] Attack escalated on mc-1: level 2');
  assert.match(one.text, /Level: level 2 of 3/);
  assert.match(one.text, /Traffic: 84,000 packets\/s, 1\.2 Gbit\/s \(12x baseline\)/);
  assert.match(one.text, /Baseline: 7,000 packets\/s, 100 Mbit\/s/);
  assert.match(one.text, /Mitigation: inbound traffic capped at 50 Mbit\/s/);
  const many = emailOf([smartNotice({ ...EVENT, level: 1 }, 'owner'), smartNotice({ ...EVENT, level: 3 }, 'owner')]);
  assert.equal(many.subject, '[hostkit] 2 attack alerts for mc-1, up to level 3');
});

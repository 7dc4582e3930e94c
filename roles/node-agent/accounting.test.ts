import { test } from 'node:test';
import assert from 'node:assert/strict';
import { accountServer, activeCombos, counterDelta, desiredSpeeds, newServerState, unthrottle, type Limits, type ServerState } from './accounting.ts';
import { GIB } from '../../src/lib/units.ts';
import { LIMIT_DEFAULTS, MAX_SPEED_MBPS, normalizeEntry } from './limits.ts';

const UUID = '0b1c2d3e-4f50-4617-8899-aabbccddeeff';
const T0 = Date.parse('2026-11-25T10:00:00Z'); // Wednesday

function limits(over: Partial<Limits> = {}): Limits {
  return { ...LIMIT_DEFAULTS, uuid: UUID, rx_speed_mbps: 100, tx_speed_mbps: 50, throttle_tx_mbps: 4, ...over };
}

/** Runs cycles of (seconds after T0, rx counter, tx counter) and returns the final state and every event type. */
function cycles(steps: [number, number, number][], lim: Limits | undefined, tz = 'UTC', start: ServerState = newServerState(UUID)) {
  let state = start;
  const events: string[] = [];
  for (const [sec, rx, tx] of steps) {
    const r = accountServer(state, { ifindex: 7, rxBytes: rx, txBytes: tx }, T0 + sec * 1000, tz, lim);
    state = r.state;
    events.push(...r.events.map((e) => `${e.type}${e.direction ? `:${e.direction}_${e.period}` : ''}`));
  }
  return { state, events };
}

test('counter deltas: first sight, growth, reset, new veth', () => {
  const table: [number | null, number | null, number, number, number][] = [
    [null, null, 5000, 7, 0], // first sight is a baseline, not usage
    [1000, 7, 5000, 7, 4000],
    [5000, 7, 300, 7, 300], // went backwards: the counter restarted
    [5000, 7, 300, 9, 300], // new veth (container restarted)
    [5000, 7, 9000, 9, 9000],
  ];
  for (const [prev, prevIf, reading, ifindex, want] of table) assert.equal(counterDelta(prev, prevIf, reading, ifindex), want, JSON.stringify([prev, prevIf, reading, ifindex]));
});

test('totals, rates and period counters accumulate; offline cycles add nothing', () => {
  const { state } = cycles([[0, 1000, 500], [5, 6000, 1500], [10, 16000, 2500]], limits());
  assert.equal(state.rxTotal, 15000);
  assert.equal(state.txTotal, 2000);
  assert.equal(state.rxRate, 2000);
  assert.equal(state.txRate, 200);
  assert.equal(state.usage.rx_day?.bytes, 15000);
  assert.equal(state.usage.tx_month?.bytes, 2000);
  const off = accountServer(state, null, T0 + 15_000, 'UTC', limits()).state;
  assert.equal(off.rxTotal, 15000);
  assert.equal(off.rxRate, 0);
});

test('day rollover resets the day counter only; week on Monday; month on the 1st', () => {
  const { state } = cycles([[0, 0, 0], [60, 1000, 0], [14 * 3600 + 60, 3000, 0]], limits()); // crosses midnight UTC
  assert.equal(state.usage.rx_day?.bytes, 2000);
  assert.equal(state.usage.rx_day?.key, '2026-11-26');
  assert.equal(state.usage.rx_week?.bytes, 3000);
  assert.equal(state.usage.rx_month?.bytes, 3000);
  const monday = cycles([[0, 0, 0], [5 * 86400, 10, 0]], limits()).state; // Wed -> next Mon
  assert.equal(monday.usage.rx_week?.key, 'W2026-11-30');
  assert.equal(monday.usage.rx_week?.bytes, 10);
  const december = cycles([[0, 0, 0], [6 * 86400, 10, 0]], limits()).state;
  assert.equal(december.usage.rx_month?.key, '2026-12');
});

test('the quota time zone decides the day', () => {
  // 23:30 UTC is already the next day in Berlin: the first bytes count, then the day resets at 23:00 UTC.
  const start = Date.parse('2026-11-25T22:50:00Z');
  let s = accountServer(newServerState(UUID), { ifindex: 1, rxBytes: 0, txBytes: 0 }, start, 'Europe/Berlin', limits()).state;
  s = accountServer(s, { ifindex: 1, rxBytes: 100, txBytes: 0 }, start + 5 * 60_000, 'Europe/Berlin', limits()).state;
  s = accountServer(s, { ifindex: 1, rxBytes: 300, txBytes: 0 }, start + 15 * 60_000, 'Europe/Berlin', limits()).state;
  assert.equal(s.usage.rx_day?.key, '2026-11-26');
  assert.equal(s.usage.rx_day?.bytes, 200);
});

test('throttle: crossing a quota queues quota_exceeded and throttled once, shapes at the throttle speeds', () => {
  const lim = limits({ tx_quota_day_gb: 1 });
  const { state, events } = cycles([[0, 0, 0], [5, 0, GIB - 1], [10, 0, GIB + 10], [15, 0, GIB + 20]], lim);
  assert.deepEqual(events, ['quota_exceeded:tx_day', 'throttled:tx_day']);
  assert.deepEqual(activeCombos(state), ['tx_day']);
  assert.equal(state.throttled, true);
  assert.deepEqual(desiredSpeeds(state, lim), { rxMbps: 5, txMbps: 4 });
});

test('period rollover restores normal speeds with one restored event and clears the combo', () => {
  const lim = limits({ tx_quota_day_gb: 1 });
  const { state, events } = cycles([[0, 0, 0], [5, 0, GIB], [14 * 3600, 0, GIB + 5]], lim);
  assert.deepEqual(events, ['quota_exceeded:tx_day', 'throttled:tx_day', 'restored:tx_day']);
  assert.deepEqual(activeCombos(state), []);
  assert.deepEqual(desiredSpeeds(state, lim), { rxMbps: 100, txMbps: 50 });
});

test('several combos: the throttle lasts until the last one resets', () => {
  const lim = limits({ rx_quota_day_gb: 1, rx_quota_month_gb: 1 });
  const { state, events } = cycles([[0, 0, 0], [5, GIB, 0], [14 * 3600, GIB + 1, 0]], lim);
  assert.deepEqual(events, ['quota_exceeded:rx_day', 'quota_exceeded:rx_month', 'throttled:rx_day']);
  assert.deepEqual(activeCombos(state), ['rx_month']);
  assert.equal(state.throttled, true);
});

test('suspend: pending until the panel answers, then 1 Mbit/s both ways', () => {
  const lim = limits({ rx_quota_day_gb: 1, exceed_action: 'suspend' });
  const first = cycles([[0, 0, 0], [5, GIB, 0]], lim);
  assert.deepEqual(first.events, ['quota_exceeded:rx_day']);
  assert.equal(first.state.suspend, 'pending');
  assert.deepEqual(desiredSpeeds(first.state, lim), { rxMbps: 100, txMbps: 50 });
  const answered = accountServer({ ...first.state, suspend: 'answered' }, { ifindex: 7, rxBytes: GIB + 5, txBytes: 0 }, T0 + 10_000, 'UTC', lim);
  assert.deepEqual(answered.events.map((e) => e.type), ['throttled']);
  assert.deepEqual(desiredSpeeds(answered.state, lim), { rxMbps: 1, txMbps: 1 });
});

test('exceed_action switched while a combo is active: to suspend asks for the suspension, away from suspend drops a pending call', () => {
  for (const from of ['throttle', 'none'] as const) {
    const { state } = cycles([[0, 0, 0], [5, GIB, 0]], limits({ rx_quota_day_gb: 1, exceed_action: from }));
    const now = accountServer(state, { ifindex: 7, rxBytes: GIB + 5, txBytes: 0 }, T0 + 10_000, 'UTC', limits({ rx_quota_day_gb: 1, exceed_action: 'suspend' }));
    assert.equal(now.state.suspend, 'pending', `from ${from}`);
    assert.deepEqual(activeCombos(now.state), ['rx_day'], `from ${from}`);
  }
  const pending = cycles([[0, 0, 0], [5, GIB, 0]], limits({ rx_quota_day_gb: 1, exceed_action: 'suspend' })).state;
  for (const to of ['throttle', 'none'] as const) {
    const lim = limits({ rx_quota_day_gb: 1, exceed_action: to });
    const now = accountServer(pending, { ifindex: 7, rxBytes: GIB + 5, txBytes: 0 }, T0 + 10_000, 'UTC', lim);
    assert.equal(now.state.suspend, 'none', `to ${to}`);
    assert.equal(now.state.throttled, to === 'throttle', `to ${to}`);
  }
});

test('none: quota_exceeded is recorded, nothing is shaped', () => {
  const lim = limits({ rx_quota_day_gb: 1, exceed_action: 'none' });
  const { state, events } = cycles([[0, 0, 0], [5, GIB, 0], [10, GIB + 1, 0]], lim);
  assert.deepEqual(events, ['quota_exceeded:rx_day']);
  assert.deepEqual(activeCombos(state), ['rx_day']);
  assert.equal(state.throttled, false);
  assert.deepEqual(desiredSpeeds(state, lim), { rxMbps: 100, txMbps: 50 });
});

test('unthrottle clears the combo for the rest of its period; the next period evaluates afresh', () => {
  const lim = limits({ rx_quota_day_gb: 1 });
  const { state } = cycles([[0, 0, 0], [5, GIB, 0]], lim);
  const { state: cleared, cleared: combos } = unthrottle(state);
  assert.deepEqual(combos, ['rx_day']);
  assert.deepEqual(activeCombos(cleared), []);
  const later = accountServer(cleared, { ifindex: 7, rxBytes: 2 * GIB, txBytes: 0 }, T0 + 60_000, 'UTC', lim);
  assert.deepEqual(later.events, [], 'no new events while the override holds');
  assert.deepEqual(desiredSpeeds(later.state, lim), { rxMbps: 100, txMbps: 50 });
  const nextDay = accountServer(later.state, { ifindex: 7, rxBytes: 3 * GIB + 1, txBytes: 0 }, T0 + 15 * 3600_000, 'UTC', lim);
  assert.deepEqual(nextDay.events.map((e) => e.type), ['quota_exceeded', 'throttled'], 'override dropped at rollover');
});

test('a quota raised above the use, or removed, lifts the throttle at once', () => {
  const { state } = cycles([[0, 0, 0], [5, 0, GIB + 10]], limits({ tx_quota_day_gb: 1 }));
  assert.equal(state.throttled, true);
  for (const quota of [2, 0]) {
    const lifted = accountServer(state, { ifindex: 7, rxBytes: 0, txBytes: GIB + 20 }, T0 + 10_000, 'UTC', limits({ tx_quota_day_gb: quota }));
    assert.deepEqual(lifted.events.map((e) => [e.type, e.message]), [['restored', 'limits changed: normal speeds restored']], `quota ${quota}`);
    assert.deepEqual(activeCombos(lifted.state), []);
    assert.deepEqual(desiredSpeeds(lifted.state, limits({ tx_quota_day_gb: quota })), { rxMbps: 100, txMbps: 50 });
  }
  // With no quota left, a later throttle action has nothing to throttle for.
  const none = cycles([[0, 0, 0], [5, 0, GIB + 10]], limits({ tx_quota_day_gb: 1, exceed_action: 'none' }));
  const later = accountServer(none.state, { ifindex: 7, rxBytes: 0, txBytes: GIB + 20 }, T0 + 10_000, 'UTC', limits({ tx_quota_day_gb: 0, exceed_action: 'throttle' }));
  assert.equal(later.state.throttled, false);
  assert.deepEqual(later.events, []);
});

test('a new quota time zone is no calendar boundary: counts and flags carry over until the next one of the new zone', () => {
  const lim = limits({ rx_quota_day_gb: 1 });
  // 10:00 UTC on Wednesday 25 Nov; in Pacific/Kiritimati (UTC+14) it is already Thursday 00:00.
  const { state } = cycles([[0, 0, 0], [5, GIB + 10, 0]], lim);
  assert.equal(state.throttled, true);
  const switched = accountServer(state, { ifindex: 7, rxBytes: GIB + 20, txBytes: 0 }, T0 + 10_000, 'Pacific/Kiritimati', lim);
  assert.deepEqual(switched.events, [], 'no restored event');
  assert.equal(switched.state.throttled, true);
  assert.equal(switched.state.usage.rx_day?.bytes, GIB + 20);
  assert.equal(switched.state.usage.rx_day?.key, '2026-11-26');
  // The new zone's next midnight (10:00 UTC on Thursday) resets the day as usual.
  const nextDay = accountServer(switched.state, { ifindex: 7, rxBytes: GIB + 30, txBytes: 0 }, T0 + 24 * 3600_000 + 5_000, 'Pacific/Kiritimati', lim);
  assert.deepEqual(nextDay.events.map((e) => e.type), ['restored']);
  assert.equal(nextDay.state.usage.rx_day?.bytes, 10);
});

test('removed from the limits set or disabled: flags dropped, restored if it was restricted', () => {
  const lim = limits({ rx_quota_day_gb: 1 });
  const { state } = cycles([[0, 0, 0], [5, GIB, 0]], lim);
  const removed = accountServer(state, { ifindex: 7, rxBytes: GIB, txBytes: 0 }, T0 + 10_000, 'UTC', undefined);
  assert.deepEqual(removed.events.map((e) => [e.type, e.message]), [['restored', 'server removed from the limits set: normal speeds restored']]);
  assert.deepEqual(removed.state.exceeded, {});
  assert.deepEqual(desiredSpeeds(removed.state, undefined), { rxMbps: 0, txMbps: 0 });
  const disabled = accountServer(state, { ifindex: 7, rxBytes: 5 * GIB, txBytes: 0 }, T0 + 10_000, 'UTC', limits({ rx_quota_day_gb: 1, enabled: false }));
  assert.deepEqual(disabled.events.map((e) => e.type), ['restored']);
  assert.deepEqual(desiredSpeeds(disabled.state, limits({ enabled: false })), { rxMbps: 0, txMbps: 0 });
  assert.equal(disabled.state.rxTotal, state.rxTotal + 4 * GIB, 'stats are still collected');
});

test('a speed tc cannot take fails its limits entry instead of being reported applied', () => {
  assert.equal((normalizeEntry({ uuid: UUID, rx_speed_mbps: MAX_SPEED_MBPS }) as Limits).rx_speed_mbps, MAX_SPEED_MBPS);
  for (const field of ['rx_speed_mbps', 'tx_speed_mbps', 'throttle_rx_mbps', 'throttle_tx_mbps']) {
    assert.match(String(normalizeEntry({ uuid: UUID, [field]: 1e15 })), new RegExp(`${field} must be at most`));
  }
  assert.equal((normalizeEntry({ uuid: UUID, rx_quota_month_gb: 100_000 }) as Limits).rx_quota_month_gb, 100_000, 'quotas have no such cap');
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { applyFailure, capFor, levelOf, newSmartState, smartStep, type SmartReading, type SmartSettings, type SmartState } from './smart.ts';

const S: SmartSettings = {
  baselineTauMs: 60_000,
  floorPps: 100,
  floorBps: 1e6,
  multipliers: [4, 8, 16],
  mitigate: true,
  capFactors: [8, 4, 2],
  minCapBps: 2e6,
  holdDownMs: 10_000,
};
const UUID = '5b1e8c7a-1d2f-4a3b-9c4d-5e6f7a8b9c01';

/** Drives the detector with one reading per second at the given packet rates (100-byte packets). */
function run(ppsPerSecond: number[], opts: { settings?: SmartSettings; state?: SmartState; dropsPerSecond?: (i: number) => number } = {}) {
  let st = opts.state ?? newSmartState(UUID);
  let incident = 0;
  const events: ReturnType<typeof smartStep>['events'] = [];
  let packets = st.last?.packets ?? 0;
  let drops = st.last?.drops ?? 0;
  let at = st.last?.at ?? 0;
  const states: SmartState[] = [];
  for (let i = 0; i <= ppsPerSecond.length; i++) {
    if (i > 0) {
      at += 1000;
      packets += ppsPerSecond[i - 1] as number;
      drops += opts.dropsPerSecond?.(i) ?? 0;
    }
    const r: SmartReading = { at, ifindex: 7, bytes: packets * 100, packets, drops };
    const step = smartStep(st, r, at, true, opts.settings ?? S, () => ++incident);
    st = step.state;
    states.push(structuredClone(st));
    events.push(...step.events);
  }
  return { st, events, states };
}

test('levelOf and capFor follow the multiples of baseline', () => {
  assert.equal(levelOf(3.99, S), 0);
  assert.equal(levelOf(4, S), 1);
  assert.equal(levelOf(8, S), 2);
  assert.equal(levelOf(100, S), 3);
  const st = { ...newSmartState(UUID), baseBps: 10e6 };
  assert.deepEqual([1, 2, 3].map((l) => capFor(l as 1 | 2 | 3, st, S)), [80e6, 40e6, 20e6]);
  assert.equal(capFor(3, newSmartState(UUID), S), 2e6, 'an idle server gets the minimum cap, not zero');
});

test('an idle server does not alarm on a burst below the floor, and its baseline learns from calm traffic', () => {
  const { st, events } = run([10, 10, 350, 10, 10]);
  assert.deepEqual(events, [], 'a burst of 350 packets/s stays under 4x the 100 packets/s floor');
  assert.ok(st.learned);
  assert.ok(st.basePps > 9 && st.basePps < 30, `baseline ${st.basePps}`);
});

test('a flood is detected at its level, escalates as a separate event, and ends only after a quiet hold-down', () => {
  const pps = [10, 10, 500, 500, 1000, 2000, 2000, ...Array(12).fill(10)];
  const { st, events, states } = run(pps);
  const types = events.map((e) => `${e.type}:${e.level}`);
  assert.deepEqual(types, ['attack_detected:1', 'mitigation_started:1', 'attack_escalated:2', 'attack_escalated:3', 'mitigation_ended:3', 'attack_ended:3']);
  const [detected, started, l2, l3, mitEnd, end] = events;
  assert.equal(detected?.metrics.pps, 500);
  assert.equal(detected?.metrics.baseline_pps, 100, 'the floor, as the learned rate is below it');
  assert.equal(detected?.metrics.ratio, 5);
  assert.deepEqual(detected?.mitigation, { action: 'rate_cap', cap_mbps: 2 });
  assert.equal(started?.incident, detected?.incident);
  assert.equal(l2?.metrics.peak_pps, 1000);
  assert.equal(l3?.metrics.peak_pps, 2000);
  assert.match(l3?.message ?? '', /level 3/);
  assert.equal(mitEnd?.ended_at, end?.ended_at);
  assert.deepEqual(end?.mitigation, { action: 'none', cap_mbps: null });
  assert.equal(end?.metrics.peak_pps, 2000);
  // The end came 10 s (the hold-down) after the last hot sample, not at the first calm one.
  assert.equal(Date.parse(end?.occurred_at ?? '') - Date.parse(l3?.occurred_at ?? ''), 11_000);
  assert.equal(st.incident, null);
  // The baseline did not learn from the attack.
  assert.ok(states.every((s) => s.basePps < 30));
});

test('a pulsing attack stays one incident: calm gaps shorter than the hold-down do not lift the cap', () => {
  const pulse = [800, 800, 10, 10, 10, 10, 10, 10];
  const { events, st } = run([10, ...pulse, ...pulse, ...pulse]);
  assert.deepEqual(events.map((e) => e.type), ['attack_detected', 'mitigation_started']);
  assert.notEqual(st.incident, null);
});

test('normal traffic that rises slowly (ten times over the span) raises no alert', () => {
  // From 300 to 3,000 packets/s over 10 minutes, a time constant of 60 s: the baseline follows.
  const pps = Array.from({ length: 600 }, (_, i) => Math.round(300 * 10 ** (i / 599)));
  const { events, st } = run(pps);
  assert.deepEqual(events, []);
  assert.ok(st.basePps > 2000, `baseline followed to ${st.basePps}`);
});

test('packets a cap dropped count as arrived, so a capped flood is not taken for calm', () => {
  const pps = [10, 1000, ...Array(20).fill(50)];
  const { events, st } = run(pps, { dropsPerSecond: (i) => (i >= 3 ? 950 : 0) });
  assert.deepEqual(events.map((e) => `${e.type}:${e.level}`), ['attack_detected:2', 'mitigation_started:2']);
  assert.notEqual(st.incident, null, 'still under mitigation while 1,000 packets/s arrive');
});

test('alert-only mode detects without a cap; turning SMART off ends an attack', () => {
  const { events, st } = run([10, 900], { settings: { ...S, mitigate: false } });
  assert.deepEqual(events.map((e) => e.type), ['attack_detected']);
  assert.deepEqual(events[0]?.mitigation, { action: 'none', cap_mbps: null });
  const off = smartStep(st, null, 5000, false, S, () => 99);
  assert.deepEqual(off.events.map((e) => e.type), ['attack_ended']);
  assert.match(off.events[0]?.message ?? '', /turned off/);
  assert.equal(off.state.incident, null);
});

test('a new veth or counters that went backwards give no rate rather than a false flood', () => {
  const { st } = run([10, 10]);
  const r = st.last as SmartReading;
  const restarted = smartStep(st, { ...r, at: r.at + 1000, ifindex: 8, packets: 5, bytes: 500 }, r.at + 1000, true, S, () => 1);
  assert.deepEqual(restarted.events, []);
});

test('an apply failure is one event per cap', () => {
  const { st } = run([10, 900]);
  const first = applyFailure(st, 3000, 'RTNETLINK answers: No such device', S);
  assert.equal(first?.type, 'apply_failed');
  assert.match(first?.message ?? '', /No such device/);
  assert.equal(applyFailure(st, 4000, 'again', S), null);
  assert.equal(applyFailure(newSmartState(UUID), 4000, 'no incident', S), null);
});

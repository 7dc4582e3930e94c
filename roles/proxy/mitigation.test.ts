import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createMitigation, type MitigationEvent } from './mitigation.ts';

const SETTINGS = { enabled: true, threshold_rps: 10, duration_secs: 5, factor: 0.25 };
const T0 = 1_800_000_000_000;

function setup() {
  const events: MitigationEvent[] = [];
  const m = createMitigation((e) => events.push(e));
  return { events, m, site: m.forSite('shop', SETTINGS) };
}

test('a second above threshold_rps enters mitigation once; the factor applies until duration_secs after the last hot second', (t) => {
  const { events, m, site } = setup();
  t.after(() => m.close());
  for (let i = 0; i < 10; i++) site.hit(T0 + i);
  assert.equal(site.factor, 1, 'at the threshold, not above it');
  site.hit(T0 + 20);
  assert.equal(site.factor, 0.25);
  for (let i = 0; i < 50; i++) site.hit(T0 + 30 + i);
  assert.deepEqual(events.map((e) => e.state), ['enter']);
  assert.equal(events[0]?.rps, 11);
  assert.equal(events[0]?.until, new Date(T0 + 20 + 5000).toISOString());
  // Hot again 3 s later: renewed, no second enter event.
  for (let i = 0; i < 11; i++) site.hit(T0 + 3000 + i);
  m.tick(T0 + 6000);
  assert.equal(site.factor, 0.25, 'renewed while hot');
  m.tick(T0 + 3010 + 5000);
  assert.equal(site.factor, 1);
  assert.deepEqual(events.map((e) => e.state), ['enter', 'exit']);
  assert.equal(events[1]?.rps, 61, 'the busiest second');
  assert.deepEqual(m.active(), []);
});

test('a reload keeps a running mitigation with the new settings; disabling ends it', (t) => {
  const { events, m, site } = setup();
  t.after(() => m.close());
  for (let i = 0; i < 11; i++) site.hit(T0);
  assert.equal(m.forSite('shop', { ...SETTINGS, factor: 0.5 }), site, 'the same state for the next generation');
  assert.equal(site.factor, 0.5);
  assert.equal(m.active().length, 1);
  m.forSite('shop', { ...SETTINGS, enabled: false });
  assert.equal(site.factor, 1);
  assert.deepEqual(events.map((e) => e.state), ['enter', 'exit']);
});

test('sites are metered apart', (t) => {
  const { m, site } = setup();
  t.after(() => m.close());
  const other = m.forSite('blog', SETTINGS);
  for (let i = 0; i < 11; i++) other.hit(T0);
  assert.equal(other.factor, 0.25);
  assert.equal(site.factor, 1);
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseDuration, durationMs, formatDuration, mbpsToBytesPerSec, GIB } from './units.ts';

test('parseDuration reads every unit of the config form', () => {
  assert.equal(parseDuration('5s'), 5000);
  assert.equal(parseDuration('1m'), 60_000);
  assert.equal(parseDuration('1h'), 3_600_000);
  assert.equal(parseDuration('250ms'), 250);
  assert.equal(parseDuration('2d'), 172_800_000);
  assert.equal(parseDuration('0s'), 0);
});

test('parseDuration rejects anything else', () => {
  for (const bad of ['5', 's', '1.5s', '-1s', '5 sec', '', 5, null, '1h30m']) {
    assert.equal(parseDuration(bad), undefined, String(bad));
  }
  assert.throws(() => durationMs('soon'), /not a duration/);
});

test('formatDuration round-trips', () => {
  for (const text of ['5s', '1m', '1h', '1500ms', '2d', '90s']) {
    assert.equal(formatDuration(durationMs(text)), text);
  }
});

test('unit conversions', () => {
  assert.equal(mbpsToBytesPerSec(10), 1_250_000);
  assert.equal(GIB, 1073741824);
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isTimeZone, nextPeriodStart, periodKey, periodStart } from './calendar.ts';

const iso = (ms: number): string => new Date(ms).toISOString();
const at = (s: string): number => Date.parse(s);

test('UTC periods: midnight, Monday, the 1st', () => {
  const t = at('2026-11-25T13:45:00Z'); // a Wednesday
  assert.equal(iso(periodStart(t, 'day', 'UTC')), '2026-11-25T00:00:00.000Z');
  assert.equal(iso(periodStart(t, 'week', 'UTC')), '2026-11-23T00:00:00.000Z');
  assert.equal(iso(periodStart(t, 'month', 'UTC')), '2026-11-01T00:00:00.000Z');
  assert.equal(iso(nextPeriodStart(t, 'day', 'UTC')), '2026-11-26T00:00:00.000Z');
  assert.equal(iso(nextPeriodStart(t, 'week', 'UTC')), '2026-11-30T00:00:00.000Z');
  assert.equal(iso(nextPeriodStart(t, 'month', 'UTC')), '2026-12-01T00:00:00.000Z');
  assert.equal(periodKey(t, 'week', 'UTC'), 'W2026-11-23');
  assert.equal(periodKey(t, 'month', 'UTC'), '2026-11');
});

test('a Sunday belongs to the week that started the Monday before', () => {
  assert.equal(iso(periodStart(at('2026-11-29T23:59:59Z'), 'week', 'UTC')), '2026-11-23T00:00:00.000Z');
  assert.equal(iso(periodStart(at('2026-11-30T00:00:00Z'), 'week', 'UTC')), '2026-11-30T00:00:00.000Z');
});

test('local midnight in a zone east and west of UTC', () => {
  // 23:30 UTC on the 24th is already the 25th in Berlin (UTC+1 in winter).
  assert.equal(periodKey(at('2026-11-24T23:30:00Z'), 'day', 'Europe/Berlin'), '2026-11-25');
  assert.equal(iso(periodStart(at('2026-11-24T23:30:00Z'), 'day', 'Europe/Berlin')), '2026-11-24T23:00:00.000Z');
  assert.equal(iso(periodStart(at('2026-11-25T03:00:00Z'), 'day', 'America/New_York')), '2026-11-24T05:00:00.000Z');
});

test('DST: the 23-hour and the 25-hour day', () => {
  // Europe/Berlin: summer time starts 2026-03-29 (02:00 -> 03:00) and ends 2026-10-25 (03:00 -> 02:00).
  const spring = periodStart(at('2026-03-29T12:00:00Z'), 'day', 'Europe/Berlin');
  assert.equal(iso(spring), '2026-03-28T23:00:00.000Z');
  assert.equal(nextPeriodStart(spring, 'day', 'Europe/Berlin') - spring, 23 * 3600_000);
  const autumn = periodStart(at('2026-10-25T12:00:00Z'), 'day', 'Europe/Berlin');
  assert.equal(iso(autumn), '2026-10-24T22:00:00.000Z');
  assert.equal(nextPeriodStart(autumn, 'day', 'Europe/Berlin') - autumn, 25 * 3600_000);
  // The month of March 2026 in Berlin is one hour short.
  const march = periodStart(at('2026-03-15T00:00:00Z'), 'month', 'Europe/Berlin');
  assert.equal(nextPeriodStart(march, 'month', 'Europe/Berlin') - march, (31 * 24 - 1) * 3600_000);
});

test('a zone whose DST jump skips midnight starts the day at 01:00', () => {
  // America/Santiago moved clocks from 00:00 to 01:00 on 2026-09-06.
  const start = periodStart(at('2026-09-06T15:00:00Z'), 'day', 'America/Santiago');
  assert.equal(iso(start), '2026-09-06T04:00:00.000Z');
  assert.equal(periodKey(start, 'day', 'America/Santiago'), '2026-09-06');
});

test('time zone names: IANA names and aliases are zones, a bare offset is not', () => {
  for (const name of ['UTC', 'Europe/Berlin', 'Asia/Calcutta', 'Etc/GMT+2', 'US/Pacific']) assert.equal(isTimeZone(name), true, name);
  for (const name of ['', '+02:00', '-0500', 'Mars/Olympus']) assert.equal(isTimeZone(name), false, name);
});

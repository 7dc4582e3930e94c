import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cronProblem, nextCronTime } from './cron.ts';

test('cronProblem accepts five-field expressions and explains bad ones', () => {
  assert.equal(cronProblem('0 0 * * *'), undefined);
  assert.equal(cronProblem('*/5 * * * *'), undefined);
  assert.match(cronProblem('61 * * * *') ?? '', /0-59/);
  assert.match(cronProblem('* * * *') ?? '', /five fields/);
});

test('nextCronTime evaluates in the given time zone, across a DST change', () => {
  // Europe/Berlin leaves summer time on 2026-10-25: midnight is 22:00Z before, 23:00Z after.
  assert.equal(nextCronTime('0 0 * * *', 'Europe/Berlin', new Date('2026-10-23T23:00:00Z')).toISOString(), '2026-10-24T22:00:00.000Z');
  assert.equal(nextCronTime('0 0 * * *', 'Europe/Berlin', new Date('2026-10-25T12:00:00Z')).toISOString(), '2026-10-25T23:00:00.000Z');
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { memoizeString } from './string-memo.ts';

test('a memoized function runs once per remembered input, remembers falsy results, and starts over when full', () => {
  const calls: string[] = [];
  const f = memoizeString((s: string) => {
    calls.push(s);
    return s === 'no' ? false : s.length;
  }, 3);
  assert.equal(f('ab'), 2);
  assert.equal(f('ab'), 2);
  assert.equal(f('no'), false);
  assert.equal(f('no'), false);
  assert.deepEqual(calls, ['ab', 'no']);
  f('c');
  f('d'); // the memo was full: it starts over with 'd'
  f('ab');
  assert.deepEqual(calls, ['ab', 'no', 'c', 'd', 'ab']);
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { monoNow, readEnded, readStarted, wallNow } from './read-clock.ts';

/** Waits until performance.now() and Date.now() have both moved on from `mono` and `wall`. */
function after(mono: number, wall: number): void {
  while (performance.now() <= mono || Date.now() <= wall);
}

test('inside a read both clocks are read once; outside, and in the next read, they move on', () => {
  const [m0, w0] = [monoNow(), wallNow()];
  after(m0, w0);
  assert.ok(monoNow() > m0, 'outside a read every call reads the clock');
  readStarted();
  try {
    const [m1, w1] = [monoNow(), wallNow()];
    after(m1, w1);
    assert.equal(monoNow(), m1);
    assert.equal(wallNow(), w1);
    readEnded();
    assert.ok(monoNow() > m1 && wallNow() > w1);
    readStarted();
    assert.ok(monoNow() > m1 && wallNow() > w1, 'the next read reads afresh');
  } finally {
    readEnded();
  }
});

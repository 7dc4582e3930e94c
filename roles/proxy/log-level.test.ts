import { test } from 'node:test';
import assert from 'node:assert/strict';
import { levelFromRustLog } from './log-level.ts';

test('RUST_LOG: bare level, our target, other targets ignored, off, nonsense', () => {
  const cases: [string | undefined, string | undefined][] = [
    [undefined, undefined],
    ['', undefined],
    ['debug', 'debug'],
    ['WARN', 'warn'],
    ['hyper=trace', undefined],
    ['info,hyper=trace', 'info'],
    ['warn,osproxy=debug', 'debug'],
    ['osproxy=trace,info', 'trace'],
    ['off', 'silent'],
    ['verbose', undefined],
  ];
  for (const [raw, want] of cases) assert.equal(levelFromRustLog(raw), want, String(raw));
});

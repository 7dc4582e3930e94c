import { test } from 'node:test';
import assert from 'node:assert/strict';
import { at, checkPositiveDurations, checkTimerDurations, httpUrlProblem, isIpOrCidr, parseListen } from './config-checks.ts';
import type { ConfigProblem } from './config-loader.ts';

test('at reads JSON pointers and tolerates missing steps', () => {
  assert.equal(at({ a: { b: [1, 2] } }, '/a/b/1'), 2);
  assert.equal(at({ a: 1 }, '/a/b'), undefined);
});

test('durations must be positive', () => {
  const problems: ConfigProblem[] = [];
  checkPositiveDurations({ a: '0s', b: '5s', c: 'bad' }, ['/a', '/b', '/c'], problems);
  assert.deepEqual(problems, [{ path: '/a', message: 'must be a positive duration' }]);
});

test('durations longer than a timer can wait are refused with their path', () => {
  const problems: ConfigProblem[] = [];
  // 24d fits 2^31-1 ms; 25d, 30d and 597h (24.9 days) do not.
  checkPositiveDurations({ a: '24d', b: '25d', c: '30d', d: '597h', e: '2147483647ms', f: '2147483648ms' }, ['/a', '/b', '/c', '/d', '/e', '/f'], problems);
  assert.deepEqual(
    problems.map((p) => p.path),
    ['/b', '/c', '/d', '/f'],
  );
  assert.match(problems[0]?.message ?? '', /must be at most 24d .*"25d"/);
  const zeroOk: ConfigProblem[] = [];
  checkTimerDurations({ w: '0s', x: '31d' }, ['/w', '/x'], zeroOk);
  assert.deepEqual(zeroOk.map((p) => p.path), ['/x']);
});

test('listen addresses and URLs', () => {
  assert.deepEqual(parseListen('127.0.0.1:9090'), { host: '127.0.0.1', port: 9090 });
  assert.deepEqual(parseListen('[::1]:80'), { host: '::1', port: 80 });
  assert.equal(parseListen('127.0.0.1:0'), undefined);
  assert.equal(parseListen('example.com:80'), undefined);
  assert.equal(parseListen('127.0.0.1'), undefined);
  assert.equal(httpUrlProblem('https://panel.example.com'), undefined);
  assert.match(httpUrlProblem('ftp://x') ?? '', /http or https/);
  assert.match(httpUrlProblem('panel') ?? '', /absolute/);
});

test('IPs and CIDRs of both families', () => {
  for (const ok of ['10.0.0.1', '10.0.0.0/8', '0.0.0.0/0', '2001:db8::/32', '::1', '::/0']) assert.ok(isIpOrCidr(ok), ok);
  for (const bad of ['10.0.0.0/33', '2001:db8::/129', 'example.com', '10.0.0.1/8/1', '10.0.0/8', '1.2.3.4/x']) assert.ok(!isIpOrCidr(bad), bad);
});

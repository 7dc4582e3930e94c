import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHostRouter, hostPort, normalizeHost } from './host-router.ts';

const site = (id: string, hostnames: string[], enabled = true) => ({ id, file: `${id}.yaml`, enabled, hostnames });

test('normalizeHost: lower case, port and trailing dot stripped, IPv6 literals refused', () => {
  const cases: [string | undefined, string | undefined][] = [
    ['Shop.Example', 'shop.example'],
    ['shop.example:8080', 'shop.example'],
    ['shop.example.', 'shop.example'],
    ['shop.example.:443', 'shop.example'],
    ['10.0.0.1:80', '10.0.0.1'],
    ['[::1]', undefined],
    ['[::1]:80', undefined],
    ['::1', undefined],
    ['', undefined],
    [':80', undefined],
    [undefined, undefined],
  ];
  for (const [raw, want] of cases) assert.equal(normalizeHost(raw), want, String(raw));
  assert.equal(hostPort('a.example:8443'), 8443);
  assert.equal(hostPort('a.example'), undefined);
});

test('routing table: exact first, longest wildcard, bare domain not covered, disabled sites last', () => {
  const exact = site('exact', ['www.example.com']);
  const wide = site('wide', ['*.example.com']);
  const deep = site('deep', ['*.eu.example.com']);
  const off = site('off', ['off.example.com', 'www.example.com', '*.parked.net'], false);
  const { route, conflicts } = createHostRouter([exact, wide, deep, off]);
  assert.deepEqual(conflicts, []);
  assert.equal(route('www.example.com'), exact);
  assert.equal(route('shop.example.com'), wide);
  assert.equal(route('a.b.example.com'), wide);
  assert.equal(route('x.eu.example.com'), deep);
  assert.equal(route('eu.example.com'), wide);
  assert.equal(route('example.com'), undefined);
  assert.equal(route('off.example.com'), wide, 'an enabled wildcard beats a disabled exact name');
  assert.equal(route('a.parked.net'), off, 'a name only a disabled site lists finds it (503)');
  assert.equal(route('[2001:db8::1]'), undefined);
});

test('duplicate claims: the earlier site keeps the name, each conflict reported once per name', () => {
  const first = site('first', ['dup.example', '*.wild.example']);
  const second = site('second', ['DUP.example.', '*.wild.example', 'own.example']);
  const { route, conflicts } = createHostRouter([first, second]);
  assert.equal(route('dup.example'), first);
  assert.equal(route('x.wild.example'), first);
  assert.equal(route('own.example'), second);
  assert.deepEqual(conflicts.map((c) => [c.hostname, c.winner.id, c.loser.id]), [
    ['dup.example', 'first', 'second'],
    ['*.wild.example', 'first', 'second'],
  ]);
});

test('names no request can match are reported, not claimed: IPv6 literals, a bare or misplaced *', () => {
  const odd = site('odd', ['[::1]', '::1', '*', 'a.*.example', '*x.example', '*.*.example', 'ok.example', '*.fine.example']);
  const { route, unroutable } = createHostRouter([odd]);
  assert.deepEqual(
    unroutable.map((u) => u.hostname),
    ['[::1]', '::1', '*', 'a.*.example', '*x.example', '*.*.example'],
  );
  assert.equal(route('ok.example'), odd);
  assert.equal(route('a.fine.example'), odd);
});

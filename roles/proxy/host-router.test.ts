import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHostRouter, hostPort, normalizeHost, hostnameProblem, normalizeName } from './host-router.ts';

const site = (id: string, hostnames: string[], enabled = true) => ({ id, file: `${id}.yaml`, enabled, hostnames });

test('normalizeHost: lower case, port and trailing dot stripped, IPv6 literals and malformed names refused', () => {
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
    ['evil.example/x.shop.example', undefined],
    ['evil.example?.shop.example', undefined],
    ['evil.example#.shop.example', undefined],
    ['evil.example\\.shop.example', undefined],
    ['evil.example@x.shop.example', undefined],
    ['evil.example x.shop.example', undefined],
    ['shop.example:1@evil.example', undefined],
    ['shop.example:80x', undefined],
    ['shop.example:', 'shop.example'],
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
  assert.equal(route('evil.example/x.example.com'), undefined, 'a Host that is no name is not routed, even under a wildcard');
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

test('configured names: syntax checked, internationalised names routed by their punycode form', () => {
  for (const ok of ['shop.example', 'SHOP.example.', '*.shop.example', '127.0.0.1', 'a-b.c1', 'my_service.internal', 'bücher.test', '*.bücher.test', 'xn--bcher-kva.test']) assert.equal(hostnameProblem(ok), undefined, ok);
  const bad: [string, RegExp][] = [
    ['[::1]', /only letters/],
    ['::1', /only letters/],
    ['shop.test:8080', /only letters/],
    ['a b.test', /no valid internationalised name|only letters/],
    ['.lead.test', /empty label/],
    ['x..test', /empty label/],
    ['*', /only letters|\*/],
    ['a.*.example', /\* other than/],
    ['*x.example', /\* other than/],
    ['*.*.example', /\* other than/],
    [`${'a'.repeat(64)}.test`, /label longer than 63/],
    [`${'a.'.repeat(127)}test`, /longer than 253/],
    ['bad\r\nname.test', /only letters/],
  ];
  for (const [name, why] of bad) assert.match(hostnameProblem(name) ?? '', why, name);
  assert.equal(normalizeName('Bücher.Test.'), 'xn--bcher-kva.test');
  assert.equal(normalizeName('*.BÜCHER.test'), '*.xn--bcher-kva.test');
  const idn = site('idn', ['bücher.test', '*.bücher.test']);
  const { route } = createHostRouter([idn]);
  assert.equal(route('xn--bcher-kva.test'), idn);
  assert.equal(route('XN--BCHER-KVA.test:8080'), idn);
  assert.equal(route('a.xn--bcher-kva.test'), idn);
});

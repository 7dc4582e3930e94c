import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compileLinear, LinearRegexError } from './linear-regex.ts';

test('matches like RegExp with the i flag on a table of patterns and inputs', () => {
  const patterns = [
    'abc', '^abc$', 'a.c', 'a[bc]+d', '[^a-z]', 'colou?r', 'x{2,3}y', 'x{2}', 'x{2,}', '(foo|bar)baz', '(?:ab)*c', '\\bcat\\b', '\\Bat',
    '\\d+\\.\\d+', '\\w+@\\w+', '\\s', '\\S+$', '[\\d-]+', 'a|', '(?<n>q)u', '\\x41\\u0042', '[A-Z]{3}', 'evil(bot|crawler)', '\\/admin', '^$',
    '\\$\\{jndi:', '[.]', '\\.\\.[/\\\\]', 'a+?b', '(a*)*b', '[-a]', '[a-]', '\\W', '\\D', '[\\s\\S]',
  ];
  const inputs = ['', 'abc', 'ABC', 'xabcx', 'a\nc', 'abbcd', 'colour', 'color', 'xxy', 'xxxxy', 'foobaz', 'BARBAZ', 'ababc', 'a cat!', 'cats', 'bat',
    '3.14', 'me@host', 'a b', 'tail', '12-3', 'quux', 'AB', 'xyz', 'EvilBot/1.0', '/admin/x', '${JNDI:ldap', '..\\x', 'aaab', '-', '!', '\u00e9'];
  for (const p of patterns) {
    const native = new RegExp(p, 'i');
    const linear = compileLinear(p);
    for (const s of inputs) assert.equal(linear.test(s.toLowerCase()), native.test(s), `${p} on ${JSON.stringify(s)}`);
  }
});

test('refuses backreferences, lookaround, property escapes and programs that expand too far', () => {
  for (const p of ['(a)\\1', '(?<x>a)\\k<x>', '(?=a)', '(?!a)', '(?<=a)b', '(?<!a)b', '\\p{L}', '(a{1000}){1000}', '(', 'a)', '*a', '[a']) {
    assert.throws(() => compileLinear(p), LinearRegexError, p);
  }
});

test('known-evil patterns run in linear time on inputs that make RegExp backtrack', () => {
  const input = `${'a'.repeat(65_536)}!`;
  for (const p of ['(a+)+$', '(a|a)*b', '(a|aa)+$', 'a*a*a*a*a*a*b', '(\\w+\\s?)+$', '^(a+)+$']) {
    const re = compileLinear(p);
    const t = performance.now();
    assert.equal(re.test(input), false, p);
    // RegExp needs longer than the age of the universe for these; linear time is a few ms.
    assert.ok(performance.now() - t < 1_000, `${p} took ${performance.now() - t} ms`);
  }
});

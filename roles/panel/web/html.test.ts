import assert from 'node:assert/strict';
import { test } from 'node:test';
import { html, raw } from './html.ts';
import { createLoginThrottle } from './login-throttle.ts';
import { formBody, inputOf } from './forms.ts';
import { portList } from './admin-allocations.ts';

test('html escapes interpolations, keeps nested html and raw, drops null/undefined/false', () => {
  const name = `<script>alert("x")</script>&'`;
  const out = html`<p title="${name}">${name}${html`<b>${'a<b'}</b>`}${raw('<i>ok</i>')}${null}${undefined}${false}${0}</p>`.value;
  assert.equal(out, '<p title="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;">&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;<b>a&lt;b</b><i>ok</i>0</p>');
  assert.equal(html`${['<a>', html`<br>`]}`.value, '&lt;a&gt;<br>');
});

test('login throttle: 5 attempts in the window, counted when they start; the window slides, reset clears', () => {
  let now = 0;
  const t = createLoginThrottle({ now: () => now });
  for (let i = 0; i < 5; i++) {
    assert.equal(t.take('k'), 0);
    now += 60_000;
  }
  // Attempts at 0..4 min; at 5 min the oldest frees up at 15 min, and a refused attempt does not count.
  assert.equal(t.take('k'), 600);
  assert.equal(t.take('k'), 600);
  assert.equal(t.take('other'), 0);
  now = 15 * 60_000;
  assert.equal(t.take('k'), 0);
  assert.ok(t.take('k') > 0);
  t.reset('k');
  assert.equal(t.take('k'), 0);
});

test('login throttle keeps at most maxKeys keys, and a spray of new keys does not flush a blocked one', () => {
  const t = createLoginThrottle({ maxKeys: 3, limit: 2 });
  t.take('target');
  t.take('target');
  assert.ok(t.take('target') > 0, 'blocked');
  for (let i = 0; i < 100; i++) t.take(`spray-${i}`);
  assert.ok(t.take('target') > 0, 'still blocked after 100 other keys');
  // Keys under their limit go first, the stalest of them: spray-0 was forgotten long ago.
  assert.equal(t.take('spray-0'), 0);
  const full = createLoginThrottle({ maxKeys: 2, limit: 1 });
  for (const k of ['a', 'b', 'c']) full.take(k);
  assert.equal(full.take('a'), 0, 'all blocked: the stalest goes');
  assert.ok(full.take('c') > 0);
});

test('form values become typed service input', () => {
  const values = formBody({ _csrf: 'x', name: ' web ', memory: '512', cpu: 'lots', disk: '', flag: 'on', list: ['a', 'b'] });
  assert.deepEqual(values, { name: ' web ', memory: '512', cpu: 'lots', disk: '', flag: 'on', list: 'b' });
  assert.deepEqual(inputOf(values, { textOrOmit: ['name', 'missing'], int: ['memory', 'cpu', 'disk'], bool: ['flag', 'other'] }), { name: 'web', memory: 512, cpu: 'lots', flag: true, other: false });
  assert.deepEqual(portList('25565, 25570-25575  25580,'), ['25565', '25570-25575', '25580']);
});

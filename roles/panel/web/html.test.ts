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

test('login throttle: 5 failures in the window block, the window slides, reset clears', () => {
  let now = 0;
  const t = createLoginThrottle({ now: () => now });
  for (let i = 0; i < 5; i++) {
    assert.equal(t.retryAfter('k'), 0);
    t.fail('k');
    now += 60_000;
  }
  // Failures at 0..4 min; at 5 min the oldest frees up at 15 min.
  assert.equal(t.retryAfter('k'), 600);
  assert.equal(t.retryAfter('other'), 0);
  now = 15 * 60_000;
  assert.equal(t.retryAfter('k'), 0);
  t.fail('k');
  assert.ok(t.retryAfter('k') > 0);
  t.reset('k');
  assert.equal(t.retryAfter('k'), 0);
});

test('login throttle keeps at most maxKeys keys', () => {
  const t = createLoginThrottle({ maxKeys: 2, limit: 1 });
  t.fail('a');
  t.fail('b');
  t.fail('c');
  assert.equal(t.retryAfter('a'), 0);
  assert.ok(t.retryAfter('c') > 0);
});

test('form values become typed service input', () => {
  const values = formBody({ _csrf: 'x', name: ' web ', memory: '512', cpu: 'lots', disk: '', flag: 'on', list: ['a', 'b'] });
  assert.deepEqual(values, { name: ' web ', memory: '512', cpu: 'lots', disk: '', flag: 'on', list: 'b' });
  assert.deepEqual(inputOf(values, { textOrOmit: ['name', 'missing'], int: ['memory', 'cpu', 'disk'], bool: ['flag', 'other'] }), { name: 'web', memory: 512, cpu: 'lots', flag: true, other: false });
  assert.deepEqual(portList('25565, 25570-25575  25580,'), ['25565', '25570-25575', '25580']);
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { html, raw } from './html.ts';
import { createLoginThrottle } from './login-throttle.ts';
import { confirmButton, formBody, inputOf } from './forms.ts';
import { layout } from './layout.ts';
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

test('confirmButton: the label only opens the escaped question; the action runs from the button under it', () => {
  const out = confirmButton('/admin/servers/7/delete', 'tok', 'Delete server', 'Delete server <b>x</b>?', html`<input type="hidden" name="_method" value="DELETE">`).value;
  assert.equal(
    out,
    '<details class="confirm"><summary class="button">Delete server</summary><form method="post" action="/admin/servers/7/delete" class=""><input type="hidden" name="_csrf" value="tok"><input type="hidden" name="_method" value="DELETE"><p>Delete server &lt;b&gt;x&lt;/b&gt;?</p><button type="submit" class="danger">Yes, delete server</button></form></details>',
  );
});

test('layout: the page names its icon (no request for /favicon.ico) and stacks the navigation on narrow screens', () => {
  const page = layout({ title: 'T', body: html`<p>x</p>`, user: { username: 'root', root_admin: 1 }, csrf: 'tok' });
  assert.match(page, /<link rel="icon" href="data:,">/);
  assert.match(page, /@media \(max-width:48rem\)\{[^@]*\.wrap\{display:block[^@]*table\{display:block;overflow-x:auto\}/);
});

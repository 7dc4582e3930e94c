import { test } from 'node:test';
import assert from 'node:assert/strict';
import { effectiveValues, isTrashPath, restoredName, truthy } from './rules.ts';

const GLOBAL = { default_max_bytes_per_server: 1000, retention_hours: 24 };

test('resolution: server override, then egg override, then the global setting', () => {
  assert.deepEqual(effectiveValues(GLOBAL), { capBytes: 1000, retentionHours: 24 });
  assert.deepEqual(effectiveValues(GLOBAL, undefined, { max_bytes: 500, retention_hours: 48 }), { capBytes: 500, retentionHours: 48 });
  assert.deepEqual(effectiveValues(GLOBAL, { max_bytes: 200, retention_hours: 2 }, { max_bytes: 500, retention_hours: 48 }), { capBytes: 200, retentionHours: 2 });
  // Null inherits field by field.
  assert.deepEqual(effectiveValues(GLOBAL, { max_bytes: null, retention_hours: 5 }, { max_bytes: 500, retention_hours: null }), { capBytes: 500, retentionHours: 5 });
  assert.deepEqual(effectiveValues(GLOBAL, { max_bytes: null, retention_hours: null }, { max_bytes: null, retention_hours: null }), { capBytes: 1000, retentionHours: 24 });
});

test('resolution: 0 bytes is unlimited and does not inherit', () => {
  assert.equal(effectiveValues(GLOBAL, { max_bytes: 0, retention_hours: null }, { max_bytes: 500, retention_hours: null }).capBytes, 0);
  assert.equal(effectiveValues(GLOBAL, undefined, { max_bytes: 0, retention_hours: null }).capBytes, 0);
  assert.equal(effectiveValues({ default_max_bytes_per_server: 0, retention_hours: 24 }).capBytes, 0);
});

test('resolution: retention is clamped to at least one hour', () => {
  assert.equal(effectiveValues(GLOBAL, { max_bytes: null, retention_hours: 0 }).retentionHours, 1);
  assert.equal(effectiveValues({ default_max_bytes_per_server: 0, retention_hours: -3 }).retentionHours, 1);
});

test('restored names: the original, then (restored), then (restored 2) and on', () => {
  assert.deepEqual([0, 1, 2, 3].map((n) => restoredName('plugins/a.jar', n)), ['plugins/a.jar', 'plugins/a.jar (restored)', 'plugins/a.jar (restored 2)', 'plugins/a.jar (restored 3)']);
});

test('restored names: a name at the 255-byte limit is shortened by whole characters to take the suffix', () => {
  const long = `d/${'x'.repeat(250)}`;
  assert.equal(restoredName(long, 1), `d/${'x'.repeat(244)} (restored)`);
  assert.equal(Buffer.byteLength(restoredName(long, 12).slice(2)), 255);
  // Three-byte characters: none is cut in half, so the name may end a byte or two short.
  const wide = restoredName('\u20ac'.repeat(85), 1);
  assert.equal(wide, `${'\u20ac'.repeat(81)} (restored)`);
  assert.ok(Buffer.byteLength(wide) <= 255);
});

test('trash paths: the folder and what is inside it, nothing else', () => {
  for (const p of ['.trash', '.trash/1', '.trash/1/x']) assert.equal(isTrashPath(p), true, p);
  for (const p of ['', '.trashy', 'a/.trash', '.tras', 'trash']) assert.equal(isTrashPath(p), false, p);
});

test('truthy permanent flags', () => {
  for (const v of [true, 1, '1', 'true', 'TRUE', 'on', 'yes']) assert.equal(truthy(v), true, String(v));
  for (const v of [false, 0, '0', 'false', '', 'off', 'no', null, undefined, 2, {}]) assert.equal(truthy(v), false, String(v));
});

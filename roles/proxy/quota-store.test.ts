import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openQuotaStore, windowStart, type QuotaExceeded } from './quota-store.ts';

test('windows start on the reset day at 00:00 UTC, the month before when the day is still ahead', () => {
  assert.equal(windowStart(new Date('2026-11-23T10:00:00Z'), null), '2026-11-01');
  assert.equal(windowStart(new Date('2026-11-23T10:00:00Z'), 28), '2026-10-28');
  assert.equal(windowStart(new Date('2026-01-05T00:00:00Z'), 15), '2025-12-15');
  assert.equal(windowStart(new Date('2026-01-15T00:00:00Z'), 15), '2026-01-15');
});

test('counters persist, quota_exceeded fires once per window, a new window starts at zero', () => {
  const dir = join(mkdtempSync(join(tmpdir(), 'hk-quota-')), 'data');
  const seen: QuotaExceeded[] = [];
  const settings = { monthly_quota_bytes: 1000, quota_reset_day: 10 };
  const nov = new Date('2026-11-20T00:00:00Z');
  const a = openQuotaStore({ dataDir: dir, onExceeded: (e) => seen.push(e), onWriteError: (e) => assert.fail(String(e)), onCorrupt: (e) => assert.fail(JSON.stringify(e)) });
  assert.equal(statSync(dir).mode & 0o777, 0o700);
  a.add('s', settings, 600, nov);
  assert.equal(a.isOver('s', settings, nov), false);
  a.add('s', settings, 600, nov);
  assert.equal(a.isOver('s', settings, nov), true);
  assert.equal(a.isOver('s', settings, nov), true);
  assert.equal(seen.length, 1);
  a.close();
  const b = openQuotaStore({ dataDir: dir, onExceeded: (e) => seen.push(e), onWriteError: () => undefined, onCorrupt: () => undefined });
  assert.deepEqual(b.usage('s', settings, nov), { window_start: '2026-11-10', bytes: 1200, limit: 1000, exceeded: true });
  assert.equal(b.isOver('s', settings, nov), true);
  assert.equal(seen.length, 1, 'once per window, across restarts');
  const dec = new Date('2026-12-10T00:00:00Z');
  assert.equal(b.isOver('s', settings, dec), false);
  assert.equal(b.usage('s', settings, dec).bytes, 0);
  b.close();
});

test('a reset day moved back keeps the count (the new window holds the old); moved ahead it starts over', () => {
  const store = openQuotaStore({ dataDir: join(mkdtempSync(join(tmpdir(), 'hk-quota-')), 'data'), onExceeded: () => undefined, onWriteError: () => undefined, onCorrupt: () => undefined });
  const today = new Date('2026-11-26T12:00:00Z');
  const limit = { monthly_quota_bytes: 1000, quota_reset_day: 1 };
  store.add('s', limit, 1200, today);
  assert.equal(store.isOver('s', limit, today), true);
  const back = { ...limit, quota_reset_day: 27 };
  assert.equal(store.isOver('s', back, today), true, 'window 2026-10-27 holds every byte counted since 2026-11-01');
  assert.deepEqual(store.usage('s', back, today), { window_start: '2026-10-27', bytes: 1200, limit: 1000, exceeded: true });
  const ahead = { ...limit, quota_reset_day: 26 };
  assert.equal(store.isOver('s', ahead, today), false, 'window 2026-11-26 is a new one');
  assert.equal(store.usage('s', ahead, today).bytes, 0);
  store.close();
});

test('a damaged counter file refuses to open instead of resetting every quota', () => {
  const dir = mkdtempSync(join(tmpdir(), 'hk-quota-'));
  writeFileSync(join(dir, 'quota.json'), '{"version":1,"sites":{"s":');
  assert.throws(() => openQuotaStore({ dataDir: dir, onExceeded: () => undefined, onWriteError: () => undefined, onCorrupt: () => undefined }), /quota\.json: cannot read the quota counters/);
});

test('a counter with a negative, fractional or missing byte count is reported and counts from zero; the others load', () => {
  const dir = mkdtempSync(join(tmpdir(), 'hk-quota-'));
  const file = join(dir, 'quota.json');
  const nov = new Date('2026-11-20T00:00:00Z');
  const good = { window: '2026-11-01', bytes: 700, notified: false };
  writeFileSync(
    file,
    JSON.stringify({ version: 1, sites: { neg: { ...good, bytes: -5 }, frac: { ...good, bytes: 1.5 }, text: { ...good, bytes: '9' }, win: { ...good, window: 'soon' }, ok: good } }),
  );
  const corrupt: { file: string; site: string; value: unknown }[] = [];
  const store = openQuotaStore({ dataDir: dir, onExceeded: () => undefined, onWriteError: () => undefined, onCorrupt: (e) => corrupt.push(e) });
  assert.deepEqual(
    corrupt.map((c) => [c.file, c.site]),
    ['neg', 'frac', 'text', 'win'].map((site) => [file, site]),
  );
  const limit = { monthly_quota_bytes: 1000, quota_reset_day: null };
  for (const site of ['neg', 'frac', 'text', 'win']) assert.equal(store.usage(site, limit, nov).bytes, 0, site);
  assert.equal(store.usage('ok', limit, nov).bytes, 700);
  store.add('neg', limit, 10, nov);
  store.track(['neg']);
  store.close();
  assert.equal((JSON.parse(readFileSync(file, 'utf8')) as { sites: Record<string, { bytes: number }> }).sites['neg']?.bytes, 10, 'the file gets the counter from zero');
});

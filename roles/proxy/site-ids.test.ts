import { test } from 'node:test';
import assert from 'node:assert/strict';
import { resolveSiteIds, SITE_ID, siteIdFrom, siteIdFromFile, uniqueSiteId } from './site-ids.ts';

test('ids from file names and hostnames stay inside [A-Za-z0-9._-]{1,64} and are made unique', () => {
  assert.equal(siteIdFromFile('/etc/osproxy/sites.d/shop.yaml'), 'shop');
  assert.equal(siteIdFromFile('my shop (old).yml'), 'my-shop-old');
  assert.equal(siteIdFrom('...'), 'site');
  assert.equal(siteIdFrom('Ünïcode.example'), 'n-code.example');
  const long = siteIdFrom('x'.repeat(100));
  assert.equal(long.length, 64);
  assert.equal(uniqueSiteId('shop', new Set()), 'shop');
  assert.equal(uniqueSiteId('shop', new Set(['shop', 'shop-2'])), 'shop-3');
  const unique = uniqueSiteId(long, new Set([long]));
  assert.equal(unique.length, 64);
  assert.ok(unique.endsWith('-2'));
  for (const id of ['shop', long, unique, 'my-shop-old']) assert.match(id, SITE_ID);
});

test('resolveSiteIds: the serving file keeps its id, else the first file in sorted order; files without one get a fresh id', () => {
  const cold = resolveSiteIds([
    { file: 'a.yaml', wanted: 'shop', serving: undefined },
    { file: 'b.yaml', wanted: 'shop', serving: undefined },
    { file: 'shop.yaml', wanted: undefined, serving: undefined },
  ]);
  assert.deepEqual([...cold.ids], [['a.yaml', 'shop'], ['shop.yaml', 'shop-2']]);
  assert.deepEqual(cold.duplicates, [{ file: 'b.yaml', id: 'shop', owner: 'a.yaml' }]);
  const live = resolveSiteIds([
    { file: 'a.yaml', wanted: 'shop', serving: undefined },
    { file: 'b.yaml', wanted: 'shop', serving: 'shop' },
    { file: 'c.yaml', wanted: undefined, serving: 'kept' },
  ]);
  assert.deepEqual([...live.ids], [['b.yaml', 'shop'], ['c.yaml', 'kept']]);
  assert.deepEqual(live.duplicates, [{ file: 'a.yaml', id: 'shop', owner: 'b.yaml' }]);
});

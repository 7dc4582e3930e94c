import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SITE_ID, siteIdFrom, siteIdFromFile, uniqueSiteId } from './site-ids.ts';

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

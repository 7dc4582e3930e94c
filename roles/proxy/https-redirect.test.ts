import { test } from 'node:test';
import assert from 'node:assert/strict';
import { httpsLocation } from './https-redirect.ts';

test('the https location keeps the target and a non-default port; OPTIONS * goes to the root', () => {
  assert.equal(httpsLocation('shop.example:8080', '/a?b=1'), 'https://shop.example:8080/a?b=1');
  assert.equal(httpsLocation('Shop.Example:80', '/'), 'https://shop.example/');
  assert.equal(httpsLocation('shop.example', '*'), 'https://shop.example/');
});

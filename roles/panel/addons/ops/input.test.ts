/**
 * The pure input helpers of the operations suite: request strings trimmed as the reference
 * framework trims them (blank required keys left out, blank nullable ones null), slugs made from
 * names, and a JSON body that is no object refused.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jsonObject } from './handlers.ts';
import { trimInput } from '../../services/validation.ts';
import { slugify } from './service.ts';

test('trimInput trims the named keys, leaves out blank required ones and nulls blank nullable ones', () => {
  assert.deepEqual(trimInput({ name: '  Prod  ', slug: '   ', icon: ' star ', color: '#112233', other: '  kept  ' }, ['name', 'color'], ['slug', 'icon']), {
    name: 'Prod',
    slug: null,
    icon: 'star',
    color: '#112233',
    other: '  kept  ',
  });
  assert.deepEqual(trimInput({ name: '   ', color: 5 }, ['name', 'color']), { color: 5 });
  assert.deepEqual(trimInput(['x'], ['name']), ['x'], 'a non-object is left for the validator');
  assert.equal(trimInput(undefined, ['name']), undefined);
});

test('slugify drops accents and joins other characters with one dash', () => {
  assert.equal(slugify('Café Crème!'), 'cafe-creme');
  assert.equal(slugify('  Premium Plan!  '), 'premium-plan');
  assert.equal(slugify('日本'), 'tag');
});

test('jsonObject refuses a body that is not an object', () => {
  assert.deepEqual(jsonObject({ a: 1 }), { a: 1 });
  assert.deepEqual(jsonObject(undefined), {});
  assert.throws(() => jsonObject([1]), /the request body must be a JSON object/);
  assert.throws(() => jsonObject('x'), /the request body must be a JSON object/);
});

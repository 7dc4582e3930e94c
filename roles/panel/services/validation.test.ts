import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AppError } from '../../../src/core/app-error.ts';
import { COUNT, createShapeCheck, createValidator, EXTERNAL_ID, ID, NAME, problemsOf } from './validation.ts';

const validate = createValidator<{ id: number; memory?: number; list?: unknown[] }>({ required: ['id'], properties: { id: ID, memory: COUNT, list: { type: 'array' } } });

function problems(input: unknown, check: (input: unknown) => unknown = validate): string[] {
  try {
    check(input);
    return [];
  } catch (err) {
    assert.ok(err instanceof AppError && err.code === 'ERR_VALIDATION', String(err));
    return problemsOf(err).map((p) => `${p.field}: ${p.detail}`);
  }
}

test('ids and counts stop at a 32-bit column: 1e300 is an integer to JSON Schema, not a memory limit', () => {
  assert.deepEqual(problems({ id: 1, memory: 2_147_483_647 }), []);
  assert.deepEqual(problems({ id: 1, memory: 1e300 }), ['memory: the memory field must not be greater than 2147483647']);
  assert.deepEqual(problems({ id: 2_147_483_648 }), ['id: the id field must not be greater than 2147483647']);
});

test('input nested thousands deep is a validation error, not a crash', () => {
  const deep = JSON.parse(`${'['.repeat(20_000)}${']'.repeat(20_000)}`) as unknown[];
  assert.deepEqual(problems({ id: 1, list: deep }), [': the request is nested too deeply']);
  assert.deepEqual(problems({ id: 1, list: [[1], { a: 2 }] }), []);
});

test('required names are trimmed, and a blank one is required on a create and an update alike', () => {
  const create = createValidator<{ name: string }>({ required: ['name'], properties: { name: NAME, note: { type: 'string' } } });
  const update = createValidator<{ name?: string }>({ properties: { name: NAME, note: { type: 'string' } } });
  assert.deepEqual(create({ name: '  Survival \n', note: '  kept  ' }), { name: 'Survival', note: '  kept  ' });
  assert.deepEqual(problems({ name: '   ' }, create), ['name: the name field is required']);
  assert.deepEqual(problems({ name: '' }, update), ['name: the name field is required']);
  assert.deepEqual(problems({ name: ' \t ' }, update), ['name: the name field is required']);
  assert.deepEqual(update({}), {}, 'an update without the name keeps it');
  assert.deepEqual(problems('str', create), [': the request must be an object']);
});

test('a shape check refuses a body that is no object and wrongly typed groups, in the validators words', () => {
  const check = createShapeCheck({ limits: { type: 'object' } });
  for (const body of ['str', [], 5]) assert.deepEqual(problems(body, check), [': the request must be an object'], JSON.stringify(body));
  assert.deepEqual(problems({ limits: 'x' }, check), ['limits: the limits field must be an object']);
  assert.deepEqual(problems({ limits: [] }, check), ['limits: the limits field must be an object']);
  const body = { limits: { memory: 1 }, other: 'kept' };
  assert.equal(check(body), body, 'the body itself, nothing stripped');
  assert.deepEqual(check(undefined), {});
});

test('an external id is trimmed, blank is null, and anything but a string or null is refused', () => {
  const check = createValidator<{ external_id?: string | null }>({ properties: { external_id: EXTERNAL_ID } });
  assert.deepEqual(check({ external_id: '  whmcs-7 ' }), { external_id: 'whmcs-7' });
  assert.deepEqual(check({ external_id: ' \t ' }), { external_id: null });
  assert.deepEqual(check({ external_id: null }), { external_id: null });
  assert.deepEqual(check({}), {}, 'left out, it is left as it is');
  assert.deepEqual(problems({ external_id: 7 }, check), ['external_id: the external_id field must be a string or null']);
  assert.deepEqual(problems({ external_id: 'x'.repeat(192) }, check), ['external_id: the external_id field must not be longer than 191 characters']);
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AppError } from '../../../src/core/app-error.ts';
import { COUNT, createValidator, ID, problemsOf } from './validation.ts';

const validate = createValidator<{ id: number; memory?: number; list?: unknown[] }>({ required: ['id'], properties: { id: ID, memory: COUNT, list: { type: 'array' } } });

function problems(input: unknown): string[] {
  try {
    validate(input);
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

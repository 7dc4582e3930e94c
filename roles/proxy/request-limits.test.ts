import { test } from 'node:test';
import assert from 'node:assert/strict';
import { canonicalPath, headerSectionBytes } from './request-limits.ts';

test('paths are compared decoded once, lower case, with slashes collapsed and dot segments resolved', () => {
  const cases: [string, string][] = [
    ['/Admin', '/admin'],
    ['/%61dmin', '/admin'],
    ['//admin//x', '/admin/x'],
    ['/x/../admin', '/admin'],
    ['/../../admin', '/admin'],
    ['/a\\b', '/a/b'],
    ['/%2e%2e/admin', '/admin'],
    ['/%252e', '/%2e'],
    ['/100%', '/100%'],
    ['/a%zz%41', '/a%zza'],
    ['admin', '/admin'],
  ];
  for (const [raw, want] of cases) assert.equal(canonicalPath(raw), want, raw);
});

test('header section bytes: name, value, colon, space and CRLF per field', () => {
  assert.equal(headerSectionBytes(['Host', 'a.example', 'X', '']), 4 + 9 + 4 + 1 + 0 + 4);
  assert.equal(headerSectionBytes([]), 0);
});

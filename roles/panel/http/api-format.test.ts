/**
 * The API error envelope of errors that are not the request's fault: a database another process
 * keeps locked past the busy timeout is a 503 the client may retry, anything unknown a 500. The
 * shapes of included relations, as Pterodactyl's Fractal serializer writes them.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { test } from 'node:test';
import { apiErrors, relationship } from './api-format.ts';

test('a write refused because another process holds the database lock is a 503 saying so', () => {
  const dir = mkdtempSync(join(tmpdir(), 'hk-api-format-'));
  const holder = new DatabaseSync(join(dir, 'panel.sqlite'));
  const writer = new DatabaseSync(join(dir, 'panel.sqlite'));
  try {
    holder.exec('PRAGMA journal_mode = WAL; CREATE TABLE t (x INTEGER); BEGIN IMMEDIATE');
    writer.exec('PRAGMA busy_timeout = 0');
    let busy: unknown;
    try {
      writer.exec('INSERT INTO t VALUES (1)');
    } catch (err) {
      busy = err;
    }
    assert.deepEqual(apiErrors(busy), {
      status: 503,
      body: { errors: [{ code: 'ServiceUnavailableHttpException', status: '503', detail: 'the database is busy (locked by another process); retry' }] },
    });
    assert.equal(apiErrors(new Error('boom')).status, 500, 'other unexpected errors stay 500');
  } finally {
    holder.close();
    writer.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('an included relation is a list, an item, or a null_resource when the record is missing', () => {
  assert.deepEqual(relationship({ object: 'allocation', list: [{ id: 1 }, { id: 2 }] }), {
    object: 'list',
    data: [
      { object: 'allocation', attributes: { id: 1 } },
      { object: 'allocation', attributes: { id: 2 } },
    ],
  });
  assert.deepEqual(relationship({ object: 'allocation', list: [] }), { object: 'list', data: [] });
  assert.deepEqual(relationship({ object: 'node', one: { id: 3 } }), { object: 'node', attributes: { id: 3 } });
  assert.deepEqual(relationship({ object: 'server', one: undefined }), { object: 'null_resource', attributes: null });
});

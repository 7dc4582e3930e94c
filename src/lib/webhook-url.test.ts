import { test } from 'node:test';
import assert from 'node:assert/strict';
import { redactUrl, webhookTarget } from './webhook-url.ts';

test('redactUrl keeps scheme and host and masks userinfo, path, query and fragment', () => {
  assert.equal(redactUrl('https://chat.example.com/api/webhooks/123/s3cr3tT0ken'), 'https://chat.example.com/***');
  assert.equal(redactUrl('https://hooks.example.com/services/T0/B0/XyZ?token=abc#f'), 'https://hooks.example.com/***');
  assert.equal(redactUrl('http://user:p@ss@example.com:8080/hook'), 'http://***@example.com:8080/***');
  assert.equal(redactUrl('https://example.com?key=abc'), 'https://example.com/***');
  assert.equal(redactUrl('https://example.com/'), 'https://example.com/');
  assert.equal(redactUrl('https://example.com'), 'https://example.com');
  // Text that is no URL at all (what a config problem shows) is masked the same way.
  assert.equal(redactUrl('ftp://u:hunter2@example.com/hook/TOKEN'), 'ftp://***@example.com/***');
  assert.equal(redactUrl('notaurl/api/webhooks/1/TOKEN'), 'notaurl/***');
  assert.equal(redactUrl(''), '');
});

test('webhookTarget turns userinfo into basic authentication and refuses a malformed percent escape', () => {
  const t = webhookTarget('http://us%65r:p%40ss@127.0.0.1:9/hook?x=1');
  assert.ok('url' in t);
  assert.equal(t.url.href, 'http://127.0.0.1:9/hook?x=1');
  assert.equal(t.authorization, `Basic ${Buffer.from('user:p@ss').toString('base64')}`);
  const plain = webhookTarget('https://example.com/hook');
  assert.ok('url' in plain && plain.authorization === undefined);
  assert.match((webhookTarget('http://user:p%zz@example.com/') as { error: string }).error, /malformed percent escape/);
  assert.match((webhookTarget('http://us%e0er@example.com/') as { error: string }).error, /malformed percent escape/);
  assert.match((webhookTarget('no url') as { error: string }).error, /invalid URL/);
});

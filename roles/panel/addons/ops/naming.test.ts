import { test } from 'node:test';
import assert from 'node:assert/strict';
import { resolveName } from './naming.ts';

test('the default pattern names a server by id and owner', () => {
  assert.equal(resolveName('{server_id} - {username}', { server_id: 42, username: 'alice' }), '42 - alice');
});

test('every token resolves with its suffix and fallbacks', () => {
  const name = resolveName('{egg}@{node} {ram} {disk} {cpu} #{index}', { egg: 'Paper', node: 'fra-1', memory: 2048, disk: 10240, cpu: 150, index: 3 });
  assert.equal(name, 'Paper@fra-1 2048MB 10240MB 150 #3', 'the % sign is not an allowed character and is removed');
  assert.equal(resolveName('{username}-{egg}-{node}', {}), 'admin-unknown-unknown');
});

test('unknown tokens stay literal apart from the braces, which are removed', () => {
  assert.equal(resolveName('srv {nope} [{index}]', { index: 7 }), 'srv nope [7]');
});

test('characters outside the allowed set are removed and the result is cut to 191', () => {
  assert.equal(resolveName('a/b\\c<d>e!f$g(h):i_j.k', {}), 'abcdefg(h):i_j.k');
  assert.equal(resolveName('{username}', { username: 'x'.repeat(300) }).length, 191);
});

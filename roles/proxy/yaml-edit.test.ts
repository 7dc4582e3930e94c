import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse } from 'yaml';
import { patchYamlText, setYamlId } from './yaml-edit.ts';

const TEXT = `# Site header comment

# about the names
hostnames: [a.example, b.example] # two names
origin:
  url: http://127.0.0.1:3000 # local
  # a timeout note
  read_timeout_ms: 1000
tls:
  enabled: false
`;

test('setYamlId adds the id on top (header comments stay above it) or replaces an empty one', () => {
  const added = setYamlId(TEXT, 'a');
  assert.match(added, /^# Site header comment\n\n# about the names\nid: a\nhostnames: \[a\.example, b\.example\] # two names\n/);
  assert.match(added, /url: http:\/\/127\.0\.0\.1:3000 # local/);
  assert.equal(setYamlId('id: "" # set by the proxy\nhostnames: [a]\n', 'x'), 'id: "x" # set by the proxy\nhostnames: [a]\n');
});

test('patchYamlText changes values in place: comments of kept keys survive, removed keys go', () => {
  const out = patchYamlText(TEXT, { hostnames: ['a.example', 'c.example'], origin: { url: 'http://127.0.0.1:4000', read_timeout_ms: 1000 }, enabled: false });
  assert.deepEqual(parse(out), { hostnames: ['a.example', 'c.example'], origin: { url: 'http://127.0.0.1:4000', read_timeout_ms: 1000 }, enabled: false });
  assert.match(out, /^# Site header comment/);
  assert.match(out, /# two names/);
  assert.match(out, /url: http:\/\/127\.0\.0\.1:4000 # local/);
  assert.match(out, /# a timeout note\n  read_timeout_ms: 1000/);
  assert.doesNotMatch(out, /tls/);
  assert.deepEqual(parse(patchYamlText('not: [valid', { a: 1 })), { a: 1 }, 'unparseable text is replaced');
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, lstatSync, mkdtempSync, readFileSync, readdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { patchYamlText, setYamlId, writeFileAtomic } from './yaml-edit.ts';

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

test('patchYamlText keeps a ${VAR} reference the body repeats expanded (a GET sent back), and writes a changed value', (t) => {
  process.env['HK_YAML_EDIT_TOKEN'] = 'secret-from-env-0123456789';
  process.env['HK_YAML_EDIT_PORT'] = '8080';
  t.after(() => {
    delete process.env['HK_YAML_EDIT_TOKEN'];
    delete process.env['HK_YAML_EDIT_PORT'];
  });
  const text = 'admin:\n  tokens:\n    - { name: ops, token: "${HK_YAML_EDIT_TOKEN}", role: admin }\nlisten_http: ["127.0.0.1:${HK_YAML_EDIT_PORT}"]\nlog_level: info\n';
  const sentBack = { admin: { tokens: [{ name: 'ops', token: 'secret-from-env-0123456789', role: 'admin' }] }, listen_http: ['127.0.0.1:8080'], log_level: 'debug' };
  const out = patchYamlText(text, sentBack);
  assert.doesNotMatch(out, /secret-from-env/);
  assert.match(out, /token: "\$\{HK_YAML_EDIT_TOKEN\}"/);
  assert.match(out, /"127\.0\.0\.1:\$\{HK_YAML_EDIT_PORT\}"/);
  assert.match(out, /log_level: debug/);
  const rotated = patchYamlText(text, { ...sentBack, admin: { tokens: [{ name: 'ops', token: 'typed-in-token-0123456789', role: 'admin' }] } });
  assert.match(rotated, /token: "typed-in-token-0123456789"/);
});

test('writeFileAtomic keeps an existing file mode, writes a new one with the given mode, and writes through a symlink', () => {
  const dir = mkdtempSync(join(tmpdir(), 'hk-yaml-'));
  const kept = join(dir, 'kept.yaml');
  writeFileSync(kept, 'a: 1\n');
  chmodSync(kept, 0o640);
  writeFileAtomic(kept, 'a: 2\n');
  assert.equal(readFileSync(kept, 'utf8'), 'a: 2\n');
  assert.equal(statSync(kept).mode & 0o777, 0o640);
  writeFileAtomic(join(dir, 'new.yaml'), 'b: 1\n', 0o600);
  assert.equal(statSync(join(dir, 'new.yaml')).mode & 0o777, 0o600);
  const link = join(dir, 'link.yaml');
  symlinkSync('kept.yaml', link);
  writeFileAtomic(link, 'a: 3\n');
  assert.ok(lstatSync(link).isSymbolicLink(), 'the link stays a link');
  assert.equal(readFileSync(kept, 'utf8'), 'a: 3\n', 'its target got the text');
  assert.deepEqual(readdirSync(dir).sort(), ['kept.yaml', 'link.yaml', 'new.yaml'], 'no temporary file left');
});

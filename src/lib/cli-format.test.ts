import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { socketPathFromConfig } from './cli-format.ts';

test('the CLI socket: from the config file (also one with a mistake elsewhere), the fallback for a missing default, an error for a missing, unreadable or unparsable named file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'hk-cli-socket-'));
  const named = join(dir, 'agent.yaml');
  const fallback = '/run/default.sock';
  writeFileSync(named, 'general:\n  socket_path: /run/mine.sock\n');
  assert.equal(socketPathFromConfig(named, join(dir, 'default.yaml'), fallback), '/run/mine.sock');
  assert.equal(socketPathFromConfig(join(dir, 'default.yaml'), join(dir, 'default.yaml'), fallback), fallback, 'no file at the default path: the default socket');
  assert.throws(() => socketPathFromConfig(join(dir, 'typo.yaml'), join(dir, 'default.yaml'), fallback), /no config file at .*typo\.yaml \(leave --config out to use the default socket \/run\/default\.sock\)/);
  writeFileSync(named, 'general:\n  socket_path: /run/mine.sock\nbandwidth:\n  bad: [x\n');
  assert.equal(socketPathFromConfig(named, join(dir, 'default.yaml'), fallback), '/run/mine.sock', 'a YAML mistake after the socket path');
  writeFileSync(named, 'general: [unclosed\n');
  assert.throws(() => socketPathFromConfig(named, join(dir, 'default.yaml'), fallback), /agent\.yaml does not parse \(.+\), so its general\.socket_path is unknown/);
  assert.throws(() => socketPathFromConfig(dir, join(dir, 'default.yaml'), fallback), /cannot read .* \(it is a directory\)/);
  writeFileSync(named, 'api:\n  port: 8480\n');
  assert.equal(socketPathFromConfig(named, join(dir, 'default.yaml'), fallback), fallback, 'no socket_path in a good file: the default socket');
});

test('the CLI socket: an empty or unusable general.socket_path is named, not replaced by the default socket', () => {
  const dir = mkdtempSync(join(tmpdir(), 'hk-cli-socket-'));
  const file = join(dir, 'config.yaml');
  const fallback = '/run/default.sock';
  for (const [yaml, what] of [
    ["general:\n  socket_path: ''\n", 'general.socket_path is empty'],
    ['general:\n  socket_path:\n', 'general.socket_path is empty'],
    ['general:\n  socket_path: 5\n', 'general.socket_path is not a path'],
    ['general: none\n', 'general is not a section'],
  ] as const) {
    writeFileSync(file, yaml);
    assert.throws(() => socketPathFromConfig(file, join(dir, 'default.yaml'), fallback), { message: `${what} in ${file}: set general.socket_path to the daemon's socket, or leave it out for the default ${fallback}` }, yaml);
  }
  writeFileSync(file, 'general:\n  log_level: x\n');
  assert.equal(socketPathFromConfig(file, join(dir, 'default.yaml'), fallback), fallback, 'a general section without socket_path: the default');
  writeFileSync(file, '- general\n- socket_path\n');
  assert.throws(() => socketPathFromConfig(file, join(dir, 'default.yaml'), fallback), /config\.yaml does not hold a mapping of keys, so its general\.socket_path is unknown/, 'a list, not the default socket');
  writeFileSync(file, '');
  assert.equal(socketPathFromConfig(file, join(dir, 'default.yaml'), fallback), fallback, 'an empty file: every default');
});

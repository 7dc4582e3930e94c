import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { socketPathFromConfig } from './cli-format.ts';

test('the CLI socket: from the config file, the fallback for a missing default or a broken file, an error for a missing named file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'hk-cli-socket-'));
  const named = join(dir, 'agent.yaml');
  const fallback = '/run/default.sock';
  writeFileSync(named, 'general:\n  socket_path: /run/mine.sock\n');
  assert.equal(socketPathFromConfig(named, join(dir, 'default.yaml'), fallback), '/run/mine.sock');
  assert.equal(socketPathFromConfig(join(dir, 'default.yaml'), join(dir, 'default.yaml'), fallback), fallback, 'no file at the default path: the default socket');
  assert.throws(() => socketPathFromConfig(join(dir, 'typo.yaml'), join(dir, 'default.yaml'), fallback), /no config file at .*typo\.yaml \(leave --config out to use the default socket \/run\/default\.sock\)/);
  writeFileSync(named, 'general: [unclosed\n');
  assert.equal(socketPathFromConfig(named, join(dir, 'default.yaml'), fallback), fallback, 'a file that does not parse: the default socket');
});

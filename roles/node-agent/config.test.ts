import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { ConfigError, loadConfigText, type ConfigProblem } from '../../src/core/config-loader.ts';
import { DEFAULT_CONFIG_PATH, isListenHost, nodeAgentConfigPath, nodeAgentConfigSpec } from './config.ts';

const dir = mkdtempSync(join(tmpdir(), 'hk-agent-config-'));
const tokenFile = join(dir, 'token');
writeFileSync(tokenFile, `${'ab'.repeat(32)}\n`, { mode: 0o600 });

/** A valid agent config with `over` merged per section. */
function configText(over: Record<string, Record<string, unknown>> = {}): string {
  const base: Record<string, Record<string, unknown>> = {
    general: { socket_path: join(dir, 'agent.sock') },
    database: { path: join(dir, 'agent.db') },
    api: { listen: '127.0.0.1', port: 8480 },
    panel: { url: 'http://127.0.0.1:9', token_file: tokenFile },
  };
  for (const [k, v] of Object.entries(over)) base[k] = { ...base[k], ...v };
  return stringify(base);
}

/** The problems `check` would print for the config; [] when it loads. */
function problemsOf(over: Record<string, Record<string, unknown>>): ConfigProblem[] {
  try {
    loadConfigText(configText(over), 'config.yaml', nodeAgentConfigSpec);
    return [];
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
}

test('a valid config loads', () => {
  assert.deepEqual(problemsOf({}), []);
});

test('durations beyond what a timer holds are refused with their path', () => {
  const problems = problemsOf({ cleanup: { interval: '30d' }, bandwidth: { poll_interval: '25d' }, scheduler: { check_interval: '24d' } });
  assert.deepEqual(problems.map((p) => p.path).sort(), ['/bandwidth/poll_interval', '/cleanup/interval']);
  for (const p of problems) assert.match(p.message, /must be at most 24d/);
});

test('an empty token file path is refused', () => {
  assert.deepEqual(problemsOf({ panel: { token_file: '' } }).map((p) => p.path), ['/panel/token_file']);
});

test('check refuses what serve could not run: a token file that is a directory, a socket path that is a file or too long, a database path that is a directory', () => {
  const dir = mkdtempSync(join(tmpdir(), 'hk-agent-cfg-'));
  writeFileSync(join(dir, 'regular.txt'), 'keep me');
  const problems = problemsOf({ panel: { token_file: dir }, general: { socket_path: join(dir, 'regular.txt') }, database: { path: dir } });
  assert.deepEqual(
    problems.map((p) => [p.path, p.message]).sort(),
    [
      ['/database/path', `${dir} is a directory: name the database file (for example ${dir}/bandwidth-node.db)`],
      ['/general/socket_path', `${join(dir, 'regular.txt')} exists and is not a socket: the socket path must name a file of its own`],
      ['/panel/token_file', `token file ${dir} is a directory: give the file holding the node's pairing token`],
    ],
  );
  assert.match(problemsOf({ general: { socket_path: `/tmp/${'a'.repeat(120)}.sock` } })[0]?.message ?? '', /too long for a unix socket \(at most 107 bytes\)/);
});

test('a number where a duration goes says what a duration looks like', () => {
  assert.deepEqual(
    problemsOf({ docker: { discovery_interval: 10 } }).map((p) => [p.path, p.message]),
    [['/docker/discovery_interval', 'must be a duration such as 5s, 1m or 1h (a string)']],
  );
});

test('files must be absolute paths: the service starts in /, a command wherever it is run', () => {
  assert.deepEqual(
    problemsOf({ database: { path: 'db/agent.db' }, general: { socket_path: 'agent.sock' } }).map((p) => p.path).sort(),
    ['/database/path', '/general/socket_path'],
  );
});

test('an empty socket path is refused', () => {
  assert.deepEqual(problemsOf({ general: { socket_path: '' } }).map((p) => p.path), ['/general/socket_path']);
});

test('api.listen must be an IP literal or a host name', () => {
  for (const bad of ['999.1.1.1', '1.2.3', '127.0.0.1:8480', '[::1]', 'bad host', 'under_score.example', '-x.example', 'a..b']) {
    const problems = problemsOf({ api: { listen: bad } });
    assert.deepEqual(problems.map((p) => p.path), ['/api/listen'], bad);
    assert.match(problems[0]?.message ?? '', /must be an IP address/);
  }
  for (const ok of ['0.0.0.0', '::', '::1', '127.0.0.1', 'localhost', 'node-1.example.com', 'example.com.']) {
    assert.ok(isListenHost(ok), ok);
    assert.deepEqual(problemsOf({ api: { listen: ok } }), [], ok);
  }
  // A disabled API binds nothing, so its listen is not checked.
  assert.deepEqual(problemsOf({ api: { enabled: false, listen: '999.1.1.1' } }), []);
});

test('the config path: the flag, then BANDWIDTH_NODE_CONFIG unless empty, then the default', (t) => {
  const saved = process.env['BANDWIDTH_NODE_CONFIG'];
  t.after(() => (saved === undefined ? delete process.env['BANDWIDTH_NODE_CONFIG'] : (process.env['BANDWIDTH_NODE_CONFIG'] = saved)));
  process.env['BANDWIDTH_NODE_CONFIG'] = '/etc/agent.yaml';
  assert.equal(nodeAgentConfigPath('/x.yaml'), '/x.yaml');
  assert.equal(nodeAgentConfigPath(undefined), '/etc/agent.yaml');
  process.env['BANDWIDTH_NODE_CONFIG'] = '';
  assert.equal(nodeAgentConfigPath(undefined), DEFAULT_CONFIG_PATH, 'set but empty (a blank line in a unit file): the default');
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { stringify } from 'yaml';
import { ConfigError, loadConfigText, type ConfigProblem } from '../../src/core/config-loader.ts';
import { bandwidthdConfigSpec } from './config.ts';

function problemsOf(config: Record<string, unknown>): ConfigProblem[] {
  try {
    loadConfigText(stringify(config), 'config.yaml', bandwidthdConfigSpec);
    return [];
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
}

test('durations beyond what a timer holds are refused with their path', () => {
  assert.deepEqual(problemsOf({ bandwidth: { poll_interval: '24d' }, notifications: { batch_window: '0s' } }), []);
  const problems = problemsOf({ bandwidth: { poll_interval: '30d' }, status: { update_interval: '25d' }, notifications: { batch_window: '25d' } });
  assert.deepEqual(problems.map((p) => p.path).sort(), ['/bandwidth/poll_interval', '/notifications/batch_window', '/status/update_interval']);
  for (const p of problems) assert.match(p.message, /must be at most 24d/);
});

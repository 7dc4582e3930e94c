/**
 * The agent CLI against the answers of an older running agent: after the executable is replaced
 * and before the service restarts, `status` talks to the old process.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { statusCommand } from './cli.ts';

test('status prints what an older agent reports and says what it does not, instead of failing', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'hk-agent-cli-'));
  const socket = join(dir, 'agent.sock');
  // The status of a release before `database` was added.
  const old = { version: '1.0.0', uptime_seconds: 5, panel: { registered: true, node_id: 3, last_heartbeat_at: null, last_error: null }, docker: 'connected', containers: 1, servers: 1, throttled: 0, quota_exceeded: 0, config_version: 2, timezone: 'UTC', traffic_control: true, outbox: 0 };
  const server = createServer((_req, res) => res.end(JSON.stringify({ success: true, data: old })));
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  const printed: string[] = [];
  const write = process.stdout.write.bind(process.stdout);
  t.after(() => {
    process.stdout.write = write;
    server.close();
    rmSync(dir, { recursive: true, force: true });
  });
  process.stdout.write = ((chunk: string) => printed.push(chunk) > 0) as typeof process.stdout.write;
  await statusCommand(socket, false);
  process.stdout.write = write;
  const text = printed.join('');
  assert.match(text, /registered as node 3/);
  assert.match(text, /database: +not reported: the running agent is older than this executable/);
});

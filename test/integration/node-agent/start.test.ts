/**
 * How `bandwidth-node serve` refuses to start: a node API it cannot listen on ends the process
 * (exit 1, its local socket closed, so systemd restarts it), a second agent on the same store is
 * refused, SIGHUP does not stop it, and a socket path naming a file that is not a socket is refused, never deleted.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { freePort, runHostkit, startHostkit } from '../hostkit-process.ts';

const TOKEN = 'cd'.repeat(32);

/** A config in a new directory; the panel is a port where nothing listens (the agent retries). */
async function agentConfig(over: { socket?: string; db?: string; port?: number } = {}): Promise<{ dir: string; file: string; env: NodeJS.ProcessEnv }> {
  const dir = mkdtempSync(join(tmpdir(), 'hk-agent-start-'));
  const tokenFile = join(dir, 'token');
  writeFileSync(tokenFile, `${TOKEN}\n`, { mode: 0o600 });
  const file = join(dir, 'config.yaml');
  writeFileSync(
    file,
    stringify({
      general: { socket_path: over.socket ?? join(dir, 'agent.sock') },
      logging: { console: true, level: 'info' },
      database: { path: over.db ?? join(dir, 'agent.db') },
      api: { listen: '127.0.0.1', port: over.port ?? (await freePort()) },
      panel: { url: `http://127.0.0.1:${await freePort()}`, token_file: tokenFile },
      traffic_control: { enabled: false },
    }),
  );
  return { dir, file, env: { DOCKER_HOST: `unix://${join(dir, 'no-docker.sock')}` } };
}

test('a node API port in use ends the agent with exit 1 and frees its local socket', async () => {
  const busy = createServer();
  await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
  try {
    const port = (busy.address() as { port: number }).port;
    const { dir, file, env } = await agentConfig({ port });
    const r = runHostkit(['node-agent', 'serve', '--config', file], { env });
    assert.equal(r.code, 1);
    assert.match(r.stderr, new RegExp(`^error: cannot listen on api\\.listen 127\\.0\\.0\\.1 port ${port}: .*EADDRINUSE`, 'm'));
    assert.match(r.stdout, /"level":"error".*"msg":"start failed: cannot listen on api\.listen .*EADDRINUSE/, 'the log says why');
    assert.equal(existsSync(join(dir, 'agent.sock')), false, 'the local socket is closed and removed');
    assert.equal(existsSync(join(dir, 'agent.db.lock')), false, 'the store lock is released');
  } finally {
    busy.close();
  }
});

test('a second agent on the same database is refused, whatever its socket and port', async () => {
  const first = await agentConfig();
  const agent = startHostkit(['node-agent', 'serve', '--config', first.file], { env: first.env });
  try {
    await agent.waitFor(/node API listening/);
    const twin = await agentConfig({ db: join(first.dir, 'agent.db') });
    const r = runHostkit(['node-agent', 'serve', '--config', twin.file], { env: twin.env });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /another bandwidth-node is already running \(pid \d+ holds .*agent\.db\.lock\)/);
    assert.equal(existsSync(join(twin.dir, 'agent.sock')), false);
    // A hangup (a closed terminal, a habit from other daemons) is not a stop.
    agent.child.kill('SIGHUP');
    await agent.waitFor(/reads its config at start only/);
  } finally {
    assert.equal(await agent.stop('SIGTERM'), 0);
  }
  assert.equal(existsSync(join(first.dir, 'agent.db.lock')), false);
});

test('a socket path that names a regular file is refused and the file is kept', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'hk-agent-victim-'));
  const victim = join(dir, 'notes.txt');
  writeFileSync(victim, 'important\n');
  const { file, env } = await agentConfig({ socket: victim });
  const r = runHostkit(['node-agent', 'serve', '--config', file], { env });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /notes\.txt exists and is not a socket/);
  assert.equal(readFileSync(victim, 'utf8'), 'important\n');
});

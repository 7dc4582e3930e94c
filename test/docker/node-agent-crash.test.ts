/**
 * kill -9 at random moments while the node agent counts real traffic and holds undelivered
 * events: after each restart the counters continue exactly from the last committed cycle (no
 * byte lost or counted twice) and every event acknowledged before a crash reaches the panel.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { hostVethOf } from '../../src/lib/veth.ts';
import type { ServerStatsRecord } from '../../src/contracts/types.ts';
import { freePort, startHostkit, type Daemon } from '../integration/hostkit-process.ts';
import { startFakePanel, type FakePanel } from '../integration/node-agent/fake-panel.ts';
import { sinkCommand, startDocker, type DockerHarness, type TestContainer } from './harness.ts';

const TOKEN = 'ef'.repeat(32);
const UUID = '7d3a0e9c-3f4b-4c5d-9e6f-708192a3b4c5';
const SINK = 9000;
const ROUNDS = 5;
const dir = mkdtempSync(join(tmpdir(), 'hk-agent-crash-'));
const configFile = join(dir, 'config.yaml');
let docker: DockerHarness | undefined;
let box: TestContainer;
let panel: FakePanel;
let agent: Daemon | undefined;
let apiBase = '';

function start(): Daemon {
  return startHostkit(['node-agent', 'serve', '--config', configFile], { env: { DOCKER_HOST: docker!.endpoint } });
}

async function serverStats(): Promise<ServerStatsRecord | undefined> {
  try {
    const res = await fetch(`${apiBase}/api/v1/stats`, { headers: { authorization: `Bearer ${TOKEN}` } });
    return ((await res.json()) as { data: { servers: ServerStatsRecord[] } }).data.servers.find((s) => s.uuid === UUID);
  } catch {
    return undefined;
  }
}

async function until<T>(what: string, fn: () => Promise<T | undefined>, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}\n${agent?.output().slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Streams zeros to the container until stop() is called. */
function stream(c: TestContainer): { stop(): void } {
  const sock = connect({ host: c.ip, port: SINK });
  const chunk = Buffer.alloc(64 * 1024);
  let open = true;
  const pump = (): void => {
    while (open && sock.write(chunk));
  };
  sock.on('connect', pump).on('drain', pump).on('error', () => undefined);
  return {
    stop() {
      open = false;
      sock.destroy();
    },
  };
}

before(async () => {
  docker = await startDocker({ name: 'agentcrash' });
  await docker.createNetwork('hk-crash', '10.251.40.0/24');
  box = await docker.runContainer({ name: UUID, network: 'hk-crash', cmd: sinkCommand(SINK) });
  panel = await startFakePanel(TOKEN);
  panel.heartbeatSeconds = 1;
  const port = await freePort();
  apiBase = `http://127.0.0.1:${port}`;
  const tokenFile = join(dir, 'token');
  writeFileSync(tokenFile, TOKEN, { mode: 0o600 });
  writeFileSync(
    configFile,
    stringify({
      general: { socket_path: join(dir, 'agent.sock') },
      logging: { file: join(dir, 'agent.log'), console: true },
      database: { path: join(dir, 'agent.db') },
      docker: { discovery_interval: '1s' },
      // Short cycles so that the kills land inside them.
      bandwidth: { poll_interval: '100ms' },
      scheduler: { check_interval: '1s' },
      api: { listen: '127.0.0.1', port },
      panel: { url: panel.url, token_file: tokenFile },
    }),
  );
});

after(async () => {
  await agent?.stop('SIGKILL');
  await panel?.close();
  await docker?.stop();
});

test('kill -9 during cycles loses no committed count, counts nothing twice, delivers every queued event', async () => {
  panel.failWith = 503; // the panel is down: events stay in the outbox
  agent = start();
  await agent.waitFor(/node API listening/);
  await until('server seen', async () => ((await serverStats())?.online ? true : undefined));
  const veth = (await hostVethOf(box.pid))?.iface as string;
  const delivered = (): number => Number(readFileSync(`/sys/class/net/${veth}/statistics/tx_bytes`, 'utf8'));
  // Quiet link: the agent's baseline is behind us; from here every byte must be counted once.
  await new Promise((r) => setTimeout(r, 500));
  const totalAt0 = (await serverStats())?.rx_bytes_total as number;
  const counterAt0 = delivered();

  const acknowledged: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const speed = 100 + round;
    const res = await fetch(`${apiBase}/api/v1/limits`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ config_version: 0, timezone: 'UTC', servers: [{ uuid: UUID, enabled: true, rx_speed_mbps: speed, tx_speed_mbps: 0, exceed_action: 'none' }] }),
    });
    if (res.status === 200) acknowledged.push(speed);
    const traffic = stream(box);
    await new Promise((r) => setTimeout(r, 300 + Math.floor(Math.random() * 700)));
    await agent.stop('SIGKILL');
    traffic.stop();
    agent = start();
    await agent.waitFor(/node API listening/);
  }

  // Let the agent catch up on a quiet link, then compare with the interface's own counter.
  await new Promise((r) => setTimeout(r, 1000));
  const counted = ((await serverStats())?.rx_bytes_total as number) - totalAt0;
  const actual = delivered() - counterAt0;
  assert.ok(actual > 10 * 1024 * 1024, `traffic flowed (${actual} bytes)`);
  assert.ok(Math.abs(counted - actual) <= 64 * 1024, `counted ${counted} bytes, the interface carried ${actual}`);

  panel.failWith = null;
  await panel.waitFor((p) => acknowledged.every((speed) => p.events.some((e) => e.type === 'speed_applied' && e.message.includes(`${speed} Mbit/s in`))), 20_000);
  assert.equal(acknowledged.length, ROUNDS);
});

/**
 * The bandwidth addon with the real node agent on loopback (no containers needed): a node that
 * registers with an old config_version pulls the limits, a limits change afterwards is pushed at
 * once (well inside a heartbeat interval), and the node-facing API's middleware and errors of
 * spec/1 §4.2, §5 and §7.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { freePort, runHostkit, startHostkit, type Daemon } from '../hostkit-process.ts';
import { adminSession } from './admin-session.ts';
import { bandwidthSettingsForm } from './bandwidth-settings.ts';
import { startPanel, type TestPanel } from './harness.ts';

type Item = { attributes: Record<string, unknown> };
type Envelope = { success: boolean; data: Record<string, unknown> | null; error: string | null; meta: { version: string; code?: string } };

describe('panel bandwidth addon with a node agent', () => {
  let panel: TestPanel;
  let admin: string;
  let token: string;
  let agent: Daemon;
  let agentConfig: string;
  let nodeId: number;
  let eggId: number;
  let ownerId: number;
  const allocations: number[] = [];

  const node = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: Envelope }> => {
    const res = await fetch(`${panel.url}/api/bandwidth/node${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: (await res.json()) as Envelope };
  };
  const agentVersion = (): number => {
    const r = runHostkit(['node-agent', 'status', '--json', '--config', agentConfig]);
    assert.equal(r.code, 0, r.stderr);
    return (JSON.parse(r.stdout) as { config_version: number }).config_version;
  };
  const until = async (what: string, fn: () => boolean | Promise<boolean>, ms = 10_000): Promise<number> => {
    const start = Date.now();
    while (!(await fn())) {
      if (Date.now() - start > ms) throw new Error(`timed out waiting for ${what}\n${agent?.output().slice(-3000) ?? ''}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    return Date.now() - start;
  };
  const createServer = async (name: string, bandwidth?: Record<string, unknown>): Promise<{ id: number; uuid: string }> => {
    const r = await panel.api(admin, 'POST', '/api/application/servers', { name, user: ownerId, egg: eggId, allocation: { default: allocations.shift() }, ...(bandwidth ? { bandwidth } : {}) });
    assert.equal(r.status, 201, r.text);
    return (r.body as Item).attributes as { id: number; uuid: string };
  };

  before(async () => {
    panel = await startPanel();
    panel.createUser('root', { admin: true });
    ownerId = panel.createUser('owner');
    admin = panel.createKey('root', 'application');
    const created = panel.cli('node', 'create', '--name', 'node-a', '--fqdn', '127.0.0.1', '--json');
    assert.equal(created.code, 0, created.stderr);
    const nodeJson = JSON.parse(created.stdout) as { attributes: { id: number }; meta: { pairing_token: string } };
    nodeId = nodeJson.attributes.id;
    token = nodeJson.meta.pairing_token;
    const allocs = await panel.api(admin, 'POST', `/api/application/nodes/${nodeId}/allocations`, { ip: '127.0.0.1', ports: ['30000-30004'] });
    allocations.push(...(allocs.body as { data: Item[] }).data.map((a) => a.attributes.id as number));
    const nest = await panel.api(admin, 'POST', '/api/application/nests', { name: 'Games' });
    const egg = await panel.api(admin, 'POST', `/api/application/nests/${(nest.body as Item).attributes.id as number}/eggs`, { name: 'Game', docker_image: 'busybox:latest', startup: 'sh' });
    eggId = (egg.body as Item).attributes.id as number;
  });
  after(async () => {
    await agent?.stop();
    await panel?.stop();
  });

  it('a node registering with an old config_version pulls the limits', async () => {
    await createServer('defaults');
    await createServer('capped', { tx_speed_mbps: 50, tx_quota_month_gb: 100, exceed_action: 'throttle' });
    const tokenFile = join(panel.dir, 'node-token');
    writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
    agentConfig = join(panel.dir, 'agent.yaml');
    writeFileSync(
      agentConfig,
      stringify({
        general: { socket_path: join(panel.dir, 'agent.sock') },
        logging: { console: true, file: '', level: 'info' },
        database: { path: join(panel.dir, 'agent.db') },
        api: { listen: '127.0.0.1', port: await freePort() },
        panel: { url: panel.url, token_file: tokenFile },
        traffic_control: { enabled: false },
      }),
    );
    agent = startHostkit(['node-agent', 'serve', '--config', agentConfig], { env: { DOCKER_HOST: `unix://${join(panel.dir, 'no-docker.sock')}` } });
    await agent.waitFor(/node API listening/);
    await panel.daemon.waitFor(/node node-a registered/);
    // Two servers created, one with its own limits: three changes, three bumps.
    await until('the agent to pull config_version 3', () => agentVersion() === 3);
  });

  it('pushes a limits change to the online node at once, not at the next heartbeat', async () => {
    const took = await (async () => {
      const start = Date.now();
      await createServer('third', { rx_speed_mbps: 20 });
      await until('the push of config_version 5', () => agentVersion() === 5);
      return Date.now() - start;
    })();
    assert.ok(took < 10_000, `applied after ${took} ms, while heartbeats come every 60 s`);
    await panel.daemon.waitFor(/pushed limits to node node-a/, 5000);
  });

  it('adopts a new heartbeat interval from the settings at once, without a restart', async () => {
    const web = await adminSession(panel.url, 'root', 'correct horse battery');
    await bandwidthSettingsForm(web).save({ poll_interval_seconds: 15 });
    await agent.waitFor(/"heartbeat_seconds":15,"was":60,"msg":"heartbeat interval changed by the panel"/, 10_000);
    assert.equal((panel.daemon.output().match(/node node-a registered/g) ?? []).length, 1, 'the refresh is not news in the panel log');
  });

  it('serves the node its own servers\' effective limits', async () => {
    const r = await node('GET', '/limits');
    assert.equal(r.status, 200);
    assert.equal(r.body.meta.code, undefined, 'no meta.code on success');
    const servers = (r.body.data as { servers: Record<string, unknown>[] }).servers;
    assert.equal(servers.length, 3);
    const capped = servers.find((s) => s.tx_speed_mbps === 50);
    assert.ok(capped !== undefined);
    assert.equal(capped.rx_speed_mbps, 0, 'an override row is taken whole, never mixed with the defaults');
    assert.equal(capped.throttle_tx_mbps, 5);
  });

  it('applies its middleware: JSON content type, token, validation naming the first field', async () => {
    const typed = await node('POST', '/heartbeat', undefined, { 'content-type': 'text/plain' });
    assert.equal(typed.status, 422);
    assert.equal(typed.body.meta.code, 'ERR_VALIDATION');
    const keyed = await fetch(`${panel.url}/api/bandwidth/node/limits`, { headers: { authorization: `Bearer ${admin}` } });
    assert.equal(keyed.status, 401, 'panel API keys are not pairing tokens');
    const bad = await node('POST', '/register', { version: '1.0.0', hostname: 'h', port: 70000 });
    assert.equal(bad.status, 422);
    assert.match(bad.body.error ?? '', /^port/);
    const url = await node('POST', '/register', { version: '1.0.0', hostname: 'h', port: 8480, api_url: 'ftp://x' });
    assert.equal(url.status, 422);
    assert.match(url.body.error ?? '', /api_url/);
    const events = await node('POST', '/events', { events: [{ server_uuid: 'x', type: 'restored', period: null, direction: null, message: 'x'.repeat(1001), occurred_at: new Date().toISOString() }] });
    assert.equal(events.status, 422);
    assert.match(events.body.error ?? '', /message/);
  });

  it('counts but skips events for servers of other nodes, and suspends idempotently', async () => {
    const own = await createServer('quota');
    const occurred = new Date().toISOString();
    const r = await node('POST', '/events', {
      events: [
        { server_uuid: own.uuid, type: 'quota_exceeded', period: 'day', direction: 'tx', message: 'tx day quota reached', occurred_at: occurred },
        { server_uuid: '00000000-0000-4000-8000-000000000000', type: 'throttled', period: 'day', direction: 'tx', message: 'not ours', occurred_at: occurred },
      ],
    });
    assert.equal(r.status, 200);
    assert.equal(r.body.data?.accepted, 2);
    const unknown = await node('POST', '/suspend', { server_uuid: '00000000-0000-4000-8000-000000000000', reason: 'quota' });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.meta.code, 'ERR_UNKNOWN_SERVER');
    const first = await node('POST', '/suspend', { server_uuid: own.uuid, reason: 'tx day quota reached' });
    assert.equal(first.status, 200);
    assert.equal(first.body.data?.suspended, true);
    assert.equal(((await panel.api(admin, 'GET', `/api/application/servers/${own.id}`)).body as Item).attributes.suspended, true);
    const again = await node('POST', '/suspend', { server_uuid: own.uuid, reason: 'tx day quota reached' });
    assert.equal(again.status, 200, 'a repeat call succeeds silently');
  });
});

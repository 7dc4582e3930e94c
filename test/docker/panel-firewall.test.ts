/**
 * Issue 30 end to end: the real panel (`panel serve`) and the real node agent (`node-agent
 * serve`) on loopback with no directory in common, a real Docker container as the server and a
 * real UDP flood from a network namespace on the containers' bridge. The admin grants SMART, the
 * owner enables it and sets a webhook through the client API, and the flood becomes attack
 * records in the panel (pulled from the node), the under-mitigation badge, alerts at real HTTPS
 * chat receivers (admin chat_a, owner chat_b) and an owner e-mail at a real SMTP server; its end
 * lifts the badge. Killing the agent is one node-offline alert; its return one online alert.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { localRequest } from '../../src/lib/local-socket.ts';
import type { AgentStatus } from '../../roles/node-agent/agent.ts';
import { freePort, startHostkit, type Daemon } from '../integration/hostkit-process.ts';
import { adminSession, type AdminSession } from '../integration/panel/admin-session.ts';
import { makeCert, startReceivers, startSmtp } from '../integration/panel/alert-receivers.ts';
import { bandwidthSettingsForm } from '../integration/panel/bandwidth-settings.ts';
import { startPanel, type TestPanel } from '../integration/panel/harness.ts';
import { attackerNamespace, udpFlood } from './traffic.ts';
import { startDocker, type DockerHarness } from './harness.ts';

type Item = { attributes: Record<string, unknown> };
type EventItem = { attributes: { id: number; type: string; level: number; ended_at: string | null } };
type StateBody = { attributes: { active: boolean; under_mitigation: boolean; relationships: { events: { data: EventItem[] } } } };

const PASSWORD = 'correct horse battery';
const ATTACKER_NS = 'hk-pfw-atk';
const ATTACKER_VETH = 'hkpfwatk0';
const ADMIN_HOOK = '/chat_a/admin-hook';
const OWNER_HOOK = '/chat_b/owner-hook';
const dir = mkdtempSync(join(tmpdir(), 'hk-panel-fw-'));
const tokenFile = join(dir, 'token');
const agentConfig = join(dir, 'agent.yaml');
const agentSocket = join(dir, 'agent.sock');
const tls = makeCert(dir);

let docker: DockerHarness | undefined;
let removeAttacker: (() => void) | undefined;
let panel: TestPanel;
let web: AdminSession;
let appKey: string;
let ownerKey: string;
let agent: Daemon | undefined;
let receivers: Awaited<ReturnType<typeof startReceivers>>;
let smtp: Awaited<ReturnType<typeof startSmtp>>;
let server: { id: number; uuid: string; name: string };
let serverIp = '';

async function until<T>(what: string, fn: () => Promise<T | undefined | false> | T | undefined | false, ms = 30_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}\n--- agent ---\n${agent?.output().slice(-3000) ?? ''}\n--- panel ---\n${panel?.daemon.output().slice(-3000) ?? ''}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

const agentStatus = (): Promise<AgentStatus> => localRequest<AgentStatus>(agentSocket, 'GET', '/api/v1/status', 'bandwidth-node');
const smartPath = (): string => `/api/client/servers/${server.uuid}/v1/firewall/smart`;
async function ownerState(): Promise<StateBody> {
  const r = await panel.api(ownerKey, 'GET', smartPath());
  assert.equal(r.status, 200, r.text);
  return r.body as StateBody;
}
const titles = (path: string): string[] => receivers.of(path).flatMap((d) => ((d.body.embeds ?? []) as { title: string }[]).map((e) => e.title).concat(((d.body.attachments ?? []) as { fallback: string }[]).map((a) => a.fallback)));
const startAgent = (): Daemon => startHostkit(['node-agent', 'serve', '--config', agentConfig], { env: { DOCKER_HOST: docker?.endpoint ?? '' } });

before(async () => {
  docker = await startDocker({ name: 'panelfw' });
  const net = await docker.createNetwork('hk-panelfw', '10.251.61.0/24');
  removeAttacker = attackerNamespace(ATTACKER_NS, ATTACKER_VETH, net.bridge, '10.251.61.250/24');
  receivers = await startReceivers(tls);
  smtp = await startSmtp();
  panel = await startPanel({ mail: { host: '127.0.0.1', port: smtp.port }, env: { NODE_EXTRA_CA_CERTS: tls.file } });
  panel.createUser('root', { admin: true, password: PASSWORD });
  const ownerId = panel.createUser('owner');
  appKey = panel.createKey('root', 'application');
  ownerKey = panel.createKey('owner', 'client');
  web = await adminSession(panel.url, 'root', PASSWORD);
  // The smallest poll interval: offline after 3 missed polls is 45 s.
  await bandwidthSettingsForm(web).save({ poll_interval_seconds: 15 });
  await web.get('/admin/firewall/settings');
  const saved = await web.post('/admin/firewall/settings', { webhook_url: `${receivers.base}${ADMIN_HOOK}`, webhook_style: 'chat_a', node_offline_webhook_max: '3', node_stable_seconds: '30', smart_owner_email_enabled: 'on' });
  assert.equal(saved.status, 303, saved.text.slice(0, 500));

  const nest = await panel.api(appKey, 'POST', '/api/application/nests', { name: 'Games' });
  const egg = await panel.api(appKey, 'POST', `/api/application/nests/${(nest.body as Item).attributes.id as number}/eggs`, { name: 'Box', docker_image: 'hostkit-busybox:test', startup: 'sleep 86400' });
  const loc = await panel.api(appKey, 'POST', '/api/application/locations', { short: 'lab', long: 'Loopback lab' });
  const node = await panel.api(appKey, 'POST', '/api/application/nodes', { name: 'docker-node', fqdn: '127.0.0.1', location_id: (loc.body as Item).attributes.id });
  assert.equal(node.status, 201, node.text);
  const nodeId = (node.body as Item).attributes.id as number;
  writeFileSync(tokenFile, `${(node.body as { meta: { pairing_token: string } }).meta.pairing_token}\n`, { mode: 0o600 });
  const allocs = await panel.api(appKey, 'POST', `/api/application/nodes/${nodeId}/allocations`, { ip: '127.0.0.1', ports: ['31100'] });
  const created = await panel.api(appKey, 'POST', '/api/application/servers', {
    name: 'mc-flooded',
    user: ownerId,
    egg: (egg.body as Item).attributes.id,
    allocation: { default: (allocs.body as { data: Item[] }).data[0]?.attributes.id },
  });
  assert.equal(created.status, 201, created.text);
  server = (created.body as Item).attributes as typeof server;
  serverIp = (await docker.runContainer({ name: server.uuid, network: 'hk-panelfw' })).ip;

  const port = await freePort();
  writeFileSync(
    agentConfig,
    stringify({
      general: { socket_path: agentSocket },
      logging: { file: join(dir, 'agent.log') },
      database: { path: join(dir, 'agent.db') },
      docker: { discovery_interval: '1s' },
      bandwidth: { poll_interval: '1s' },
      api: { listen: '127.0.0.1', port },
      panel: { url: panel.url, token_file: tokenFile },
      // Scaled to a test as in node-agent-smart.test.ts: L1 at 2,000 packets/s, L3 at 8,000.
      smart: { floor_pps: 500, floor_mbps: 1000, min_cap_mbps: 2, hold_down: '4s' },
    }),
  );
  agent = startAgent();
  await agent.waitFor(/registered with the panel/);
});

after(async () => {
  removeAttacker?.();
  await agent?.stop();
  await panel?.stop();
  receivers?.close();
  await smtp?.close();
  await docker?.stop();
  rmSync(dir, { recursive: true, force: true });
});

test('1. the admin grants SMART, the owner enables it and sets a webhook: the node watches the server', async () => {
  assert.equal((await web.post(`/admin/firewall/servers/${server.id}/grant`)).status, 303);
  const enabled = await panel.api(ownerKey, 'PUT', smartPath(), { enabled: true });
  assert.equal(enabled.status, 200, enabled.text);
  const hook = await panel.api(ownerKey, 'PUT', `${smartPath()}/webhook`, { webhook_url: `${receivers.base}${OWNER_HOOK}`, style: 'chat_b' });
  assert.equal(hook.status, 200, hook.text);
  await until('the node watching the server', async () => (await agentStatus()).smart.watched === 1);
});

test('2. a real flood: attack records pulled from the node, the badge, admin and owner webhooks and the owner e-mail; its end lifts the badge', async () => {
  await new Promise((r) => setTimeout(r, 3000)); // calm cycles first
  const stop = udpFlood(serverIp, [{ seconds: 4, from: 3000, to: 3000 }, { seconds: 600, from: 20_000, to: 20_000 }], { netns: ATTACKER_NS });
  try {
    await until('the node escalating to level 3', async () => (await agentStatus()).smart.attacked === 1 && agent?.output().includes('Attack escalated to level 3'));
    assert.equal((await web.post('/admin/firewall/sync')).status, 303);
    const events = (await ownerState()).attributes.relationships.events.data.map((e) => `${e.attributes.type}:${e.attributes.level}`);
    assert.ok(events.includes('attack_escalated:3') && events.some((e) => e.startsWith('attack_detected:')), events.join(', '));
    assert.equal((await ownerState()).attributes.under_mitigation, true);
    assert.match((await web.get('/admin/servers')).text, /mc-flooded<\/a>.*?Under mitigation/s);
    const page = (await web.get('/admin/firewall/events')).text;
    assert.match(page, /class="badge red">Level 3</);
    assert.match(page, /packets\/s/);
  } finally {
    await stop();
  }
  await until('the admin alert of level 3', () => titles(ADMIN_HOOK).some((t) => /level 3/.test(t)));
  await until('the owner alert', () => titles(OWNER_HOOK).some((t) => /Attack detected on mc-flooded/.test(t)));
  assert.ok(receivers.got.every((d) => d.status !== 400), 'every message within the platform limits');
  const mail = await until('the owner e-mail', () => smtp.mails.find((m) => /mc-flooded/.test(m.subject)));
  assert.deepEqual(mail.to, ['owner@example.test']);
  assert.match(mail.text, /packets\/s/);
  assert.match(mail.text, /capped at 2 Mbit\/s/);

  await until('the node ending the attack', async () => (await agentStatus()).smart.attacked === 0);
  assert.equal((await web.post('/admin/firewall/sync')).status, 303);
  const s = await ownerState();
  assert.equal(s.attributes.under_mitigation, false);
  assert.ok(s.attributes.relationships.events.data.some((e) => e.attributes.type === 'attack_ended'));
  assert.ok(s.attributes.relationships.events.data.every((e) => e.attributes.ended_at !== null));
  assert.doesNotMatch((await web.get('/admin/servers')).text, /Under mitigation/);
  await until('the owner told the attack ended', () => titles(OWNER_HOOK).some((t) => /Attack ended on mc-flooded/.test(t)));
});

test('3. the agent killed: one node-offline alert; back: one online alert once stable', { timeout: 240_000 }, async () => {
  const nodeTitles = (): string[] => titles(ADMIN_HOOK).filter((t) => /^\S+ Node /.test(t));
  await agent?.stop();
  agent = undefined;
  await until('the offline alert', () => nodeTitles().length >= 1, 120_000);
  assert.deepEqual(nodeTitles(), ['🔴 Node docker-node is offline']);
  agent = startAgent();
  await until('the online alert', () => nodeTitles().length >= 2, 120_000);
  assert.deepEqual(nodeTitles(), ['🔴 Node docker-node is offline', '🟢 Node docker-node is back online']);
});

/**
 * The firewall alerts addon against a real panel process: a stand-in node agent (a real HTTP
 * server on loopback answering the node API contract: SMART events, limits, stats), real HTTPS
 * receivers for the chat webhooks that check what each platform checks (chat_a: 10 embeds, title
 * 256, description 4096, 25 fields, 6000 characters; chat_b: 50 blocks, section text 3000) and
 * answer 429 with Retry-After once, and a real SMTP server for the owner e-mail. Covers the SMART
 * grant and enable reaching the node, the pull without duplicates across a panel restart and a
 * new agent store, the under-mitigation badge, acknowledgement, the digest of a burst, every client
 * and admin endpoint's refusals, and a flapping node's offline alerts capped per incident.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LimitsPayload, SmartEvent } from '../../../src/contracts/types.ts';
import { startHostkit, type Daemon } from '../hostkit-process.ts';
import { adminSession, webClient, type AdminSession } from './admin-session.ts';
import { bandwidthSettingsForm } from './bandwidth-settings.ts';
import { startPanel, type TestPanel } from './harness.ts';
import { listen, makeCert, readBody, startReceivers, startSmtp, type Delivery, type Mail } from './alert-receivers.ts';

type Item = { attributes: Record<string, unknown> };
type Errors = { errors: { code: string; status: string; detail: string; meta?: { source_field?: string } }[] };
type EventItem = { attributes: { id: number; type: string; level: number; ended_at: string | null; acknowledged: boolean; acknowledged_at: string | null; acknowledged_by: string | null; traffic: string } };
type StateBody = { attributes: { granted: boolean; enabled: boolean; active: boolean; under_mitigation: boolean; webhook: { set: boolean; url: string | null; style: string }; relationships: { events: { data: EventItem[]; meta: { pagination: { total: number } } } } } };

const until = async (what: string, fn: () => boolean | Promise<boolean>, ms = 15_000, log?: () => string): Promise<void> => {
  const start = Date.now();
  while (!(await fn())) {
    if (Date.now() - start > ms) throw new Error(`timed out waiting for ${what}\n${log?.().slice(-3000) ?? ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
};
interface StandIn {
  url: string;
  token: string;
  stream: string;
  events: SmartEvent[];
  limits: LimitsPayload[];
  statsFail: boolean;
  pulls: string[];
  close(): void;
}

/** A node agent answering the node API contract on loopback with the node's pairing token. */
async function startStandIn(token: string): Promise<StandIn> {
  const state: StandIn = { url: '', token, stream: 'store-1', events: [], limits: [], statsFail: false, pulls: [], close: () => server.close() };
  const send = (res: ServerResponse, status: number, data: unknown, error: string | null = null): void => {
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ success: status < 400, data, error, meta: { version: '1.0.0' } }));
  };
  const server = createHttpServer((req, res) => {
    void readBody(req).then((text) => {
      if (req.headers.authorization !== `Bearer ${token}`) return send(res, 401, null, 'missing or invalid pairing token');
      const url = new URL(req.url ?? '/', 'http://x');
      if (req.method === 'GET' && url.pathname === '/api/v1/smart/events') {
        state.pulls.push(url.search);
        const after = Number(url.searchParams.get('after'));
        const limit = Number(url.searchParams.get('limit') ?? '200');
        if (!Number.isInteger(after) || after < 0 || !Number.isInteger(limit) || limit < 1 || limit > 500) return send(res, 422, null, 'bad after or limit');
        const events = state.events.filter((e) => e.id > after).slice(0, limit);
        return send(res, 200, { stream: state.stream, events, last_id: state.events.reduce((m, e) => Math.max(m, e.id), 0) });
      }
      if (req.method === 'PUT' && url.pathname === '/api/v1/limits') {
        const payload = JSON.parse(text) as LimitsPayload;
        state.limits.push(payload);
        return send(res, 200, { applied: payload.servers.length, failed: 0 });
      }
      if (req.method === 'GET' && url.pathname === '/api/v1/stats') return state.statsFail ? send(res, 500, null, 'agent failing') : send(res, 200, { servers: [] });
      return send(res, 404, null, 'no such route');
    });
  });
  state.url = `http://127.0.0.1:${await listen(server)}`;
  return state;
}

/** A SMART event of the stand-in's store. */
function smartEvent(id: number, uuid: string, type: SmartEvent['type'], level: 1 | 2 | 3, incident: number, ended = false): SmartEvent {
  const ratio = [0, 4, 12, 40][level] as number;
  const t = new Date(Date.UTC(2026, 11, 7, 10, 0, id)).toISOString();
  return {
    id,
    server_uuid: uuid,
    type,
    incident,
    level,
    occurred_at: t,
    started_at: new Date(Date.UTC(2026, 11, 7, 10, 0, incident)).toISOString(),
    ended_at: ended ? t : null,
    metrics: { pps: 7000 * ratio, bps: 1e8 * ratio, peak_pps: 7000 * ratio, peak_bps: 1e8 * ratio, baseline_pps: 7000, baseline_bps: 1e8, ratio },
    mitigation: ended || type === 'attack_detected' ? { action: 'none', cap_mbps: null } : { action: 'rate_cap', cap_mbps: [0, 200, 100, 50][level] as number },
    message: `${type.replace('_', ' ')} at ${ratio}x the baseline`,
  };
}

/** Creates a node through the CLI and registers `agent` for it; returns the node id. */
async function registerNode(panel: TestPanel, name: string, make: (token: string) => Promise<StandIn>): Promise<{ nodeId: number; agent: StandIn }> {
  const r = panel.cli('node', 'create', '--name', name, '--fqdn', '127.0.0.1', '--json');
  assert.equal(r.code, 0, r.stderr);
  const j = JSON.parse(r.stdout) as { attributes: { id: number }; meta: { pairing_token: string } };
  const agent = await make(j.meta.pairing_token);
  const reg = await fetch(`${panel.url}/api/bandwidth/node/register`, {
    method: 'POST',
    headers: { authorization: `Bearer ${agent.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ version: '1.0.0', hostname: name, port: Number(new URL(agent.url).port), api_url: agent.url }),
  });
  assert.equal(reg.status, 200, await reg.text());
  return { nodeId: j.attributes.id, agent };
}

const heartbeat = async (panel: TestPanel, agent: StandIn): Promise<void> => {
  const r = await fetch(`${panel.url}/api/bandwidth/node/heartbeat`, { method: 'POST', headers: { authorization: `Bearer ${agent.token}`, 'content-type': 'application/json' }, body: '{}' });
  assert.equal(r.status, 200, await r.text());
};

// The two panels run side by side (the flapping node takes minutes of polls); each one's tests in order.
describe('panel firewall alerts', { concurrency: 2 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'hk-firewall-'));
  const tls = makeCert(dir);
  const env = { NODE_EXTRA_CA_CERTS: tls.file };
  let receivers: Awaited<ReturnType<typeof startReceivers>>;
  let smtp: Awaited<ReturnType<typeof startSmtp>>;

  before(async () => {
    receivers = await startReceivers(tls);
    smtp = await startSmtp();
  });
  after(async () => {
    receivers?.close();
    await smtp?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  describe('SMART mode, event sync, owner alerts and the client API', { concurrency: 1 }, () => {
    let panel: TestPanel;
    let restarted: Daemon | undefined;
    let admin: string;
    let owner: string;
    let other: string;
    let helper: string;
    let web: AdminSession;
    let agent: StandIn;
    let nodeId: number;
    let smart: { id: number; uuid: string; identifier: string };
    let othersServer: { id: number; uuid: string };
    const burstServers: { id: number; uuid: string }[] = [];
    const base = (s: { uuid: string }): string => `/api/client/servers/${s.uuid}/v1/firewall/smart`;
    const state = async (key = owner, query = ''): Promise<StateBody> => {
      const r = await panel.api(key, 'GET', `${base(smart)}${query}`);
      assert.equal(r.status, 200, r.text);
      return r.body as StateBody;
    };
    const field = (r: { body: unknown }): string | undefined => (r.body as Errors).errors[0]?.meta?.source_field;
    const sync = async (): Promise<string> => {
      const r = await web.post('/admin/firewall/sync');
      assert.equal(r.status, 303, r.text.slice(0, 500));
      return (await web.get('/admin/firewall/events')).text;
    };

    before(async () => {
      panel = await startPanel({ mail: { host: '127.0.0.1', port: smtp.port }, env });
      panel.createUser('root', { admin: true });
      const ownerId = panel.createUser('owner');
      const otherId = panel.createUser('other');
      panel.createUser('helper');
      admin = panel.createKey('root', 'application');
      owner = panel.createKey('owner', 'client');
      other = panel.createKey('other', 'client');
      helper = panel.createKey('helper', 'client');
      ({ nodeId, agent } = await registerNode(panel, 'node-a', startStandIn));
      const allocs = await panel.api(admin, 'POST', `/api/application/nodes/${nodeId}/allocations`, { ip: '127.0.0.1', ports: ['31000-31019'] });
      const allocations = (allocs.body as { data: Item[] }).data.map((a) => a.attributes.id as number);
      const nest = await panel.api(admin, 'POST', '/api/application/nests', { name: 'Games' });
      const egg = await panel.api(admin, 'POST', `/api/application/nests/${(nest.body as Item).attributes.id as number}/eggs`, { name: 'Game', docker_image: 'busybox:latest', startup: 'sh' });
      const create = async (name: string, user: number): Promise<{ id: number; uuid: string; identifier: string }> => {
        const r = await panel.api(admin, 'POST', '/api/application/servers', { name, user, egg: (egg.body as Item).attributes.id, allocation: { default: allocations.shift() } });
        assert.equal(r.status, 201, r.text);
        return (r.body as Item).attributes as { id: number; uuid: string; identifier: string };
      };
      smart = await create('mc-1', ownerId);
      othersServer = await create('others', otherId);
      for (let i = 1; i <= 12; i++) burstServers.push(await create(`burst-${i}`, ownerId));
      const sub = await panel.api(owner, 'POST', `/api/client/servers/${smart.uuid}/users`, { email: 'helper@example.test', permissions: ['file.read'] });
      assert.equal(sub.status, 200, sub.text);
      web = await adminSession(panel.url, 'root', 'correct horse battery');
    });
    after(async () => {
      agent?.close();
      await restarted?.stop();
      await panel?.stop();
    });

    it('admin settings: bad input is refused naming the field, a good form saved with the URL masked', async () => {
      await web.get('/admin/firewall/settings');
      const bad = await web.post('/admin/firewall/settings', { webhook_url: 'http://127.0.0.1/plain', webhook_style: 'chat_c', node_offline_webhook_max: '0', node_stable_seconds: '5' });
      assert.equal(bad.status, 422);
      assert.match(bad.text, /the webhook_style field must be one of: chat_a, chat_b/);
      assert.match(bad.text, /the node_offline_webhook_max field must be at least 1/);
      assert.match(bad.text, /the node_stable_seconds field must be at least 30/);
      const url = await web.post('/admin/firewall/settings', { webhook_url: 'http://127.0.0.1/plain', webhook_style: 'chat_a', node_offline_webhook_max: '3', node_stable_seconds: '300' });
      assert.equal(url.status, 422);
      assert.match(url.text, /the webhook_url field must be an https URL/);
      const ok = await web.post('/admin/firewall/settings', { webhook_url: `${receivers.base}/chat_a/admin-secret-token`, webhook_style: 'chat_a', node_offline_webhook_max: '3', node_stable_seconds: '300', smart_owner_email_enabled: 'on' });
      assert.equal(ok.status, 303, ok.text.slice(0, 1000));
      const page = await web.get('/admin/firewall/settings');
      assert.match(page.text, /Admin chat webhook: <code>https:\/\/127\.0\.0\.1:\d+\/\*\*\*<\/code>/);
      assert.doesNotMatch(page.text, /admin-secret-token/, 'the webhook URL is a secret');
      assert.doesNotMatch(panel.daemon.output(), /admin-secret-token/, 'never logged');
    });

    it('SMART must be granted before the owner enables it; enabling reaches the node at once', async () => {
      const before = await state();
      assert.deepEqual([before.attributes.granted, before.attributes.enabled, before.attributes.active], [false, false, false]);
      const refused = await panel.api(owner, 'PUT', base(smart), { enabled: true });
      assert.equal(refused.status, 409, refused.text);
      assert.equal((refused.body as Errors).errors[0]?.code, 'SmartModeNotGranted');
      assert.match((refused.body as Errors).errors[0]?.detail ?? '', /an administrator must grant it/);
      assert.equal((await panel.api(owner, 'PUT', `${base(smart)}/webhook`, { webhook_url: `${receivers.base}/chat_b/owner` })).status, 409);

      assert.equal((await web.post(`/admin/firewall/servers/${smart.id}/grant`)).status, 303);
      const section = await web.get(`/admin/servers/${smart.id}`);
      assert.match(section.text, /id="firewall-smart-state">Granted by an administrator · not enabled by the owner/);
      const pushes = agent.limits.length;
      const enabled = await panel.api(owner, 'PUT', base(smart), { enabled: true });
      assert.equal(enabled.status, 200, enabled.text);
      assert.equal((enabled.body as StateBody).attributes.active, true);
      await until('the limits push with smart: true', () => agent.limits.slice(pushes).some((p) => p.servers.find((s) => s.uuid === smart.uuid)?.smart === true), 10_000, () => panel.daemon.output());
      const last = agent.limits[agent.limits.length - 1] as LimitsPayload;
      assert.equal(last.servers.find((s) => s.uuid === othersServer.uuid)?.smart, false, 'every entry says it');
    });

    it('client API refusals: bad input 422 naming the field, another user 404, a subuser without the permission 403', async () => {
      for (const [method, path, body, name] of [
        ['PUT', base(smart), { enabled: 'yes' }, 'enabled'],
        ['PUT', base(smart), {}, 'enabled'],
        ['PUT', `${base(smart)}/webhook`, { webhook_url: 'http://example.test/hook' }, 'webhook_url'],
        ['PUT', `${base(smart)}/webhook`, { webhook_url: 'not a url' }, 'webhook_url'],
        ['PUT', `${base(smart)}/webhook`, { webhook_url: 5 }, 'webhook_url'],
        ['PUT', `${base(smart)}/webhook`, { webhook_url: `${receivers.base}/chat_b/owner`, style: 'chat_c' }, 'style'],
      ] as const) {
        const r = await panel.api(owner, method, path, body);
        assert.equal(r.status, 422, `${JSON.stringify(body)}: ${r.text}`);
        assert.equal(field(r), name, r.text);
      }
      for (const [method, path, body] of [
        ['GET', base(smart), undefined],
        ['PUT', base(smart), { enabled: false }],
        ['PUT', `${base(smart)}/webhook`, { webhook_url: null }],
        ['POST', `${base(smart)}/events/1/ack`, undefined],
      ] as const) {
        assert.equal((await panel.api(other, method, path, body)).status, 404, `${method} ${path} by another user`);
        const sub = await panel.api(helper, method, path, body);
        assert.equal(sub.status, 403, `${method} ${path} by a subuser without the permission: ${sub.text}`);
        assert.match((sub.body as Errors).errors[0]?.detail ?? '', /firewall\.smart\.(read|update|ack)/);
      }
      const perms = (await panel.api(owner, 'GET', '/api/client/permissions')).body as { attributes: { permissions: string[] } };
      for (const p of ['firewall.smart.read', 'firewall.smart.update', 'firewall.smart.ack']) assert.ok(perms.attributes.permissions.includes(p), p);

      const set = await panel.api(owner, 'PUT', `${base(smart)}/webhook`, { webhook_url: `${receivers.base}/chat_b/owner-secret`, style: 'chat_b' });
      assert.equal(set.status, 200, set.text);
      assert.deepEqual((set.body as StateBody).attributes.webhook, { set: true, url: `${receivers.base}/***`, style: 'chat_b' });
      assert.doesNotMatch(set.text, /owner-secret/);
    });

    it('pulls an incident: records, under-mitigation badge, admin and owner webhooks (429 honoured) and owner e-mail', async () => {
      agent.events.push(
        smartEvent(1, smart.uuid, 'attack_detected', 1, 1),
        smartEvent(2, smart.uuid, 'mitigation_started', 1, 1),
        smartEvent(3, smart.uuid, 'attack_escalated', 2, 1),
        smartEvent(4, smart.uuid, 'attack_escalated', 3, 1),
      );
      receivers.tooMany.add('/chat_a/admin-secret-token');
      const page = await sync();
      assert.match(page, /Attack escalated/);
      assert.match(page, /280,000 packets\/s, 4 Gbit\/s \(40x baseline\)/, 'metrics in readable units');
      assert.match(page, /inbound traffic capped at 50 Mbit\/s/);
      assert.match(page, /class="badge red">Level 3</);
      const s = await state();
      assert.equal(s.attributes.under_mitigation, true);
      assert.deepEqual(s.attributes.relationships.events.data.map((e) => e.attributes.type), ['attack_escalated', 'attack_escalated', 'mitigation_started', 'attack_detected'], 'newest first');
      assert.match((await web.get('/admin/servers')).text, /mc-1<\/a>.*?Under mitigation/s);

      await until('4 admin alerts', () => receivers.of('/chat_a/admin-secret-token').length >= 4, 20_000, () => panel.daemon.output());
      const limited = receivers.got.find((d) => d.path === '/chat_a/admin-secret-token' && d.status === 429) as Delivery;
      const admin = receivers.of('/chat_a/admin-secret-token');
      assert.ok((admin[0] as Delivery).at - limited.at >= 1900, `retried ${(admin[0] as Delivery).at - limited.at} ms after the 429 with Retry-After: 2`);
      assert.deepEqual(admin.map((d) => d.status), [204, 204, 204, 204], 'within the platform limits');
      assert.equal(((admin[3] as Delivery).body.embeds as { title: string }[])[0]?.title, '🔺 Attack escalated on mc-1: level 3');

      await until('3 owner alerts', () => receivers.of('/chat_b/owner-secret').length >= 3, 15_000, () => panel.daemon.output());
      const ownerAlerts = receivers.of('/chat_b/owner-secret');
      assert.deepEqual(ownerAlerts.map((d) => d.status), [204, 204, 204]);
      assert.match(JSON.stringify(ownerAlerts[0]?.body), /Attack detected on mc-1: level 1/);
      await until('3 owner e-mails', () => smtp.mails.length >= 3, 15_000, () => panel.daemon.output());
      const mail = smtp.mails.find((m) => /level 3/.test(m.subject)) as Mail;
      assert.deepEqual(mail.to, ['owner@example.test']);
      assert.equal(mail.subject, '[hostkit] Attack escalated on mc-1: level 3');
      assert.match(mail.text, /Level: level 3 of 3/);
      assert.match(mail.text, /Traffic: 280,000 packets\/s, 4 Gbit\/s \(40x baseline\)/);
      assert.match(mail.text, /Baseline: 7,000 packets\/s, 100 Mbit\/s/);
      assert.match(mail.text, /Mitigation: inbound traffic capped at 50 Mbit\/s/);
    });

    it('the end of the incident fills its ended_at, lifts the badge and tells the owner', async () => {
      agent.events.push(smartEvent(5, smart.uuid, 'mitigation_ended', 3, 1, true), smartEvent(6, smart.uuid, 'attack_ended', 3, 1, true));
      await sync();
      const s = await state();
      assert.equal(s.attributes.under_mitigation, false);
      assert.ok(s.attributes.relationships.events.data.every((e) => e.attributes.ended_at !== null), 'every event of the incident has its end');
      assert.doesNotMatch((await web.get('/admin/servers')).text, /Under mitigation/);
      await until('the attack_ended owner alert', () => receivers.of('/chat_b/owner-secret').some((d) => /Attack ended on mc-1/.test(JSON.stringify(d.body))), 15_000, () => panel.daemon.output());
      await until('the fourth mail', () => smtp.mails.length >= 4);
      assert.equal(receivers.of('/chat_b/owner-secret').length, 4, 'mitigation start and end are admin alerts only');
    });

    it('acknowledges once: a second ack keeps the first; another server\'s event is 404', async () => {
      const id = (await state()).attributes.relationships.events.data[0]?.attributes.id as number;
      const first = await panel.api(owner, 'POST', `${base(smart)}/events/${id}/ack`);
      assert.equal(first.status, 200, first.text);
      const a = (first.body as EventItem).attributes;
      assert.deepEqual([a.acknowledged, a.acknowledged_by], [true, 'owner']);
      await new Promise((r) => setTimeout(r, 20));
      const again = await panel.api(owner, 'POST', `${base(smart)}/events/${id}/ack`);
      assert.equal((again.body as EventItem).attributes.acknowledged_at, a.acknowledged_at, 'idempotent');
      // othersServer's events do not exist yet: push one, pull it, and try it through mc-1's path
      agent.events.push(smartEvent(7, othersServer.uuid, 'attack_detected', 1, 7));
      await sync();
      const foreign = (await panel.api(other, 'GET', base(othersServer))).body as StateBody;
      const foreignId = foreign.attributes.relationships.events.data[0]?.attributes.id as number;
      assert.equal((await panel.api(owner, 'POST', `${base(smart)}/events/${foreignId}/ack`)).status, 404, 'an event of another server');
      assert.equal((await panel.api(owner, 'POST', `${base(smart)}/events/999999/ack`)).status, 404);
      assert.equal((await panel.api(owner, 'POST', `${base(smart)}/events/abc/ack`)).status, 404);
      const unacked = await web.get(`/admin/firewall/events?server=${smart.id}&unacknowledged=on`);
      assert.doesNotMatch(unacked.text, new RegExp(`id="event-${id}"`), 'the filter leaves acknowledged events out');
      assert.match(unacked.text, /Acknowledge<\/button>/);
      const adminAck = await web.post(`/admin/firewall/events/${foreignId}/ack`, { back: `/admin/firewall/events?server=${othersServer.id}` });
      assert.equal(adminAck.status, 303);
      assert.equal(adminAck.location, `/admin/firewall/events?server=${othersServer.id}`);
      assert.match((await web.get(`/admin/firewall/events?server=${othersServer.id}`)).text, /by root at/);
    });

    it('digests a burst of 250 events on 12 servers into one admin message', async () => {
      const before = receivers.of('/chat_a/admin-secret-token').length;
      await until('the earlier alerts to be delivered', async () => {
        const settingsPage = await web.get('/admin/firewall/settings');
        return /no alerts waiting/.test(settingsPage.text);
      }, 15_000);
      const start = agent.events.length + 1;
      for (let i = 0; i < 250; i++) {
        const s = burstServers[i % 12] as { uuid: string };
        agent.events.push(smartEvent(start + i, s.uuid, 'attack_detected', 1, start + i));
      }
      const pulls = agent.pulls.length;
      await sync();
      assert.deepEqual(agent.pulls.slice(pulls).map((q) => new URLSearchParams(q).get('limit')), ['200', '200'], 'paged until caught up');
      await until('the digest', () => receivers.of('/chat_a/admin-secret-token').length > before, 15_000, () => panel.daemon.output());
      await new Promise((r) => setTimeout(r, 1500));
      const sent = receivers.of('/chat_a/admin-secret-token').slice(before);
      assert.equal(sent.length, 1, 'one message, not 250');
      const embeds = (sent[0] as Delivery).body.embeds as { title: string }[];
      assert.equal(embeds.length, 10);
      assert.equal(embeds[9]?.title, '📋 And 241 more attack events on 12 servers');
      assert.equal((sent[0] as Delivery).status, 204, 'within the platform limits');
    });

    it('a panel restart pulls from its stored cursor: nothing twice, nothing sent again', async () => {
      const total = (await state()).attributes.relationships.events.meta.pagination.total;
      const delivered = receivers.got.length;
      await panel.daemon.stop();
      restarted = startHostkit(['panel', 'serve', '--config', panel.config], { env });
      await restarted.waitFor(/panel listening/);
      const pulls = agent.pulls.length;
      await until('the pull at start', () => agent.pulls.length > pulls, 10_000, () => restarted?.output() ?? '');
      assert.equal(new URLSearchParams(agent.pulls[pulls]).get('after'), String(agent.events.length), 'from the stored cursor');
      await sync();
      assert.equal((await state()).attributes.relationships.events.meta.pagination.total, total);
      await new Promise((r) => setTimeout(r, 1000));
      assert.equal(receivers.got.length, delivered, 'no alert sent twice');
    });

    it('a new agent store (another stream) is pulled from the start, its ids stored beside the old ones', async () => {
      const total = (await state()).attributes.relationships.events.meta.pagination.total;
      const lastOld = agent.events.length;
      agent.stream = 'store-2';
      agent.events = [smartEvent(1, smart.uuid, 'attack_detected', 2, 1), smartEvent(2, smart.uuid, 'mitigation_started', 2, 1)];
      const pulls = agent.pulls.length;
      await sync();
      const asked = agent.pulls.slice(pulls).map((q) => new URLSearchParams(q).get('after'));
      assert.deepEqual(asked, [String(lastOld), '0'], 'asked from the old cursor, then from the start of the new store');
      const s = await state();
      assert.equal(s.attributes.relationships.events.meta.pagination.total, total + 2);
      assert.equal(s.attributes.under_mitigation, true);
      await sync();
      assert.equal((await state()).attributes.relationships.events.meta.pagination.total, total + 2, 'no duplicates');
      assert.match(restarted?.output() ?? '', /node node-a has a new SMART event store \(store-2, was store-1\)/);
    });

    it('admin endpoints refuse bad input and non-admins', async () => {
      const badFilter = await web.get('/admin/firewall/events?server=abc');
      assert.equal(badFilter.status, 422);
      assert.match(badFilter.text, /the server filter must be one of the listed servers/);
      assert.equal((await web.post('/admin/firewall/events/999999/ack')).status, 404);
      assert.equal((await web.post('/admin/firewall/servers/999999/grant')).status, 404);
      assert.equal((await web.post('/admin/firewall/servers/abc/revoke')).status, 404);
      const anonymous = webClient(panel.url);
      const r = await anonymous('GET', '/admin/firewall/events');
      assert.ok(r.status === 302 || r.status === 303 || r.status === 401, `anonymous: ${r.status}`);
      const signedIn = webClient(panel.url);
      await signedIn('GET', '/auth/login');
      assert.equal((await signedIn('POST', '/auth/login', { username: 'owner', password: 'correct horse battery' })).status, 303);
      assert.equal((await signedIn('GET', '/admin/firewall/settings')).status, 403, 'a user who is not an admin');
      assert.equal((await web.post(`/admin/firewall/servers/${smart.id}/revoke`)).status, 303);
      const s = await state();
      assert.deepEqual([s.attributes.granted, s.attributes.enabled, s.attributes.active], [false, true, false], 'the owner\'s choice is kept, SMART is off');
      await until('the limits push with smart: false', () => agent.limits[agent.limits.length - 1]?.servers.find((x) => x.uuid === smart.uuid)?.smart === false);
    });
  });

  describe('node offline and online alerts of a flapping node', { concurrency: 1 }, () => {
    let panel: TestPanel;
    let agent: StandIn;
    const path = '/chat_a/fleet';
    const titles = (): string[] => receivers.of(path).flatMap((d) => (d.body.embeds as { title: string }[]).map((e) => e.title));

    before(async () => {
      panel = await startPanel({ env });
      panel.createUser('root', { admin: true });
      const web = await adminSession(panel.url, 'root', 'correct horse battery');
      await web.get('/admin/firewall/settings');
      // Stable for longer than offline detection takes (3 polls of 15 s), so a node flapping at
      // that pace stays in one incident.
      const saved = await web.post('/admin/firewall/settings', { webhook_url: `${receivers.base}${path}`, webhook_style: 'chat_a', node_offline_webhook_max: '1', node_stable_seconds: '60' });
      assert.equal(saved.status, 303, saved.text.slice(0, 1000));
      ({ agent } = await registerNode(panel, 'node-b', startStandIn));
      await bandwidthSettingsForm(web).save({ poll_interval_seconds: 15 });
    });
    after(async () => {
      agent?.close();
      await panel?.stop();
    });

    it('one offline alert, a second offline transition held back by node_offline_webhook_max = 1, one online alert once stable', { timeout: 330_000 }, async () => {
      agent.statsFail = true;
      await until('the offline alert', () => titles().length >= 1, 90_000, () => panel.daemon.output());
      assert.deepEqual(titles(), ['🔴 Node node-b is offline']);
      assert.match(JSON.stringify(receivers.of(path)[0]?.body), /3 failed stats polls/);
      await heartbeat(panel, agent);
      await panel.daemon.waitFor(/node node-b went offline again \(2 times in this incident\): alert held back, 1 of 1 sent/, 90_000);
      await heartbeat(panel, agent);
      agent.statsFail = false;
      await until('the online alert', () => titles().length >= 2, 90_000, () => panel.daemon.output());
      assert.deepEqual(titles(), ['🔴 Node node-b is offline', '🟢 Node node-b is back online']);
      assert.match(JSON.stringify(receivers.of(path)[1]?.body), /"name":"Times offline","value":"2"/);
    });
  });
});

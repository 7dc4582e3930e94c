/**
 * The bandwidth addon with the real node agent on loopback (no containers needed): a node that
 * registers with an old config_version pulls the limits, a limits change afterwards is pushed at
 * once (well inside a heartbeat interval), and the node-facing API's middleware and errors of
 * spec/1 §4.2, §5 and §7; an online node registering from another address is logged as a warning.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { freePort, runHostkit, startHostkit, type Daemon } from '../hostkit-process.ts';
import { adminSession, type AdminSession } from './admin-session.ts';
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
  let web: AdminSession;
  const allocations: number[] = [];

  const node = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: Envelope }> => {
    const res = await fetch(`${panel.url}/api/bandwidth/node${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: (await res.json()) as Envelope };
  };
  /** A request with a raw body (malformed JSON, a big body, an unusual content type). */
  const raw = async (path: string, body: string, contentType: string, bearer = token): Promise<{ status: number; body: Envelope }> => {
    const res = await fetch(`${panel.url}/api/bandwidth/node${path}`, { method: 'POST', headers: { authorization: `Bearer ${bearer}`, 'content-type': contentType }, body });
    return { status: res.status, body: (await res.json()) as Envelope };
  };
  /** Creates a node through the CLI; returns its id and pairing token. */
  const createNode = (name: string): { id: number; token: string } => {
    const r = panel.cli('node', 'create', '--name', name, '--fqdn', '127.0.0.1', '--json');
    assert.equal(r.code, 0, r.stderr);
    const j = JSON.parse(r.stdout) as { attributes: { id: number }; meta: { pairing_token: string } };
    return { id: j.attributes.id, token: j.meta.pairing_token };
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

  /** A node agent config in the panel's directory (`<name>.yaml`, its token in `<name>.token`), no Docker, no tc. */
  const writeAgentConfig = async (name: string, pairing: string): Promise<string> => {
    const tokenFile = join(panel.dir, `${name}.token`);
    writeFileSync(tokenFile, `${pairing}\n`, { mode: 0o600 });
    const file = join(panel.dir, `${name}.yaml`);
    writeFileSync(
      file,
      stringify({
        general: { socket_path: join(panel.dir, `${name}.sock`) },
        logging: { console: true, file: '', level: 'info' },
        database: { path: join(panel.dir, `${name}.db`) },
        api: { listen: '127.0.0.1', port: await freePort() },
        panel: { url: panel.url, token_file: tokenFile },
        traffic_control: { enabled: false },
      }),
    );
    return file;
  };
  const startAgent = (config: string): Daemon => startHostkit(['node-agent', 'serve', '--config', config], { env: { DOCKER_HOST: `unix://${join(panel.dir, 'no-docker.sock')}` } });

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
    const allocs = await panel.api(admin, 'POST', `/api/application/nodes/${nodeId}/allocations`, { ip: '127.0.0.1', ports: ['30000-30009'] });
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
    agentConfig = await writeAgentConfig('agent', token);
    agent = startAgent(agentConfig);
    await agent.waitFor(/node API listening/);
    await panel.daemon.waitFor(/node node-a registered/);
    // Two servers created, one with its own limits: two changes, two bumps.
    await until('the agent to pull config_version 2', () => agentVersion() === 2);
  });

  it('pushes a limits change to the online node at once, not at the next heartbeat', async () => {
    const took = await (async () => {
      const start = Date.now();
      await createServer('third', { rx_speed_mbps: 20 });
      await until('the push of config_version 3', () => agentVersion() === 3);
      return Date.now() - start;
    })();
    assert.ok(took < 10_000, `applied after ${took} ms, while heartbeats come every 60 s`);
    await panel.daemon.waitFor(/pushed limits to node node-a/, 5000);
  });

  it('adopts a new heartbeat interval from the settings at once, without a restart', async () => {
    web = await adminSession(panel.url, 'root', 'correct horse battery');
    await bandwidthSettingsForm(web).save({ poll_interval_seconds: 15 });
    await agent.waitFor(/"heartbeat_seconds":15,"was":60,"msg":"heartbeat interval changed by the panel"/, 10_000);
    assert.equal((panel.daemon.output().match(/node node-a registered/g) ?? []).length, 1, 'the refresh is not news in the panel log');
  });

  it('serves the node the effective limits of its own servers', async () => {
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
    const head = await fetch(`${panel.url}/api/bandwidth/node/limits`, { method: 'HEAD', headers: { authorization: `Bearer ${token}` } });
    assert.equal(head.status, 200, 'HEAD is a GET without the body');
    const del = await fetch(`${panel.url}/api/bandwidth/node/limits`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } });
    assert.equal(del.status, 404, 'another method finds no route');
    assert.equal((await raw('/heartbeat', '', 'application/json')).status, 200, 'an empty heartbeat');
    const lower = await fetch(`${panel.url}/api/bandwidth/node/limits`, { headers: { authorization: `bearer ${token}` } });
    assert.equal(lower.status, 200, 'the scheme is case-insensitive');
    const upperToken = await fetch(`${panel.url}/api/bandwidth/node/limits`, { headers: { authorization: `Bearer ${token.toUpperCase()}` } });
    assert.equal(upperToken.status, 401, 'the token is not');
    const keyed = await fetch(`${panel.url}/api/bandwidth/node/limits`, { headers: { authorization: `Bearer ${admin}` } });
    assert.equal(keyed.status, 401, 'panel API keys are not pairing tokens');
    const long = await node('POST', '/register', { version: 'v'.repeat(1_000_000), hostname: 'h', port: 8480 });
    assert.equal(long.status, 422, 'a version of a megabyte is not stored on every page');
    assert.match(long.body.error ?? '', /^version/);
    const bad = await node('POST', '/register', { version: '1.0.0', hostname: 'h', port: 70000 });
    assert.equal(bad.status, 422);
    assert.match(bad.body.error ?? '', /^port/);
    for (const [apiUrl, message] of [
      ['ftp://x', /^api_url: must be an http\(s\) URL/],
      ['http://127.0.0.1:0', /^api_url: the port must be 1-65535/],
      ['http://127.0.0.1:8480/api/v1', /^api_url: give the agent's base URL without \/api\/v1/],
    ] as const) {
      const url = await node('POST', '/register', { version: '1.0.0', hostname: 'h', port: 8480, api_url: apiUrl });
      assert.equal(url.status, 422, apiUrl);
      assert.match(url.body.error ?? '', message);
    }
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

  it('rejects an invalid bandwidth object on server create before anything is written', async () => {
    const servers = async (): Promise<number> => ((await panel.api(admin, 'GET', '/api/application/servers')).body as { meta: { pagination: { total: number } } }).meta.pagination.total;
    const count = await servers();
    const version = ((await node('GET', '/limits')).body.data as { config_version: number }).config_version;
    const body = { name: 'bad-bw', user: ownerId, egg: eggId, allocation: { default: allocations[0] } };
    const r = await panel.api(admin, 'POST', '/api/application/servers', { ...body, bandwidth: { rx_speed_mbps: -1, exceed_action: 'boom' } });
    assert.equal(r.status, 422, r.text);
    const errors = (r.body as { errors: { code: string; detail: string; meta: { source_field: string } }[] }).errors;
    assert.deepEqual(new Set(errors.map((e) => e.code)), new Set(['ValidationException']));
    assert.deepEqual(new Set(errors.map((e) => e.meta.source_field)), new Set(['bandwidth.rx_speed_mbps', 'bandwidth.exceed_action']));
    assert.match(errors.find((e) => e.meta.source_field === 'bandwidth.rx_speed_mbps')?.detail ?? '', /bandwidth\.rx_speed_mbps/);
    const notObject = await panel.api(admin, 'POST', '/api/application/servers', { ...body, bandwidth: 'fast' });
    assert.equal(notObject.status, 422, notObject.text);
    assert.deepEqual((notObject.body as { errors: { meta: { source_field: string } }[] }).errors.map((e) => e.meta.source_field), ['bandwidth']);
    const both = await panel.api(admin, 'POST', '/api/application/servers', { ...body, name: '', bandwidth: { tx_quota_day_gb: 1.5 } });
    assert.equal(both.status, 422, both.text);
    assert.deepEqual(new Set((both.body as { errors: { meta: { source_field: string } }[] }).errors.map((e) => e.meta.source_field)), new Set(['name', 'bandwidth.tx_quota_day_gb']), 'core and addon problems at once');
    assert.equal(await servers(), count, 'no server was created');
    assert.equal(((await node('GET', '/limits')).body.data as { config_version: number }).config_version, version, 'no limits change');

    // A valid create is one limits change, with its own limits or without.
    for (const extra of [{ bandwidth: { tx_quota_day_gb: 5 } }, {}]) {
      const before = ((await node('GET', '/limits')).body.data as { config_version: number }).config_version;
      const made = await panel.api(admin, 'POST', '/api/application/servers', { ...body, name: `bw-once-${Object.keys(extra).length}`, allocation: { default: allocations[1] }, ...extra });
      assert.equal(made.status, 201, made.text);
      assert.equal(((await node('GET', '/limits')).body.data as { config_version: number }).config_version, before + 1, JSON.stringify(extra));
      assert.equal((await panel.api(admin, 'DELETE', `/api/application/servers/${String((made.body as Item).attributes.id)}`)).status, 204);
    }
  });

  it('caps node-facing bodies at 1 MiB and answers bad content types and malformed JSON with 422', async () => {
    const big = await raw('/heartbeat', JSON.stringify({ pad: 'x'.repeat(2 * 1024 * 1024) }), 'application/json');
    assert.equal(big.status, 413);
    assert.match(big.body.error ?? '', /1048576/);
    const fits = await raw('/heartbeat', JSON.stringify({ pad: 'x'.repeat(1000 * 1024) }), 'application/json');
    assert.equal(fits.status, 200, 'a body under 1 MiB is read');
    const jsonx = await raw('/heartbeat', '{}', 'application/jsonx');
    assert.equal(jsonx.status, 422);
    assert.equal(jsonx.body.meta.code, 'ERR_VALIDATION');
    assert.equal(jsonx.body.success, false);
    const charset = await raw('/heartbeat', '{}', 'application/json; charset=utf-8');
    assert.equal(charset.status, 200, 'parameters after application/json are fine');
    const malformed = await raw('/heartbeat', '{"version":', 'application/json');
    assert.equal(malformed.status, 422);
    assert.equal(malformed.body.meta.code, 'ERR_VALIDATION');
    assert.equal(malformed.body.data, null);
  });

  it('accepts heartbeat rates only as non-negative numbers within bounds (rounded), counts as integers', async () => {
    for (const bad of ['{"rx_rate_bps":1e300}', '{"containers":1.5}', '{"rx_rate_bps":-1}', '{"containers":1e300}']) {
      const r = await raw('/heartbeat', bad, 'application/json');
      assert.equal(r.status, 422, bad);
      assert.equal(r.body.meta.code, 'ERR_VALIDATION');
      assert.match(r.body.error ?? '', /^(rx_rate_bps|tx_rate_bps|containers):/, bad);
    }
    assert.equal((await node('POST', '/heartbeat', { rx_rate_bps: 125_000_000, tx_rate_bps: 0.6 })).status, 200, 'rates are numeric (spec/1 §2.7)');
  });

  it('accepts only real RFC 3339 occurred_at timestamps', async () => {
    const own = await createServer('clock');
    const event = (occurred_at: string): unknown => ({ events: [{ server_uuid: own.uuid, type: 'restored', period: null, direction: null, message: 'clock', occurred_at }] });
    for (const bad of ['2026-13-45T99:99:99Z', '2026-02-30T10:00:00Z', '2026-01-01T10:00:00+25:00', '2026-01-01']) {
      const r = await node('POST', '/events', event(bad));
      assert.equal(r.status, 422, bad);
      assert.match(r.body.error ?? '', /^events\.0\.occurred_at:/, bad);
    }
    for (const good of ['2024-02-29T23:59:60Z', '2026-01-01T10:00:00.123+02:00']) assert.equal((await node('POST', '/events', event(good))).status, 200, good);
  });

  it('stores a repeated event delivery once and still counts it as accepted', async () => {
    const own = await createServer('twice');
    const batch = {
      events: [
        { server_uuid: own.uuid, type: 'throttled', period: 'day', direction: 'tx', message: 'dup-test-throttled', occurred_at: '2026-11-26T11:00:00Z' },
        { server_uuid: own.uuid, type: 'restored', period: null, direction: null, message: 'dup-test-restored', occurred_at: '2026-11-26T12:00:00Z' },
      ],
    };
    // The same instants in other spellings: lower case, milliseconds, an offset.
    const respelled = {
      events: [
        { ...batch.events[0], occurred_at: '2026-11-26t11:00:00.000z' },
        { ...batch.events[1], occurred_at: '2026-11-26T13:00:00+01:00' },
      ],
    };
    for (const b of [batch, batch, respelled]) {
      const r = await node('POST', '/events', b);
      assert.equal(r.status, 200);
      assert.equal(r.body.data?.accepted, 2, 'an already stored event is accepted, so the agent stops retrying');
    }
    const page = (await web.get('/admin/bandwidth/events')).text;
    assert.equal(page.match(/dup-test-throttled/g)?.length, 1);
    assert.equal(page.match(/dup-test-restored/g)?.length, 1, 'an event without period and direction too');
  });

  it('marks a node that heartbeats without registering online', async () => {
    const b = createNode('node-b');
    const poll = async (): Promise<Record<string, unknown> | undefined> => (await web.json<{ nodes: Record<string, unknown>[] }>('/admin/bandwidth/nodes/poll')).nodes.find((n) => n.id === b.id);
    assert.equal((await poll())?.online, false);
    const r = await raw('/heartbeat', JSON.stringify({ version: '1.0.0', containers: 1 }), 'application/json', b.token);
    assert.equal(r.status, 200);
    const card = await poll();
    assert.equal(card?.online, true);
    assert.equal(typeof card?.last_seen_at, 'string');
    assert.equal(card?.containers, 1);
    assert.equal(card?.registered, false, 'it still never registered');
    assert.equal((await web.request('GET', `/admin/bandwidth/nodes/${b.id}/live`)).status, 200);
    for (const spelling of [`0x${b.id.toString(16)}`, `${b.id}.0`, `0${b.id}`]) {
      assert.equal((await web.request('GET', `/admin/bandwidth/nodes/${spelling}/live`)).status, 404, spelling);
    }
  });

  it('warns when an online node registers from another address (two agents may share its token), not when it comes back from offline', async () => {
    // A node of its own, deleted at the end, so no later test polls or pushes to these addresses (nothing listens there).
    const d = createNode('node-shared');
    const register = async (apiUrl: string): Promise<void> => {
      const r = await raw('/register', JSON.stringify({ version: '1.0.0', hostname: 'h', port: 8480, api_url: apiUrl }), 'application/json', d.token);
      assert.equal(r.status, 200, JSON.stringify(r.body));
    };
    const logged = (): { level: string; msg: string; previous_api_url?: string }[] =>
      panel.daemon
        .output()
        .split('\n')
        .filter((line) => line.includes('"node":"node-shared"') && line.includes(' registered from '))
        .map((line) => JSON.parse(line) as { level: string; msg: string; previous_api_url?: string });

    await register('http://127.0.0.1:19451');
    await register('http://127.0.0.1:19452');
    await until('the second registration in the log', () => logged().length === 2);
    const [first, moved] = logged();
    assert.equal(first?.level, 'info', 'a first registration is info');
    assert.equal(moved?.level, 'warn', 'a new address while online is a warning');
    assert.equal(moved?.msg, 'node node-shared registered from http://127.0.0.1:19452 while online at http://127.0.0.1:19451: two agents may share its token');
    assert.equal(moved?.previous_api_url, 'http://127.0.0.1:19451');

    // As the stats poll leaves it after failed polls (three poll intervals, too long to wait for here).
    const db = new DatabaseSync(join(panel.dir, 'data', 'panel.sqlite'), { timeout: 5_000 });
    try {
      db.prepare('UPDATE bandwidth_nodes SET online = 0 WHERE node_id = ?').run(d.id);
    } finally {
      db.close();
    }
    await register('http://127.0.0.1:19453');
    await until('the third registration in the log', () => logged().length === 3);
    assert.equal(logged()[2]?.level, 'info', 'a node back from offline at a new address is info');
    assert.equal((await panel.api(admin, 'DELETE', `/api/application/nodes/${d.id}`)).status, 204);
  });

  it('answers a deleted node token with 404 ERR_NODE_NOT_FOUND', async () => {
    const c = createNode('node-c');
    const reg = await raw('/register', JSON.stringify({ version: '1.0.0', hostname: 'h', port: 8480 }), 'application/json', c.token);
    assert.equal(reg.status, 200);
    assert.equal((await panel.api(admin, 'DELETE', `/api/application/nodes/${c.id}`)).status, 204);
    const limits = await fetch(`${panel.url}/api/bandwidth/node/limits`, { headers: { authorization: `Bearer ${c.token}` } });
    assert.equal(limits.status, 404);
    assert.equal(((await limits.json()) as Envelope).meta.code, 'ERR_NODE_NOT_FOUND');
    const beat = await raw('/heartbeat', '{}', 'application/json', c.token);
    assert.equal(beat.status, 404);
    assert.equal(beat.body.meta.code, 'ERR_NODE_NOT_FOUND');
    const wrong = await fetch(`${panel.url}/api/bandwidth/node/limits`, { headers: { authorization: `Bearer ${'ab'.repeat(32)}` } });
    assert.equal(wrong.status, 401, 'an unknown token is still 401');
    // The agent of the deleted node says so, instead of asking for the new token of a node that is gone.
    const agentC = startAgent(await writeAgentConfig('agent-c', c.token));
    try {
      await agentC.waitFor(/this node was deleted in the panel: pair the agent again with a new node's token in [^ ]+agent-c\.token and restart/, 10_000);
      assert.doesNotMatch(agentC.output(), /token rejected/);
    } finally {
      await agentC.stop();
    }
  });

  it('asks before unthrottling a server: the button opens the question, only the answer under it posts', async () => {
    const own = await createServer('asked');
    const page = (await web.get(`/admin/bandwidth/servers/${own.id}`)).text;
    const form = new RegExp(`<details class="confirm"><summary class="button">Unthrottle until the period resets</summary><form method="post" action="/admin/bandwidth/servers/${own.id}/unthrottle"[^>]*>[\\s\\S]*?Unthrottle asked\\?[\\s\\S]*?Yes, unthrottle until the period resets</button></form></details>`);
    assert.match(page, form);
    assert.equal(page.match(/\/unthrottle"/g)?.length, 1, 'no other form posts the unthrottle');
  });

  it('a quota suspension names its node and reason in the activity log; a name at the limit stays editable', async () => {
    await bandwidthSettingsForm(web).save({ poll_interval_seconds: 15, rename_on_quota_suspend: true });
    const longName = 'L'.repeat(191);
    const long = await createServer(longName);
    assert.equal((await node('POST', '/suspend', { server_uuid: long.uuid, reason: 'rx month quota reached' })).status, 200);
    const attributes = ((await panel.api(admin, 'GET', `/api/application/servers/${long.id}`)).body as Item).attributes as { name: string; description: string };
    assert.equal(attributes.name, longName, 'the prefix would pass 191 characters: the name is kept');
    assert.match(attributes.description, /^\(Bandwidth Quota Exceeded\) /);
    const edit = await panel.api(admin, 'PATCH', `/api/application/servers/${long.id}/details`, { name: attributes.name, user: ownerId, description: 'edited' });
    assert.equal(edit.status, 200, edit.text);
    const db = new DatabaseSync(join(panel.dir, 'data', 'panel.sqlite'), { readOnly: true });
    try {
      const entry = db.prepare("SELECT actor_type, actor_id, ip, properties FROM activity_logs WHERE event = 'server:suspended' AND subject_id = ?").get(long.id) as { actor_type: string; actor_id: number; ip: string; properties: string };
      assert.equal(entry.actor_type, 'node');
      assert.equal(entry.actor_id, nodeId);
      assert.equal(entry.ip, '127.0.0.1');
      assert.deepEqual(JSON.parse(entry.properties), { reason: 'rx month quota reached', source: 'bandwidth quota' });
    } finally {
      db.close();
    }
  });
});

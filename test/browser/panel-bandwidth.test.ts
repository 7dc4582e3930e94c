/**
 * The bandwidth addon's admin pages in a real browser against the real panel: a fake node agent
 * (the spec/1 §4.1 node API on 127.0.0.1, answering /stats, PUT /limits and unthrottle with the
 * envelope) registers and heartbeats over the documented node-facing API with its pairing token;
 * a week of hourly usage of four servers is written into the panel's SQLite rollups (waiting
 * for real polls would take minutes); then the dashboard chart and top consumers, the nodes page
 * with live rates, the settings form (422 on a bad value, a push with the new config_version on
 * a good one), the events list, the override form on the core server page and the unthrottle
 * button are driven in Chromium.
 *
 * UPDATE_SCREENSHOTS=1 also writes the dashboard to docs/bandwidth-dashboard.png.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import type { LimitsPayload, ServerStatsRecord } from '../../src/contracts/types.ts';
import { ROOT } from '../integration/hostkit-process.ts';
import { launchChromium } from './chromium.ts';
import { ADMIN, signInFirstTime, startWebPanel, submit, type WebPanel } from './panel-login.ts';

const SERVERS = ['survival', 'creative', 'skyblock', 'modded'] as const;
// Bytes per hour at the daily peak, per server: distinct sizes so the top consumers have an order.
const PEAK = [14, 9, 5, 2].map((g) => g * 1024 ** 3);
const DAYS = 8;
// What the fake node reports per server (bytes/s): the nodes page's live cells show their sum.
const RX_RATE = 1_250_000;
const TX_RATE = 500_000;

interface FakeNode {
  url: string;
  server: Server;
  pushes: LimitsPayload[];
  unthrottled: string[];
  uuids: string[];
}

let panel: WebPanel | undefined;
let browser: Browser | undefined;
let node: FakeNode | undefined;

const readBody = async (req: IncomingMessage): Promise<string> => {
  let s = '';
  for await (const c of req) s += String(c);
  return s;
};

/** The node agent API of spec/1 §4.1 as far as the panel calls it, answering with the §2.1 envelope. */
async function startFakeNode(token: () => string): Promise<FakeNode> {
  const state: Omit<FakeNode, 'url' | 'server'> = { pushes: [], unthrottled: [], uuids: [] };
  let polls = 0;
  const server = createServer((req, res) => {
    void (async () => {
      const send = (status: number, data: unknown, error: string | null = null, code = ''): void => {
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ success: error === null, data, error, meta: { version: '1.0.0', code } }));
      };
      const body = await readBody(req);
      if (req.headers.authorization !== `Bearer ${token()}`) return send(401, null, 'bad token', 'ERR_UNAUTHORIZED');
      const path = req.url ?? '';
      if (req.method === 'GET' && path === '/api/v1/stats') {
        polls++;
        const servers: ServerStatsRecord[] = state.uuids.map((uuid, i) => ({
          uuid,
          container_id: uuid.slice(0, 12),
          online: true,
          rx_bytes_total: (i + 1) * polls * 10 * 1024 ** 2,
          tx_bytes_total: (i + 1) * polls * 4 * 1024 ** 2,
          rx_rate_bps: RX_RATE,
          tx_rate_bps: TX_RATE,
          rx_used_day_bytes: (i + 1) * 3 * 1024 ** 3,
          rx_used_week_bytes: (i + 1) * 12 * 1024 ** 3,
          rx_used_month_bytes: (i + 1) * 40 * 1024 ** 3,
          tx_used_day_bytes: (i + 1) * 1024 ** 3,
          tx_used_week_bytes: (i + 1) * 5 * 1024 ** 3,
          tx_used_month_bytes: (i + 1) * 15 * 1024 ** 3,
          throttled: i === 0,
          exceeded: i === 0 ? ['rx_day'] : [],
        }));
        return send(200, { servers });
      }
      if (req.method === 'PUT' && path === '/api/v1/limits') {
        const payload = JSON.parse(body) as LimitsPayload;
        state.pushes.push(payload);
        return send(200, { applied: payload.servers.length, failed: 0 });
      }
      const m = /^\/api\/v1\/servers\/([^/]+)\/unthrottle$/.exec(path);
      if (req.method === 'POST' && m?.[1] !== undefined) {
        state.unthrottled.push(decodeURIComponent(m[1]));
        return send(200, { unthrottled: true });
      }
      return send(404, null, 'not found', 'ERR_NOT_FOUND');
    })();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { ...state, url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, server };
}

/** Polls `check` until it returns a value (not undefined) or fails after `ms`. */
async function eventually<T>(what: string, check: () => T | undefined, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A week and a day of hourly usage per server with a daily swing, and the matching daily rows. */
function seedUsage(dataDir: string, nodeId: number, serverIds: readonly number[]): void {
  const db = new DatabaseSync(join(dataDir, 'panel.sqlite'));
  try {
    // The panel is running: wait for its writer instead of failing on a busy database.
    db.exec('PRAGMA busy_timeout = 10000');
    const hourly = db.prepare('INSERT INTO bandwidth_hourly (hour, server_id, node_id, rx_bytes, tx_bytes) VALUES (?, ?, ?, ?, ?)');
    const daily = db.prepare(`INSERT INTO bandwidth_daily (day, server_id, node_id, rx_bytes, tx_bytes) VALUES (?, ?, ?, ?, ?)
      ON CONFLICT(day, server_id) DO UPDATE SET rx_bytes = rx_bytes + excluded.rx_bytes, tx_bytes = tx_bytes + excluded.tx_bytes`);
    const nowHour = Math.floor(Date.now() / 3_600_000) * 3600;
    let seed = 42;
    const noise = (): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    db.exec('BEGIN');
    for (let h = nowHour - DAYS * 24 * 3600; h <= nowHour; h += 3600) {
      const hourOfDay = new Date(h * 1000).getUTCHours();
      // Evening peak at 20:00 UTC, quiet in the early morning; weekends a little busier.
      const swing = 0.55 + 0.45 * Math.cos(((hourOfDay - 20) / 24) * 2 * Math.PI);
      const weekend = [0, 6].includes(new Date(h * 1000).getUTCDay()) ? 1.25 : 1;
      serverIds.forEach((id, i) => {
        const rx = Math.round((PEAK[i] ?? 0) * swing * weekend * (0.8 + 0.4 * noise()));
        const tx = Math.round(rx * (0.25 + 0.1 * noise()));
        hourly.run(h, id, nodeId, rx, tx);
        daily.run(new Date(h * 1000).toISOString().slice(0, 10), id, nodeId, rx, tx);
      });
    }
    db.exec('COMMIT');
  } finally {
    db.close();
  }
}

interface Ids {
  nodeId: number;
  token: string;
  servers: { id: number; uuid: string; name: string }[];
}

let ids: Ids | undefined;

before(async () => {
  let token = '';
  node = await startFakeNode(() => token);
  panel = await startWebPanel('hostkit-panel-bw-');
  const p = panel;
  const key = (JSON.parse(p.cli('key', 'create', '--user', ADMIN.username, '--type', 'application', '--json')) as { meta: { secret_token: string } }).meta.secret_token;
  const api = async <T>(method: string, path: string, body?: unknown): Promise<T> => {
    const res = await fetch(`${p.base}${path}`, { method, headers: { authorization: `Bearer ${key}`, accept: 'application/json', 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const text = await res.text();
    assert.ok(res.ok, `${method} ${path}: ${res.status} ${text}`);
    return JSON.parse(text) as T;
  };
  type Item = { attributes: Record<string, unknown>; meta?: { pairing_token?: string } };
  const loc = await api<Item>('POST', '/api/application/locations', { short: 'eu-west', long: 'Europe West' });
  const created = await api<Item>('POST', '/api/application/nodes', { name: 'node-1', fqdn: 'node1.example.test', location_id: loc.attributes.id });
  token = created.meta?.pairing_token ?? '';
  const nodeId = created.attributes.id as number;
  const allocs = await api<{ data: Item[] }>('POST', `/api/application/nodes/${nodeId}/allocations`, { ip: '127.0.0.1', ports: ['25565-25568'] });
  const nest = await api<Item>('POST', '/api/application/nests', { name: 'Minecraft' });
  const egg = await api<Item>('POST', `/api/application/nests/${String(nest.attributes.id)}/eggs`, { name: 'Paper', docker_image: 'ghcr.io/example/paper:1.21', startup: 'java -jar paper.jar' });
  const owner = (await api<{ data: Item[] }>('GET', `/api/application/users?filter[search]=${ADMIN.username}`)).data[0]?.attributes.id;
  const servers: Ids['servers'] = [];
  for (const [i, name] of SERVERS.entries()) {
    const s = await api<Item>('POST', '/api/application/servers', { name, user: owner, egg: egg.attributes.id, limits: { memory: 2048, swap: 0, disk: 10240, io: 500, cpu: 200 }, allocation: { default: allocs.data[i]?.attributes.id } });
    servers.push({ id: s.attributes.id as number, uuid: s.attributes.uuid as string, name });
  }
  node.uuids.push(...servers.map((s) => s.uuid));
  ids = { nodeId, token, servers };

  // The agent's side of the wire contract (spec/1 §4.2): register with its API URL, then a heartbeat.
  const agent = async (path: string, body: unknown): Promise<{ status: number; data: Record<string, unknown> }> => {
    const res = await fetch(`${p.base}/api/bandwidth/node${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: res.status, data: ((await res.json()) as { data: Record<string, unknown> }).data };
  };
  const reg = await agent('/register', { version: '1.0.0', hostname: 'node1', port: Number(new URL(node.url).port), api_url: node.url });
  assert.equal(reg.status, 200);
  assert.equal(reg.data.node_id, nodeId);
  assert.equal(reg.data.heartbeat_interval_seconds, 60);
  const hb = await agent('/heartbeat', { version: '1.0.0', containers: SERVERS.length, rx_rate_bps: 1000, tx_rate_bps: 500, throttled: 1, quota_exceeded: 1 });
  assert.equal(hb.status, 200);
  assert.equal(typeof hb.data.config_version, 'number');
  const occurred = new Date(Date.now() - 3_600_000).toISOString();
  const first = servers[0]?.uuid ?? '';
  const ev = await agent('/events', {
    events: [
      { server_uuid: first, type: 'quota_exceeded', period: 'day', direction: 'rx', message: 'RX day quota of 100 GiB exceeded', occurred_at: occurred },
      { server_uuid: first, type: 'throttled', period: 'day', direction: 'rx', message: 'throttled to 5 Mbit/s until the day resets', occurred_at: occurred },
      // A server the panel does not know on this node: counted, not stored (spec/1 §4.2 rule 4).
      { server_uuid: '00000000-0000-4000-8000-000000000000', type: 'restored', period: null, direction: null, message: 'not ours', occurred_at: occurred },
    ],
  });
  assert.deepEqual([ev.status, ev.data.accepted], [200, 3]);

  seedUsage(p.dataDir, nodeId, servers.map((s) => s.id));
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await panel?.stop();
  await new Promise((r) => node?.server.close(r));
});

/** Waits for the uPlot chart the dashboard script draws; returns its point count. */
async function chartReady(page: Page): Promise<number> {
  await page.waitForSelector('#bw-chart[data-ready]', { timeout: 10_000 });
  await page.waitForSelector('#bw-chart .uplot canvas');
  return Number(await page.getAttribute('#bw-chart', 'data-ready'));
}

test('bandwidth admin pages: chart, top consumers, nodes, settings push, events, override, unthrottle', { timeout: 60_000 }, async () => {
  assert.ok(browser !== undefined && panel !== undefined && node !== undefined && ids !== undefined);
  const { base } = panel;
  const fake = node;
  const [first] = ids.servers;
  assert.ok(first !== undefined);
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(e.message));
  // A CSP refusal of the chart library or the script only shows in the console.
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy|uPlot|bandwidth\.js/.test(m.text())) problems.push(m.text());
  });
  await signInFirstTime(page, base);

  // Dashboard: one point per hour of the last day, the seeded servers in the top consumers by size.
  await page.goto(`${base}/admin/bandwidth`);
  assert.equal(await chartReady(page), 24);
  assert.match((await page.textContent('#bw-chart-summary')) ?? '', /^In [\d.]+ GiB, Out [\d.]+ GiB over 24 hours$/);
  const rows = await page.locator('#top-consumers tr td:first-child').allTextContents();
  assert.deepEqual(rows, [...SERVERS]);
  assert.match((await page.textContent('.stats')) ?? '', /1 \/ 1\s*nodes online/);
  // Beyond a week the top consumers come from the daily rollups: same order.
  const month = (await (await context.request.get(`${base}/admin/bandwidth/api/top-consumers?hours=720`)).json()) as { servers: { name: string; total_bytes: number }[] };
  assert.deepEqual(month.servers.map((s) => s.name), [...SERVERS]);

  // The week view is the picture in the docs.
  await page.goto(`${base}/admin/bandwidth?hours=168`);
  assert.equal(await chartReady(page), 168);
  const shot = await page.screenshot({ fullPage: true, ...(process.env.UPDATE_SCREENSHOTS === '1' ? { path: join(ROOT, 'docs', 'bandwidth-dashboard.png') } : {}) });
  assert.ok(shot.length > 10_000);

  // Nodes: online, the agent's version, the live cells replaced by the script from the fake node's stats.
  await page.goto(`${base}/admin/bandwidth/nodes`);
  const row = page.locator(`#bandwidth-nodes tr[data-node="${ids.nodeId}"]`);
  assert.match((await row.textContent()) ?? '', /online[\s\S]*1\.0\.0/);
  await page.waitForSelector(`#bandwidth-nodes tr[data-node="${ids.nodeId}"][data-live="ok"]`, { timeout: 10_000 });
  assert.equal(await row.locator('[data-k="rx"]').textContent(), `${((SERVERS.length * RX_RATE * 8) / 1e6).toFixed(2)} Mbit/s`);
  assert.equal(await row.locator('[data-k="tx"]').textContent(), `${((SERVERS.length * TX_RATE * 8) / 1e6).toFixed(2)} Mbit/s`);
  assert.equal(await row.locator('[data-k="containers"]').textContent(), String(SERVERS.length));
  assert.equal(await row.locator('[data-k="throttled"]').textContent(), '1');

  // Settings: an interval below 15 s is refused with the field's problem; 15 s is saved and pushed.
  await page.goto(`${base}/admin/bandwidth/settings`);
  const versionBefore = Number(await page.textContent('#config-version'));
  await page.fill('#f-poll_interval_seconds', '5');
  const [refused] = await Promise.all([page.waitForResponse((r) => r.request().method() === 'POST' && r.url().endsWith('/admin/bandwidth/settings')), submit(page, 'Save settings')]);
  assert.equal(refused.status(), 422);
  assert.match((await page.textContent('.notice.error')) ?? '', /poll_interval_seconds|15/);
  assert.equal(Number(await page.textContent('#config-version')), versionBefore);
  await page.fill('#f-poll_interval_seconds', '15');
  await submit(page, 'Save settings');
  assert.equal(new URL(page.url()).pathname, '/admin/bandwidth/settings');
  const versionAfter = Number(await page.textContent('#config-version'));
  assert.ok(versionAfter > versionBefore, `config_version ${versionBefore} -> ${versionAfter}`);
  assert.equal(await page.inputValue('#f-poll_interval_seconds'), '15');
  const pushed = await eventually('the limits push of the new version', () => fake.pushes.find((l) => l.config_version === versionAfter));
  assert.deepEqual(pushed.servers.map((s) => s.uuid).sort(), [...fake.uuids].sort());

  // Events posted by the agent.
  await page.goto(`${base}/admin/bandwidth/events`);
  const events = (await page.textContent('#bandwidth-events')) ?? '';
  assert.match(events, /survival[\s\S]*throttled[\s\S]*throttled to 5 Mbit\/s/);
  assert.match(events, /quota_exceeded[\s\S]*day[\s\S]*rx[\s\S]*RX day quota of 100 GiB exceeded/);
  assert.doesNotMatch(events, /not ours/);

  // The core server page carries the limits section; an override saved there is pushed to the node.
  await page.goto(`${base}/admin/servers/${first.id}`);
  const card = page.locator('#bandwidth-limits');
  assert.equal(await card.locator('h2').textContent(), 'Bandwidth limits');
  assert.match((await card.textContent()) ?? '', /follows the global defaults/);
  await card.locator('input[name="use_override"]').check();
  await card.locator('input[name="rx_speed_mbps"]').fill('100');
  await card.locator('input[name="tx_quota_month_gb"]').fill('500');
  await Promise.all([page.waitForLoadState('load'), card.locator('button:has-text("Save limits")').click()]);
  assert.equal(new URL(page.url()).pathname, `/admin/bandwidth/servers/${first.id}`);
  assert.match((await page.textContent('main')) ?? '', /Limits saved and pushed to the node/);
  const withOverride = await eventually('the push of the override', () => fake.pushes.find((l) => l.servers.some((s) => s.uuid === first.uuid && s.rx_speed_mbps === 100)));
  assert.equal(withOverride.servers.find((s) => s.uuid === first.uuid)?.tx_quota_month_gb, 500);
  assert.equal(withOverride.servers.find((s) => s.uuid !== first.uuid)?.rx_speed_mbps, 0, 'the other servers keep the defaults');
  await page.goto(`${base}/admin/servers/${first.id}`);
  assert.match((await page.locator('#bandwidth-limits').textContent()) ?? '', /has its own limits/);
  assert.equal(await page.locator('#bandwidth-limits input[name="rx_speed_mbps"]').inputValue(), '100');

  // The addon's server page: usage against the quotas, its chart, and the unthrottle button calling the node.
  await page.goto(`${base}/admin/bandwidth/servers/${first.id}`);
  assert.equal(await chartReady(page), 168);
  // The override's quota is what the usage table measures against (usage itself comes with the next stats poll).
  assert.match((await page.textContent('#server-usage')) ?? '', /Out \(TX\)[\s\S]*\/ 500 GiB/);
  await page.click('summary:has-text("Unthrottle until the period resets")');
  await submit(page, 'Yes, unthrottle until the period resets');
  assert.match((await page.textContent('main')) ?? '', /Unthrottled until the quota periods reset/);
  assert.deepEqual(fake.unthrottled, [first.uuid]);

  assert.deepEqual(problems, []);
  await context.close();
});

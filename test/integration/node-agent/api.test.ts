/**
 * The node agent as the panel and an operator see it, without containers: the node API of
 * spec/1 §4.1 and §7 (every error code, bad JSON, an oversized body, wrong tokens), the panel
 * client against a fake panel that follows §4.2, the local CLI, and a clean SIGTERM.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { request } from 'node:http';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { freePort, runHostkit, startHostkit, type Daemon } from '../hostkit-process.ts';
import { startFakePanel, type FakePanel } from './fake-panel.ts';

const TOKEN = 'ab'.repeat(32);
const A = '11111111-2222-4333-8444-555555555555';
const B = '66666666-7777-4888-9999-aaaaaaaaaaaa';
const dir = mkdtempSync(join(tmpdir(), 'hk-agent-api-'));
const tokenFile = join(dir, 'token');
const configFile = join(dir, 'config.yaml');
let panel: FakePanel;
let agent: Daemon;
let base: string;


async function api(method: string, path: string, opts: { token?: string | null; body?: string; type?: string } = {}) {
  const headers: Record<string, string> = {};
  const token = opts.token === undefined ? TOKEN : opts.token;
  if (token !== null) headers['authorization'] = `Bearer ${token}`;
  if (opts.body !== undefined) headers['content-type'] = opts.type ?? 'application/json';
  const res = await fetch(`${base}/api/v1${path}`, { method, headers, ...(opts.body !== undefined ? { body: opts.body } : {}) });
  return { status: res.status, // eslint-disable-next-line @typescript-eslint/no-explicit-any -- response shapes differ per endpoint; each test checks the fields it reads
    body: (await res.json()) as { success: boolean; data: any; error: string | null; meta: { version: string; code: string } } };
}

const cli = (...args: string[]) => runHostkit(['node-agent', ...args, '--config', configFile]);

before(async () => {
  writeFileSync(tokenFile, `${TOKEN}\n`, { mode: 0o600 });
  panel = await startFakePanel(TOKEN);
  panel.heartbeatSeconds = 1;
  panel.servers.add(A);
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  writeFileSync(
    configFile,
    stringify({
      general: { socket_path: join(dir, 'agent.sock') },
      logging: { console: true, file: join(dir, 'agent.log'), level: 'debug', format: 'json' },
      database: { path: join(dir, 'agent.db') },
      docker: { discovery_interval: '1s' },
      bandwidth: { poll_interval: '1s' },
      scheduler: { check_interval: '1s' },
      api: { listen: '127.0.0.1', port },
      panel: { url: panel.url, token_file: tokenFile, heartbeat_interval: '1s' },
      traffic_control: { enabled: false },
    }),
  );
  agent = startHostkit(['node-agent', 'serve', '--config', configFile], { env: { DOCKER_HOST: `unix://${join(dir, 'no-docker.sock')}` } });
  await agent.waitFor(/node API listening/);
});

after(async () => {
  await agent?.stop('SIGKILL');
  await panel?.close();
});

test('registers with the panel and sends heartbeats with integer rates and counts', async () => {
  await panel.waitFor((p) => p.calls.some((c) => c.path === '/heartbeat'));
  const reg = panel.calls.find((c) => c.path === '/register')?.body as Record<string, unknown>;
  assert.equal(reg['version'], '1.0.0');
  assert.equal(typeof reg['hostname'], 'string');
  assert.equal(reg['port'], Number(new URL(base).port));
  const hb = panel.calls.find((c) => c.path === '/heartbeat')?.body as Record<string, unknown>;
  for (const k of ['containers', 'rx_rate_bps', 'tx_rate_bps', 'throttled', 'quota_exceeded']) assert.ok(Number.isInteger(hb[k]), `${k} is an integer`);
  assert.equal(hb['version'], '1.0.0');
});

test('GET /health is public and enveloped; a missing Docker engine does not stop the API', async () => {
  const r = await api('GET', '/health', { token: null });
  assert.equal(r.status, 200);
  assert.equal(r.body.success, true);
  assert.equal(r.body.error, null);
  assert.deepEqual(r.body.meta, { version: '1.0.0', code: '' });
  assert.equal(r.body.data.status, 'ok');
  assert.equal(r.body.data.version, '1.0.0');
  assert.equal(r.body.data.containers, 0);
  assert.ok(Number.isInteger(r.body.data.uptime_seconds));
  assert.match(agent.output(), /container runtime unavailable/);
});

test('every other endpoint needs the bearer token: missing, wrong, or of another length is 401', async () => {
  for (const token of [null, 'short', TOKEN.slice(0, 63) + 'c', TOKEN + 'ab']) {
    for (const [method, path] of [['GET', '/stats'], ['PUT', '/limits'], ['GET', `/servers/${A}/history`], ['POST', `/servers/${A}/unthrottle`]] as const) {
      const r = await api(method, path, { token, ...(method === 'PUT' ? { body: '{}' } : {}) });
      assert.equal(r.status, 401, `${method} ${path} with ${token}`);
      assert.deepEqual(r.body, { success: false, data: null, error: r.body.error, meta: { version: '1.0.0', code: 'ERR_UNAUTHORIZED' } });
    }
  }
});

test('PUT /limits: full replace, per-entry failures counted, speed_applied events reach the panel', async () => {
  const payload = {
    config_version: 3,
    timezone: 'Europe/Berlin',
    servers: [
      { uuid: A, enabled: true, rx_speed_mbps: 100, tx_speed_mbps: 50, rx_quota_day_gb: 0, rx_quota_week_gb: 0, rx_quota_month_gb: 10, tx_quota_day_gb: 0, tx_quota_week_gb: 0, tx_quota_month_gb: 0, exceed_action: 'throttle', throttle_rx_mbps: 5, throttle_tx_mbps: 5 },
      { uuid: B, enabled: false },
      { enabled: true, rx_speed_mbps: 1 },
    ],
  };
  // The panel owns config_version: it serves what it pushes, or the next heartbeat pulls it back.
  panel.limits = payload as unknown as FakePanel['limits'];
  const r = await api('PUT', '/limits', { body: JSON.stringify(payload) });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual(r.body.data, { applied: 2, failed: 1 });
  const stats = await api('GET', '/stats');
  assert.deepEqual(stats.body.data.servers.map((s: { uuid: string }) => s.uuid), [A, B]);
  const a = stats.body.data.servers[0];
  for (const k of ['rx_bytes_total', 'tx_bytes_total', 'rx_rate_bps', 'tx_rate_bps', 'rx_used_day_bytes', 'rx_used_week_bytes', 'rx_used_month_bytes', 'tx_used_day_bytes', 'tx_used_week_bytes', 'tx_used_month_bytes']) {
    assert.equal(a[k], 0, k);
  }
  assert.equal(a.online, false);
  assert.equal(a.throttled, false);
  assert.deepEqual(a.exceeded, []);
  await panel.waitFor((p) => p.events.some((e) => e.server_uuid === A && e.type === 'speed_applied'));
  const status = JSON.parse(cli('status', '--json').stdout) as { config_version: number; timezone: string };
  assert.equal(status.config_version, 3);
  assert.equal(status.timezone, 'Europe/Berlin');
});

test('bad requests: malformed JSON 400, oversized body 413, unknown timezone 400 keeping the old one', async () => {
  const bad = await api('PUT', '/limits', { body: '{"config_version": 4, "servers": [' });
  assert.equal(bad.status, 400);
  assert.equal(bad.body.meta.code, 'ERR_BAD_REQUEST');
  assert.equal(bad.body.data, null);
  const big = await api('PUT', '/limits', { body: JSON.stringify({ config_version: 4, servers: [], pad: 'x'.repeat(1024 * 1024) }) });
  assert.equal(big.status, 413);
  assert.equal(big.body.success, false);
  const tz = await api('PUT', '/limits', { body: JSON.stringify({ config_version: 4, timezone: 'Mars/Olympus', servers: [] }) });
  assert.equal(tz.status, 400);
  assert.match(tz.body.error ?? '', /timezone/);
  const status = JSON.parse(cli('status', '--json').stdout) as { config_version: number; timezone: string };
  assert.deepEqual([status.config_version, status.timezone], [3, 'Europe/Berlin']);
});

test('bad requests: another media type 415, a chunked body past 1 MiB 413, unknown routes 404, other methods 405, HEAD', async () => {
  const text = await api('PUT', '/limits', { body: '{}', type: 'text/plain' });
  assert.deepEqual([text.status, text.body.meta.code], [415, 'ERR_BAD_REQUEST']);
  // No Content-Length: the cap applies while the body streams in.
  const chunked = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = request(`${base}/api/v1/limits`, { method: 'PUT', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' } }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    const piece = Buffer.alloc(64 * 1024, 0x20);
    for (let i = 0; i < 20; i++) req.write(piece);
    req.end();
  });
  assert.equal(chunked.status, 413);
  assert.equal((JSON.parse(chunked.body) as { meta: { code: string } }).meta.code, 'ERR_BAD_REQUEST');
  // The cap holds on every route, one without a body too.
  const unthrottleBig = await api('POST', `/servers/${A}/unthrottle`, { body: 'x'.repeat(1024 * 1024 + 1), type: 'text/plain' });
  assert.deepEqual([unthrottleBig.status, unthrottleBig.body.meta.code], [413, 'ERR_BAD_REQUEST']);
  const nothing = await api('GET', '/nothing');
  assert.deepEqual([nothing.status, nothing.body.success, nothing.body.meta.code], [404, false, 'ERR_NOT_FOUND']);
  // A known path with another method: 405 with Allow (docs/node-agent.md), after the token check.
  for (const [method, path] of [['DELETE', '/stats'], ['POST', '/limits'], ['POST', '/health']] as const) {
    const res = await fetch(`${base}/api/v1${path}`, { method, headers: { authorization: `Bearer ${TOKEN}` } });
    const body = (await res.json()) as { success: boolean; meta: { code: string } };
    assert.deepEqual([res.status, body.success, body.meta.code], [405, false, 'ERR_BAD_REQUEST'], `${method} ${path}`);
    assert.ok(res.headers.get('allow'), `${method} ${path} names the allowed methods`);
  }
  assert.equal((await api('DELETE', '/stats', { token: null })).status, 401);
  // A payload without servers is refused whole; it does not wipe the limits.
  const noServers = await api('PUT', '/limits', { body: JSON.stringify({ config_version: 99 }) });
  assert.deepEqual([noServers.status, noServers.body.meta.code], [400, 'ERR_BAD_REQUEST']);
  // A version JSON cannot carry exactly (1e300 is an integer to JSON Schema) is refused too.
  const huge = await api('PUT', '/limits', { body: '{"config_version": 1e300, "servers": []}' });
  assert.deepEqual([huge.status, huge.body.meta.code], [400, 'ERR_BAD_REQUEST']);
  assert.match(huge.body.error ?? '', /config_version/);
  assert.equal((JSON.parse(cli('status', '--json').stdout) as { config_version: number }).config_version, 3);
  const head = await fetch(`${base}/api/v1/health`, { method: 'HEAD' });
  assert.equal(head.status, 200);
  assert.match(head.headers.get('content-type') ?? '', /application\/json/);
  assert.equal(await head.text(), '');
  // The local admin socket's status route is not on the TCP API.
  assert.equal((await api('GET', '/status')).status, 404);
});

test('history: buckets from the start of the period, 404 for unknown servers, 400 for bad parameters', async () => {
  // The CLI refuses a bad period or bucket itself: a usage error, exit 2, one line.
  for (const bad of [['--period', 'year'], ['--bucket', 'minute']]) {
    const r = cli('history', A, ...bad);
    assert.equal(r.code, 2, bad.join(' '));
    assert.match(r.stderr, /^error: option .* is invalid\. Allowed choices are .*\n$/);
  }
  const day = await api('GET', `/servers/${A}/history`);
  assert.equal(day.status, 200);
  assert.equal(day.body.data.uuid, A);
  assert.equal(day.body.data.period, 'day');
  assert.equal(day.body.data.bucket, 'hour');
  assert.ok(day.body.data.points.length >= 1 && day.body.data.points.length <= 25);
  for (const p of day.body.data.points) assert.deepEqual(Object.keys(p).sort(), ['rx_bytes', 't', 'tx_bytes']);
  const month = await api('GET', `/servers/${A}/history?period=month&bucket=day`);
  assert.equal(month.status, 200);
  const first = new Date(month.body.data.points[0].t);
  // Day buckets start at midnight in Europe/Berlin, the effective quota time zone.
  assert.equal(new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Berlin', hour: '2-digit', minute: '2-digit', day: 'numeric' }).format(first).replace(/\D/g, ''), '10000');
  assert.equal((await api('GET', '/servers/99999999-9999-4999-8999-999999999999/history')).body.meta.code, 'ERR_NOT_FOUND');
  assert.equal((await api('GET', `/servers/not-a-uuid/history`)).status, 404);
  const period = await api('GET', `/servers/${A}/history?period=year`);
  assert.deepEqual([period.status, period.body.meta.code], [400, 'ERR_BAD_REQUEST']);
  const bucket = await api('GET', `/servers/${A}/history?bucket=minute`);
  assert.deepEqual([bucket.status, bucket.body.meta.code], [400, 'ERR_BAD_REQUEST']);
});

test('unthrottle: known server answers, unknown is 404 ERR_NOT_FOUND', async () => {
  const r = await api('POST', `/servers/${A}/unthrottle`);
  assert.equal(r.status, 200);
  assert.deepEqual(r.body.data, { unthrottled: false });
  const unknown = await api('POST', '/servers/99999999-9999-4999-8999-999999999999/unthrottle');
  assert.deepEqual([unknown.status, unknown.body.meta.code], [404, 'ERR_NOT_FOUND']);
  const viaCli = cli('unthrottle', A);
  assert.equal(viaCli.code, 0, viaCli.stderr);
  assert.match(viaCli.stdout, /nothing to unthrottle/);
});

test('a config_version difference in a heartbeat makes the agent pull the limits', async () => {
  panel.limits = { config_version: 9, timezone: 'UTC', servers: [{ uuid: A, enabled: true, rx_speed_mbps: 20, tx_speed_mbps: 20, rx_quota_day_gb: 0, rx_quota_week_gb: 0, rx_quota_month_gb: 0, tx_quota_day_gb: 0, tx_quota_week_gb: 0, tx_quota_month_gb: 0, exceed_action: 'none', throttle_rx_mbps: 5, throttle_tx_mbps: 5 }] };
  await panel.waitFor((p) => p.calls.some((c) => c.path === '/limits'));
  await panel.waitFor(() => JSON.parse(cli('status', '--json').stdout).config_version === 9);
  const stats = JSON.parse(cli('stats', '--json').stdout) as { uuid: string; throttled: boolean }[];
  // B left the limits set: still known (its counters are kept until cleanup), nothing enforced.
  assert.deepEqual(stats.map((s) => [s.uuid, s.throttled]), [[A, false], [B, false]]);
  assert.match(cli('stats').stdout, /UUID\s+ONLINE/);
});

test('a rejected token is logged with what to do', async () => {
  panel.failWith = 401;
  await agent.waitFor(/token rejected: put the new token in [^ ]+token and restart/);
  panel.failWith = null;
  await panel.waitFor(() => readFileSync(join(dir, 'agent.log'), 'utf8').includes('token rejected'), 5000);
});

test('SIGTERM stops the agent cleanly', async () => {
  assert.equal(await agent.stop('SIGTERM'), 0);
  assert.match(agent.output(), /shutting down/);
  // The log file ends with the stopped line: the shutdown finished, nothing killed it halfway.
  assert.match(readFileSync(join(dir, 'agent.log'), 'utf8').trim().split('\n').at(-1) ?? '', /"msg":"stopped"/);
  const down = cli('status');
  assert.equal(down.code, 1);
  assert.match(down.stderr, /not running/);
});

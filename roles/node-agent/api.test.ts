/**
 * The node API server on its own, around a stub agent: what node's HTTP layer would answer by
 * itself (parser errors, wrong methods) and the top-level check of PUT /limits.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import type { Agent } from './agent.ts';
import { createNodeApi, type NodeApi } from './api.ts';
import { normalizeLimits } from './limits.ts';

const TOKEN = 'ef'.repeat(32);
const UUID = '11111111-2222-4333-8444-555555555555';
const applied: unknown[] = [];
const smartAsks: [number, number][] = [];

const agent = {
  health: () => ({ status: 'ok', version: '1.0.0', containers: 0, uptime_seconds: 1 }),
  stats: () => [],
  knows: (uuid: string) => uuid === UUID,
  history: () => [],
  unthrottle: () => Promise.resolve(true),
  status: () => ({}),
  smartEvents: (after: number, limit: number) => {
    smartAsks.push([after, limit]);
    return { stream: 's-1', events: [], last_id: 0 };
  },
  applyLimits(payload: unknown) {
    // What the agent does first: the whole request fails on a top-level problem.
    const n = normalizeLimits(payload);
    if (typeof n === 'string') return Promise.reject(Object.assign(new Error(n), { code: 'ERR_BAD_REQUEST', status: 400 }));
    applied.push(payload);
    return Promise.resolve({ applied: n.servers.length, failed: n.failed.length });
  },
} as unknown as Agent;

let api: NodeApi;
let port = 0;
let base = '';

before(async () => {
  api = createNodeApi(agent, { token: () => TOKEN });
  await api.listen({ host: '127.0.0.1', port: 0 });
  const at = api.address();
  port = typeof at === 'object' && at !== null ? at.port : 0;
  base = `http://127.0.0.1:${port}`;
});

after(async () => {
  await api.close();
});

type Envelope = { success: boolean; data: Record<string, unknown> | null; error: string | null; meta: { version: string; code: string } };

async function call(method: string, path: string, opts: { token?: string | null; body?: string } = {}): Promise<{ status: number; allow: string | null; body: Envelope }> {
  const headers: Record<string, string> = {};
  const token = opts.token === undefined ? TOKEN : opts.token;
  if (token !== null) headers['authorization'] = `Bearer ${token}`;
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${base}/api/v1${path}`, { method, headers, ...(opts.body !== undefined ? { body: opts.body } : {}) });
  return { status: res.status, allow: res.headers.get('allow'), body: (await res.json()) as Envelope };
}

/** Sends raw bytes and returns everything the server writes before it closes the connection. */
function raw(text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let out = '';
    socket.on('data', (d: Buffer) => (out += d.toString('latin1')));
    socket.on('error', reject);
    socket.on('close', () => resolve(out));
    socket.write(text);
  });
}

/** Splits a raw HTTP response into its status, lower-cased headers and JSON body. */
function parse(response: string): { status: number; headers: Record<string, string>; body: Envelope } {
  const [head = '', body = ''] = response.split('\r\n\r\n');
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
  return { status: Number(statusLine.split(' ')[1]), headers, body: JSON.parse(body) as Envelope };
}

test('a known path with another method is 405 with Allow, after the token check', async () => {
  for (const [method, path, allow] of [
    ['POST', '/health', 'GET, HEAD'],
    ['DELETE', '/stats', 'GET, HEAD'],
    ['GET', '/limits', 'PUT'],
    ['GET', `/servers/${UUID}/unthrottle`, 'POST'],
  ] as const) {
    const r = await call(method, path);
    assert.equal(r.status, 405, `${method} ${path}`);
    assert.equal(r.allow, allow, `${method} ${path}`);
    assert.deepEqual(r.body, { success: false, data: null, error: r.body.error, meta: { version: '1.0.0', code: 'ERR_BAD_REQUEST' } });
    assert.match(r.body.error ?? '', new RegExp(`allowed: ${allow}`));
  }
  // Authenticated paths answer 401 first; the public health path says 405 to anyone.
  for (const [method, path] of [['DELETE', '/stats'], ['GET', '/limits'], ['GET', `/servers/${UUID}/unthrottle`]] as const) {
    const r = await call(method, path, { token: null });
    assert.deepEqual([r.status, r.body.meta.code, r.allow], [401, 'ERR_UNAUTHORIZED', null], `${method} ${path}`);
  }
  assert.equal((await call('POST', '/health', { token: null })).status, 405);
  // Unknown paths stay 404.
  assert.deepEqual([(await call('GET', '/nothing')).status, (await call('DELETE', '/nothing', { token: null })).body.meta.code], [404, 'ERR_NOT_FOUND']);
});

test('errors of the HTTP parser carry the envelope and close the connection', async () => {
  const big = parse(await raw(`GET /api/v1/health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`));
  assert.equal(big.status, 431);
  assert.equal(big.headers['connection'], 'close');
  assert.match(big.headers['content-type'] ?? '', /^application\/json/);
  assert.deepEqual(big.body, { success: false, data: null, error: 'request header fields too large', meta: { version: '1.0.0', code: 'ERR_BAD_REQUEST' } });
  for (const bad of [
    'GARBAGE\r\n\r\n',
    'GET /api/v1/health HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n',
    'PUT /api/v1/limits HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
  ]) {
    const r = parse(await raw(bad));
    assert.equal(r.status, 400, JSON.stringify(bad));
    assert.equal(r.headers['connection'], 'close');
    assert.equal(Number(r.headers['content-length']), Buffer.byteLength(JSON.stringify(r.body)));
    assert.deepEqual([r.body.success, r.body.data, r.body.meta.code], [false, null, 'ERR_BAD_REQUEST']);
  }
  // A client that is gone before the answer does not disturb the server.
  const gone = connect(port, '127.0.0.1');
  await new Promise<void>((resolve) => gone.on('connect', resolve));
  gone.end(`GET /api/v1/health HTTP/1.1\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
  gone.destroy();
  assert.equal((await call('GET', '/health')).status, 200);
});

test('PUT /limits without servers or config_version is 400 and applies nothing', async () => {
  applied.length = 0;
  for (const body of [{ config_version: 44 }, { servers: [] }, { config_version: 44, servers: null }, { config_version: 44, servers: {} }, { config_version: '44', servers: [] }, { config_version: 1, timezone: 5, servers: [] }]) {
    const r = await call('PUT', '/limits', { body: JSON.stringify(body) });
    assert.deepEqual([r.status, r.body.success, r.body.data, r.body.meta.code], [400, false, null, 'ERR_BAD_REQUEST'], JSON.stringify(body));
    assert.match(r.body.error ?? '', /^invalid limits payload: /);
  }
  assert.match((await call('PUT', '/limits', { body: '{"config_version":44}' })).body.error ?? '', /servers: must have required property 'servers'/);
  assert.deepEqual(applied, []);
  // Entries are still checked one by one: bad ones count as failed, the request succeeds.
  const r = await call('PUT', '/limits', { body: JSON.stringify({ config_version: 45, servers: [{ uuid: UUID, rx_speed_mbps: 10 }, {}, { uuid: 'nope' }, 7, { uuid: UUID, enabled: 'yes' }] }) });
  assert.equal(r.status, 200);
  assert.deepEqual(r.body.data, { applied: 1, failed: 4 });
});

test('GET /smart/events: the token, after and limit with their defaults and bounds', async () => {
  assert.equal((await call('GET', '/smart/events', { token: null })).status, 401);
  const ok = await call('GET', '/smart/events');
  assert.equal(ok.status, 200);
  assert.deepEqual(ok.body.data, { stream: 's-1', events: [], last_id: 0 });
  assert.equal((await call('GET', '/smart/events?after=41&limit=500')).status, 200);
  assert.deepEqual(smartAsks, [[0, 200], [41, 500]]);
  for (const q of ['after=-1', 'after=x', 'limit=0', 'limit=501', 'after=1e3', 'after=99999999999999999']) {
    const bad = await call('GET', `/smart/events?${q}`);
    assert.equal(bad.status, 400, q);
    assert.equal(bad.body.meta.code, 'ERR_BAD_REQUEST');
    assert.match(bad.body.error ?? '', /must be a whole number/);
  }
  assert.equal((await call('POST', '/smart/events')).status, 405);
});

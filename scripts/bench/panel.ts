/**
 * `node scripts/bench/panel.ts` (or `node scripts/bench.ts panel`): the panel's bandwidth addon
 * against the real `panel serve` process, run from an esbuild bundle of src/main.ts (the code the
 * executable embeds). Measures over HTTP, with undici keep-alive clients in this process:
 *
 * - heartbeats/s and 50-event batches/s on the node-facing API, 16 requests in flight, 10 nodes.
 *   The API's throttle (THROTTLE_PER_MINUTE per source address) is a per-node guard, far above
 *   what one agent sends (one heartbeat per 15-3600 s); to measure what the panel can process the
 *   load is spread over 250 source addresses (127.0.x.y, all on loopback), and one address is
 *   checked separately to show where the throttle cuts in.
 * - the admin timeseries (and top consumers) over 90 days of hourly rollups of 10,000 servers:
 *   21.6 million bandwidth_hourly rows and 900,000 bandwidth_daily rows written straight into
 *   panel.sqlite while the panel is stopped, then 20 sequential requests per case with an admin
 *   session cookie (signed in over HTTP, 2FA enrolled with a TOTP code computed here).
 *
 * The result replaces the "## Panel" section of docs/benchmarks.md.
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { Agent, request } from 'undici';
import { THROTTLE_PER_MINUTE } from '../../roles/panel/addons/bandwidth/node-api.ts';
import { freePort } from '../../test/integration/hostkit-process.ts';
import { adminSession, type AdminSession } from '../../test/integration/panel/admin-session.ts';
import { machine, writeSection } from './report.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const NODES = 10;
// HK_BENCH_SERVERS: fewer servers for a quick trial of the script itself.
const SERVERS = Number(process.env.HK_BENCH_SERVERS ?? 10_000);
const DAYS = 90;
const CONCURRENCY = 16;
const ADDRESSES = 250;
const EVENTS_PER_BATCH = 50;
const WARMUP_MS = 1_000;
const RUN_MS = 5_000;
const SAMPLES = 20;
const ADMIN = { username: 'admin', email: 'admin@example.test', password: 'correct-horse-battery' };

const pct = (sorted: readonly number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
const ms = (v: number): string => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));

interface Panel {
  base: string;
  config: string;
  dataDir: string;
  bundle: string;
  cli(...args: string[]): string;
  start(): Promise<void>;
  stop(): Promise<void>;
}

function panelAt(dir: string, port: number, bundle: string): Panel {
  const base = `http://127.0.0.1:${port}`;
  const config = join(dir, 'panel.yaml');
  const dataDir = join(dir, 'data');
  writeFileSync(config, `listen: "127.0.0.1:${port}"\nbase_url: "${base}"\ndata_dir: "${dataDir}"\nvolumes_dir: "${join(dir, 'volumes')}"\nlogging:\n  console: false\n  level: warn\n`);
  let child: ChildProcess | undefined;
  return {
    base,
    config,
    dataDir,
    bundle,
    cli: (...args) => execFileSync(process.execPath, [bundle, 'panel', ...args, '--config', config], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }),
    async start() {
      child = spawn(process.execPath, [bundle, 'panel', 'serve', '--config', config], { stdio: ['ignore', 'ignore', 'inherit'] });
      const deadline = Date.now() + 30_000;
      for (;;) {
        try {
          if ((await fetch(`${base}/auth/login`)).status === 200) return;
        } catch {
          // not listening yet
        }
        if (child.exitCode !== null || Date.now() > deadline) throw new Error('the panel did not start');
        await new Promise((r) => setTimeout(r, 200));
      }
    },
    async stop() {
      const c = child;
      if (c === undefined || c.exitCode !== null) return;
      await new Promise((r) => {
        c.once('exit', r);
        c.kill('SIGTERM');
      });
    },
  };
}

/** Location, nest, egg and NODES nodes with one server each through the application API; the nodes' pairing tokens and servers. */
async function fleet(panel: Panel): Promise<{ ownerId: number; nestId: number; eggId: number; nodes: { id: number; token: string; uuid: string }[] }> {
  const key = (JSON.parse(panel.cli('key', 'create', '--user', ADMIN.username, '--type', 'application', '--json')) as { meta: { secret_token: string } }).meta.secret_token;
  type Item = { attributes: Record<string, unknown>; meta?: { pairing_token?: string } };
  const api = async <T>(method: string, path: string, body?: unknown): Promise<T> => {
    const res = await fetch(`${panel.base}${path}`, { method, headers: { authorization: `Bearer ${key}`, accept: 'application/json', 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return JSON.parse(text) as T;
  };
  const loc = await api<Item>('POST', '/api/application/locations', { short: 'bench', long: 'Bench' });
  const nest = await api<Item>('POST', '/api/application/nests', { name: 'Bench' });
  const nestId = nest.attributes.id as number;
  const egg = await api<Item>('POST', `/api/application/nests/${nestId}/eggs`, { name: 'Bench', docker_image: 'example/bench:1', startup: 'run' });
  const ownerId = (await api<{ data: Item[] }>('GET', `/api/application/users?filter[search]=${ADMIN.username}`)).data[0]?.attributes.id as number;
  const nodes = [];
  for (let i = 0; i < NODES; i++) {
    const n = await api<Item>('POST', '/api/application/nodes', { name: `node-${i}`, fqdn: `node${i}.bench.test`, location_id: loc.attributes.id });
    const id = n.attributes.id as number;
    const alloc = await api<{ data: Item[] }>('POST', `/api/application/nodes/${id}/allocations`, { ip: '127.0.0.1', ports: [30_000 + i] });
    const s = await api<Item>('POST', '/api/application/servers', { name: `srv-${i}`, user: ownerId, egg: egg.attributes.id, allocation: { default: alloc.data[0]?.attributes.id } });
    nodes.push({ id, token: n.meta?.pairing_token ?? '', uuid: s.attributes.uuid as string });
  }
  return { ownerId, nestId, eggId: egg.attributes.id as number, nodes };
}

interface LoadResult {
  perSecond: number;
  p50: number;
  p99: number;
  statuses: Record<string, number>;
}

/** CONCURRENCY loops sending `body(i)` to `path` for RUN_MS after a warm-up, source addresses and tokens in rotation. */
async function load(base: string, path: string, tokens: readonly string[], body: (i: number) => string, addressBase: string): Promise<LoadResult> {
  const agents = Array.from({ length: ADDRESSES }, (_, i) => new Agent({ localAddress: `${addressBase}.${i + 1}`, connections: 4, pipelining: 1 }));
  let n = 0;
  const run = async (until: number, latencies: number[] | undefined, statuses: Record<string, number>): Promise<number> => {
    let done = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (Date.now() < until) {
          const i = n++;
          const t0 = performance.now();
          const res = await request(`${base}${path}`, {
            method: 'POST',
            dispatcher: agents[i % ADDRESSES],
            headers: { authorization: `Bearer ${tokens[i % tokens.length] ?? ''}`, 'content-type': 'application/json' },
            body: body(i),
          });
          await res.body.dump();
          latencies?.push(performance.now() - t0);
          statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
          done++;
        }
      }),
    );
    return done;
  };
  try {
    await run(Date.now() + WARMUP_MS, undefined, {});
    const latencies: number[] = [];
    const statuses: Record<string, number> = {};
    const t0 = performance.now();
    const done = await run(Date.now() + RUN_MS, latencies, statuses);
    const elapsed = (performance.now() - t0) / 1000;
    latencies.sort((a, b) => a - b);
    return { perSecond: done / elapsed, p50: pct(latencies, 50), p99: pct(latencies, 99), statuses };
  } finally {
    await Promise.all(agents.map((a) => a.close()));
  }
}

/** THROTTLE_PER_MINUTE + 100 heartbeats from one address: how many pass before the 429s. */
async function oneAddress(base: string, token: string): Promise<Record<string, number>> {
  const agent = new Agent({ localAddress: '127.0.3.1' });
  const statuses: Record<string, number> = {};
  try {
    for (let i = 0; i < THROTTLE_PER_MINUTE + 100; i++) {
      const res = await request(`${base}/api/bandwidth/node/heartbeat`, { method: 'POST', dispatcher: agent, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: '{"version":"1.0.0"}' });
      await res.body.dump();
      statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
    }
  } finally {
    await agent.close();
  }
  return statuses;
}

/** 10,000 servers spread over the nodes, 90 days of hourly rows for each and the daily sums, in one transaction; returns seconds taken. */
function seed(dataDir: string, f: Awaited<ReturnType<typeof fleet>>): number {
  const t0 = performance.now();
  const db = new DatabaseSync(join(dataDir, 'panel.sqlite'));
  try {
    // The panel is stopped and a failed seed is thrown away: no journal, no fsync.
    db.exec('PRAGMA journal_mode = DELETE; PRAGMA synchronous = OFF; PRAGMA cache_size = -524288; PRAGMA temp_store = MEMORY');
    db.exec('BEGIN');
    const nodeIds = f.nodes.map((n) => n.id);
    const nodeCase = `CASE s.i % ${NODES} ${nodeIds.map((id, i) => `WHEN ${i} THEN ${id}`).join(' ')} END`;
    const existing = (db.prepare('SELECT COUNT(*) AS n FROM servers').get() as { n: number }).n;
    db.exec(`WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i + 1 < ${SERVERS - existing})
      INSERT INTO servers (uuid, identifier, name, owner_id, node_id, nest_id, egg_id, memory, disk, created_at, updated_at)
      SELECT lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-a' || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6))),
        printf('b%07d', s.i), 'bench-' || s.i, ${f.ownerId}, ${nodeCase}, ${f.nestId}, ${f.eggId}, 1024, 10240, datetime('now'), datetime('now') FROM s`);
    const nowHour = Math.floor(Date.now() / 3_600_000) * 3600;
    const first = nowHour - (DAYS * 24 - 1) * 3600;
    // The secondary index is built once after the rows: maintaining it row by row in (server, hour) order is the slow part of a bulk insert.
    db.exec('DROP INDEX bandwidth_hourly_server');
    db.exec(`WITH RECURSIVE h(t) AS (SELECT ${first} UNION ALL SELECT t + 3600 FROM h WHERE t < ${nowHour})
      INSERT INTO bandwidth_hourly (hour, server_id, node_id, rx_bytes, tx_bytes)
      SELECT h.t, s.id, s.node_id, abs(random() % 2000000000), abs(random() % 500000000) FROM h CROSS JOIN (SELECT id, node_id FROM servers ORDER BY id) s ORDER BY h.t, s.id`);
    db.exec('CREATE INDEX bandwidth_hourly_server ON bandwidth_hourly(server_id, hour)');
    db.exec('DROP INDEX bandwidth_daily_server');
    db.exec(`INSERT INTO bandwidth_daily (day, server_id, node_id, rx_bytes, tx_bytes)
      SELECT date(hour, 'unixepoch'), server_id, node_id, SUM(rx_bytes), SUM(tx_bytes) FROM bandwidth_hourly GROUP BY 1, 2 ORDER BY 1, 2`);
    db.exec('CREATE INDEX bandwidth_daily_server ON bandwidth_daily(server_id, day)');
    db.exec('COMMIT');
    db.exec('PRAGMA journal_mode = WAL');
  } finally {
    db.close();
  }
  return (performance.now() - t0) / 1000;
}

/** SAMPLES sequential GETs after one warm-up; p50/p99 in ms. */
async function timed(session: AdminSession, path: string): Promise<{ p50: number; p99: number; points: number }> {
  const get = async (): Promise<{ points?: unknown[]; servers?: unknown[] }> => {
    const res = await session.get(path);
    if (res.status !== 200) throw new Error(`${path}: ${res.status} ${res.text.slice(0, 500)}`);
    return res.text.startsWith('{') ? (JSON.parse(res.text) as { points?: unknown[]; servers?: unknown[] }) : {};
  };
  const first = await get();
  const times: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const t0 = performance.now();
    await get();
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return { p50: pct(times, 50), p99: pct(times, 99), points: (first.points ?? first.servers ?? []).length };
}

/** Runs the panel benchmark and writes its section; called by scripts/bench.ts or on its own. */
export async function panelBench(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'hk-panel-bench-'));
  const bundle = join(ROOT, '.cache', 'bench', 'hostkit.cjs');
  await build({ entryPoints: [join(ROOT, 'src', 'main.ts')], outfile: bundle, bundle: true, platform: 'node', format: 'cjs', target: 'node24', logLevel: 'error' });
  const panel = panelAt(dir, await freePort(), bundle);
  // The nodes' API for the panel's stats polls and limits pushes: empty, quick answers.
  const agentApi = createHttpServer((req, res) => {
    const data = req.url === '/api/v1/stats' ? { servers: [] } : { applied: 0, failed: 0 };
    req.resume().on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ success: true, data, error: null, meta: { version: '1.0.0', code: '' } })));
  });
  await new Promise<void>((r) => agentApi.listen(0, '127.0.0.1', r));
  const agentUrl = `http://127.0.0.1:${(agentApi.address() as { port: number }).port}`;
  try {
    panel.cli('user', 'create', '--username', ADMIN.username, '--email', ADMIN.email, '--password', ADMIN.password, '--admin');
    await panel.start();
    const f = await fleet(panel);
    const tokens = f.nodes.map((n) => n.token);
    for (const n of f.nodes) {
      const res = await fetch(`${panel.base}/api/bandwidth/node/register`, { method: 'POST', headers: { authorization: `Bearer ${n.token}`, 'content-type': 'application/json' }, body: JSON.stringify({ version: '1.0.0', hostname: `node-${n.id}`, port: 8480, api_url: agentUrl }) });
      if (res.status !== 200) throw new Error(`register: ${res.status} ${await res.text()}`);
    }

    await panel.stop();
    process.stdout.write(`bench: seeding ${SERVERS} servers x ${DAYS * 24} hours into panel.sqlite...\n`);
    const seedSeconds = seed(panel.dataDir, f);
    process.stdout.write(`seeded in ${seedSeconds.toFixed(0)} s\n`);
    await panel.start();
    process.stdout.write('bench: panel heartbeats...\n');
    const heartbeat = JSON.stringify({ version: '1.0.0', containers: 40, rx_rate_bps: 12_500_000, tx_rate_bps: 4_000_000, throttled: 1, quota_exceeded: 0 });
    const hb = await load(panel.base, '/api/bandwidth/node/heartbeat', tokens, () => heartbeat, '127.0.1');
    process.stdout.write(`${JSON.stringify(hb)}\n`);
    process.stdout.write('bench: panel event batches...\n');
    const occurred = new Date().toISOString();
    const batches = f.nodes.map((n) =>
      JSON.stringify({
        events: Array.from({ length: EVENTS_PER_BATCH }, (_, i) => ({ server_uuid: n.uuid, type: i % 2 === 0 ? 'quota_exceeded' : 'throttled', period: 'day', direction: 'rx', message: `RX day quota of 100 GiB exceeded (${i})`, occurred_at: occurred })),
      }),
    );
    // Same rotation as the tokens, so each batch names a server of the token's node and is stored, not skipped.
    const ev = await load(panel.base, '/api/bandwidth/node/events', tokens, (i) => batches[i % tokens.length] ?? '', '127.0.2');
    process.stdout.write(`${JSON.stringify(ev)}\n`);
    const single = await oneAddress(panel.base, tokens[0] ?? '');
    process.stdout.write(`one address: ${JSON.stringify(single)}\n`);

    const session = await adminSession(panel.base, ADMIN.username, ADMIN.password);
    const someServer = Math.floor(SERVERS / 2);
    const cases: [string, string][] = [
      ['timeseries, 24 h (hourly buckets)', '/admin/bandwidth/api/timeseries?hours=24'],
      ['timeseries, 168 h (hourly buckets)', '/admin/bandwidth/api/timeseries?hours=168'],
      ['timeseries, 2160 h (daily buckets)', '/admin/bandwidth/api/timeseries?hours=2160'],
      [`timeseries, 168 h, node_id= (${(SERVERS / NODES).toLocaleString('en')} servers)`, `/admin/bandwidth/api/timeseries?hours=168&node_id=${f.nodes[0]?.id ?? 1}`],
      ['timeseries, 168 h, server_id=', `/admin/bandwidth/api/timeseries?hours=168&server_id=${someServer}`],
      ['timeseries, 2160 h, server_id=', `/admin/bandwidth/api/timeseries?hours=2160&server_id=${someServer}`],
      ['top consumers, 24 h', '/admin/bandwidth/api/top-consumers?hours=24'],
      ['top consumers, 168 h', '/admin/bandwidth/api/top-consumers?hours=168'],
      ['top consumers, 2160 h (daily rows)', '/admin/bandwidth/api/top-consumers?hours=2160'],
      ['dashboard page, 90 days (HTML with the top consumers)', '/admin/bandwidth?hours=2160'],
    ];
    const rows: string[] = [];
    for (const [label, path] of cases) {
      const r = await timed(session, path);
      process.stdout.write(`bench: ${label}: ${JSON.stringify(r)}\n`);
      rows.push(`| ${label} | ${path.includes('/api/') ? r.points : '-'} | ${ms(r.p50)} | ${ms(r.p99)} |`);
    }

    const statuses = (s: Record<string, number>): string =>
      Object.entries(s)
        .map(([k, v]) => `${v} × ${k}`)
        .join(', ');
    const body = [
      '',
      `${new Date().toISOString().slice(0, 10)}, ${machine()}. \`node scripts/bench.ts panel\` (scripts/bench/panel.ts): the real \`panel serve\` (esbuild bundle of src/main.ts, SQLite in WAL) on loopback; the load generator (undici, keep-alive) shares the 2 cores.`,
      '',
      `Node-facing API, ${NODES} nodes of the ${SERVERS.toLocaleString('en')}-server panel below, ${CONCURRENCY} requests in flight, ${RUN_MS / 1000} s after a ${WARMUP_MS / 1000} s warm-up. The API throttles each source address to ${THROTTLE_PER_MINUTE} requests per minute (a node needs one heartbeat per 15-3600 s), so the load comes from ${ADDRESSES} loopback addresses to measure what the panel itself processes:`,
      '',
      '| request | per second | p50 / p99 ms | answers |',
      '|---|---|---|---|',
      `| POST /heartbeat | ${Math.round(hb.perSecond)} | ${ms(hb.p50)} / ${ms(hb.p99)} | ${statuses(hb.statuses)} |`,
      `| POST /events, ${EVENTS_PER_BATCH} events per batch (one transaction each) | ${Math.round(ev.perSecond)} batches (${Math.round(ev.perSecond * EVENTS_PER_BATCH)} events) | ${ms(ev.p50)} / ${ms(ev.p99)} | ${statuses(ev.statuses)} |`,
      '',
      `From a single address: ${THROTTLE_PER_MINUTE + 100} heartbeats back to back gave ${statuses(single)}: the throttle caps one node at ${THROTTLE_PER_MINUTE}/min (${THROTTLE_PER_MINUTE / 60}/s).`,
      '',
      'Event batches went at 287/s (p50 53 ms) on this panel before POST /events looked up only the servers a batch names: it loaded all 1,000 servers of the node for every batch (measured once on 2026-11-23).',
      '',
      `Admin JSON over ${DAYS} days of rollups for ${SERVERS.toLocaleString('en')} servers (${(SERVERS * DAYS * 24).toLocaleString('en')} hourly rows, ${(SERVERS * DAYS).toLocaleString('en')} daily rows, written in ${seedSeconds.toFixed(0)} s), ${SAMPLES} sequential requests each with an admin session:`,
      '',
      '| request | points / rows | p50 ms | p99 (max of 20) ms |',
      '|---|---|---|---|',
      ...rows,
      '',
      'Top consumers used to take 11-25 s at this size (the query alone, measured once on 2026-11-23): grouping by the bare `server_id` made SQLite walk the whole `(server_id, hour)` index and look every row up; it now groups by `+server_id` over the primary-key range of the hours, and ranges beyond a week read the daily rollups (see store.ts).',
      '',
    ].join('\n');
    writeSection('Panel', body);
    process.stdout.write('bench: results written to the "## Panel" section of docs/benchmarks.md\n');
  } finally {
    await panel.stop();
    await new Promise((r) => agentApi.close(r));
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await panelBench();

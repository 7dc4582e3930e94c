/**
 * What a restart of the proxy keeps, and one proxy per data directory: bans made through the API
 * (one site, every site) and by the rate limiter, with the strikes that double a repeat
 * offender's next ban, come back after a SIGTERM and after a kill -9 (up to the last write of
 * bans.json); a lifted ban stays lifted; a damaged bans.json starts without bans. A second proxy on
 * the data directory of a running one is refused; the lock of a killed one is taken over.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runHostkit, type Daemon } from '../hostkit-process.ts';
import { api, DAY, makeRoot, protectedSite, QUIET_RATE, request, startOrigin, startProxy, until, type Origin, type ProxyRoot } from './harness.ts';

let root: ProxyRoot;
let proxy: Daemon;
let origin: Origin;

/** Two requests per IP a day, the first violation bans for `secs`. */
const banning = (secs: number): Record<string, unknown> => ({ rate_limit: { ...QUIET_RATE, per_ip: { requests: 2, window_secs: DAY }, ban_after_violations: 1, ban_duration_secs: secs } });

before(async () => {
  origin = await startOrigin();
  root = await makeRoot({
    // Two workers: the rate limiter's bans are made in a worker, the file is written by the main thread.
    global: { workers: 2 },
    sites: {
      'auto.yaml': protectedSite('auto', origin.url, banning(600)),
      'short.yaml': protectedSite('short', origin.url, banning(1)),
      'other.yaml': protectedSite('other', origin.url),
    },
  });
  proxy = await startProxy(root);
});

after(async () => {
  await proxy?.stop('SIGKILL');
  await origin?.close();
});

const dataDir = (): string => join(root.dir, 'data');
const lockFile = (): string => join(realpathSync(dataDir()), 'osproxy.lock');

async function hit(siteId: string, ip: string): Promise<number> {
  return (await request({ port: root.httpPort, host: `${siteId}.test`, headers: { 'x-forwarded-for': ip } })).status;
}

/**
 * The rule of the latest request of `ip` on the site: by client, since two workers' events of
 * requests a moment apart may arrive swapped.
 */
async function lastRule(siteId: string, ip: string): Promise<string | null> {
  const events = (await api(root, 'GET', `/events/recent?site=${siteId}&limit=50`)).body.data.events as { client_ip: string; rule: string | null }[];
  return events.find((e) => e.client_ip === ip)?.rule ?? null;
}

/** Refused by a ban (403 `ban`), not by anything else. */
async function banned(siteId: string, ip: string): Promise<boolean> {
  return (await hit(siteId, ip)) === 403 && (await lastRule(siteId, ip)) === 'ban';
}

interface BanJson {
  ip: string;
  site: string | null;
  reason: string;
  since: string;
  until: string;
}

async function bans(): Promise<BanJson[]> {
  return ((await api(root, 'GET', '/bans')).body.data.bans as BanJson[]).map(({ ip, site, reason, since, until }) => ({ ip, site, reason, since, until }));
}

/** Floods `siteId` from `ip` until the rate limiter bans it; resolves with the ban. */
async function floodUntilBanned(siteId: string, ip: string): Promise<BanJson> {
  for (let i = 0; i < 4; i++) await hit(siteId, ip);
  const ban = (await bans()).find((b) => b.ip === ip && b.site === siteId);
  assert.ok(ban, `${ip} banned on ${siteId}`);
  assert.equal(ban.reason, 'rate_limit');
  return ban;
}

/** Every file of the data directory with its content (nothing has been served yet that changes them). */
const dataFiles = (): Record<string, string> => Object.fromEntries(readdirSync(dataDir()).map((f) => [f, readFileSync(join(dataDir(), f), 'utf8')]));

const lengthOf = (b: BanJson): number => Date.parse(b.until) - Date.parse(b.since);

test('a second proxy on the data directory of a running one exits 1 naming the lock and its holder; the first keeps serving', async () => {
  // Another root (other listen ports, as when trying a new executable) on the same data directory.
  const other = await makeRoot({ sites: { 's.yaml': protectedSite('s', origin.url) } });
  other.writeGlobal({ data_dir: dataDir() });
  const filesBefore = dataFiles();
  const r = runHostkit(['proxy', '--root', other.dir], { env: { RUST_LOG: '' } });
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, new RegExp(`^error: another osproxy is already running \\(pid ${proxy.child.pid} holds ${lockFile()}\\)$`, 'm'));
  assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
  assert.doesNotMatch(r.stderr, /^\s+at /m);
  await assert.rejects(request({ port: other.httpPort, host: 's.test' }), /ECONNREFUSED/, 'the second proxy never listened');
  assert.deepEqual(dataFiles(), filesBefore, 'nor touched the data directory');
  assert.equal(readFileSync(lockFile(), 'utf8').trim(), String(proxy.child.pid));
  assert.equal(await hit('other', '192.0.2.1'), 200, 'the first proxy keeps serving');
  // check only reads: it runs beside the proxy and leaves its lock alone.
  const check = runHostkit(['proxy', 'check', '--root', root.dir]);
  assert.deepEqual([check.code, check.stdout], [0, 'ok\n'], check.stderr);
  assert.equal(readFileSync(lockFile(), 'utf8').trim(), String(proxy.child.pid));
});

test('bans through the API and the rate limiter survive a restart (SIGTERM); a lifted ban stays lifted; strikes still double', async () => {
  assert.equal((await api(root, 'POST', '/bans', { body: { ip: '198.51.100.1', duration_secs: 3600, site: 'other' } })).status, 201);
  assert.equal((await api(root, 'POST', '/bans', { body: { ip: '198.51.100.2', duration_secs: 3600 } })).status, 201);
  assert.equal((await api(root, 'POST', '/bans', { body: { ip: '198.51.100.3', duration_secs: 3600 } })).status, 201);
  assert.equal((await api(root, 'DELETE', '/bans/198.51.100.3')).body.data.removed, 1);
  const auto = await floodUntilBanned('auto', '192.0.2.10');
  const short = await floodUntilBanned('short', '192.0.2.20');
  assert.equal(lengthOf(short), 1000);
  const kept = (await bans()).filter((b) => b.site !== 'short');
  assert.equal(kept.length, 3);

  assert.equal(await proxy.stop('SIGTERM'), 0);
  proxy = await startProxy(root);
  assert.doesNotMatch(proxy.output(), /took over the lock/, 'a clean stop released the lock');

  assert.deepEqual((await bans()).filter((b) => b.site !== 'short'), kept, 'the same bans, ends unchanged');
  assert.ok(kept.some((b) => b.ip === auto.ip && b.until === auto.until));
  assert.ok(await banned('other', '198.51.100.1'), 'site ban');
  assert.equal(await hit('auto', '198.51.100.1'), 200, 'a site ban stays on its site');
  assert.ok(await banned('auto', '198.51.100.2'), 'every-site ban');
  assert.ok(await banned('other', '198.51.100.2'), 'every-site ban');
  assert.ok(await banned('auto', '192.0.2.10'), 'the rate limiter ban');
  assert.equal(await hit('other', '198.51.100.3'), 200, 'the lifted ban stays lifted');
  assert.equal(await hit('auto', '198.51.100.3'), 200);

  // The 1 s ban has ended; its strike doubles the next one of the same IP on the same site.
  await until('the short ban to end', async () => !(await bans()).some((b) => b.ip === '192.0.2.20'));
  const second = await floodUntilBanned('short', '192.0.2.20');
  assert.equal(lengthOf(second), 2000, 'doubled by the strike from before the restart');
  await until('the ban logged', () => /"site":"short","client_ip":"192\.0\.2\.20","duration_secs":2,"offence":2,.*client banned by the rate limiter/.test(proxy.output()));
  assert.equal(lengthOf(await floodUntilBanned('short', '192.0.2.21')), 1000, 'another IP has no strikes');
});

test('after kill -9 the bans written before it come back, and the new start takes over the lock and says so', async () => {
  const auto = await floodUntilBanned('auto', '192.0.2.30');
  assert.equal((await api(root, 'POST', '/bans', { body: { ip: '198.51.100.4', duration_secs: 600 } })).status, 201);
  assert.equal((await api(root, 'DELETE', '/bans/198.51.100.2')).body.data.removed, 1);
  // The worker's ban reaches bans.json within the flush interval (a second).
  await until('the automatic ban written', () => readFileSync(join(dataDir(), 'bans.json'), 'utf8').includes('"192.0.2.30"'), 5000);
  const killed = proxy.child.pid;
  await proxy.stop('SIGKILL');

  proxy = await startProxy(root);
  assert.match(proxy.output(), new RegExp(`"lock":"${lockFile()}","previous_pid":${killed},.*"msg":"took over the lock of an earlier run that did not stop cleanly"`));
  assert.equal(readFileSync(lockFile(), 'utf8').trim(), String(proxy.child.pid));
  assert.ok((await bans()).some((b) => b.ip === auto.ip && b.site === 'auto' && b.until === auto.until));
  assert.ok(await banned('auto', '192.0.2.30'));
  assert.ok(await banned('other', '198.51.100.4'));
  assert.ok(await banned('other', '198.51.100.1'));
  assert.equal(await hit('other', '198.51.100.2'), 200, 'lifted before the kill, lifted after it');
  assert.equal(await hit('auto', '198.51.100.2'), 200);
});

test('a damaged bans.json: the proxy starts without bans and logs an error naming the file', async () => {
  assert.equal(await proxy.stop('SIGTERM'), 0);
  const file = join(dataDir(), 'bans.json');
  writeFileSync(file, '{"version":1,"bans":[{"ip":');
  proxy = await startProxy(root);
  assert.match(proxy.output(), new RegExp(`"level":"error".*"file":"${file}".*"msg":"cannot read the saved bans: the proxy starts without what could not be read`));
  assert.deepEqual(await bans(), []);
  assert.equal(await hit('auto', '192.0.2.30'), 200);
  assert.equal(await hit('other', '198.51.100.4'), 200);
  // The next change replaces the damaged file.
  assert.equal((await api(root, 'POST', '/bans', { body: { ip: '198.51.100.5', duration_secs: 600 } })).status, 201);
  assert.equal(JSON.parse(readFileSync(file, 'utf8')).bans[0].ip, '198.51.100.5');
});

test('a bans.json with one bad entry: the others hold, the log says only that entry was dropped, the file stays until a ban changes', async () => {
  assert.equal(await proxy.stop('SIGTERM'), 0);
  const file = join(dataDir(), 'bans.json');
  const until = new Date(Date.now() + 3_600_000).toISOString();
  const text = JSON.stringify({
    version: 1,
    bans: [
      { ip: '198.51.100.6', site: 'other', reason: 'admin', since: new Date().toISOString(), until },
      { ip: '198.51.100.7/32', site: 'other', reason: 'admin', since: new Date().toISOString(), until },
    ],
    strikes: [],
  });
  writeFileSync(file, text);
  proxy = await startProxy(root);
  assert.match(proxy.output(), /"problem":"1 of 2 entries are not a ban or a strike: they are dropped","msg":"cannot read the saved bans: the proxy starts without what could not be read/);
  assert.ok(await banned('other', '198.51.100.6'));
  // Past the flush interval, the file is still the one written by hand.
  await new Promise((r) => setTimeout(r, 1500));
  assert.equal(readFileSync(file, 'utf8'), text);
});

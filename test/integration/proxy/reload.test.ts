/**
 * Files and hot reload (spec/3 §2.1, issue 7 item 1): site files added, changed and removed
 * without a restart; a broken site file or config.yaml keeps its last good version serving;
 * empty ids assigned and written back with the comments kept; duplicate ids skipped; listen
 * changes only warned about; RUST_LOG over log_level; and 2,000 requests through a stream of
 * reloads without one failure.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { startHostkit, type Daemon } from '../hostkit-process.ts';
import { api, makeRoot, request, seenOf, servedBy, startOrigin, startProxy, until, type Origin, type ProxyRoot, withBrowserHeaders } from './harness.ts';

let root: ProxyRoot;
let proxy: Daemon;
let a: Origin;
let b: Origin;

const COMMENTED = `# The shop: owned by team web.
# Keep this file small.
hostnames:
  - shop.test # the main name
origin:
  url: URL # local origin
`;

before(async () => {
  [a, b] = [await startOrigin(), await startOrigin()];
  root = await makeRoot({
    // Two workers: every reload reaches both while they serve.
    global: { workers: 2 },
    sites: {
      'shop.yaml': COMMENTED.replace('URL', a.url),
      'blog.yaml': { id: 'blog', hostnames: ['blog.test'], origin: { url: a.url } },
      'load.yaml': { id: 'load', hostnames: ['load.test'], origin: { url: a.url } },
      // Both names make the id "twin": the second file gets twin-2.
      'twin.yaml': { hostnames: ['twin1.test'], origin: { url: a.url } },
      'twin.yml': { hostnames: ['twin2.test'], origin: { url: a.url } },
      'zz-dup.yaml': { id: 'blog', hostnames: ['dup-id.test'], origin: { url: a.url } },
    },
  });
  proxy = await startProxy(root);
});

after(async () => {
  await proxy?.stop('SIGKILL');
  await a?.close();
  await b?.close();
});

const get = (host: string, path = '/') => request({ port: root.httpPort, host, path });

test('an empty id is assigned from the file name and written back with every comment kept', async () => {
  const text = readFileSync(join(root.sitesDir, 'shop.yaml'), 'utf8');
  assert.match(text, /^# The shop: owned by team web\.\n# Keep this file small\.\nid: shop\n/);
  assert.match(text, /- shop\.test # the main name/);
  assert.match(text, /url: http:\/\/127\.0\.0\.1:\d+ # local origin/);
  assert.equal((await api(root, 'GET', '/sites/shop')).body.data.hostnames[0], 'shop.test');
  assert.match(readFileSync(join(root.sitesDir, 'twin.yaml'), 'utf8'), /^id: twin\n/);
  assert.match(readFileSync(join(root.sitesDir, 'twin.yml'), 'utf8'), /^id: twin-2\n/);
  assert.equal((await get('twin2.test')).status, 200);
});

test('a second file with an id already in use is skipped and logged', async () => {
  assert.equal((await get('dup-id.test')).status, 421);
  assert.match(proxy.output(), /zz-dup\.yaml.*"id":"blog".*site id already used by another file: this file is not served/);
});

test('site files are picked up without a restart: changed, added, removed', async () => {
  root.writeSite('blog.yaml', { id: 'blog', hostnames: ['blog.test', 'news.test'], origin: { url: b.url } });
  await until('the changed blog site serves news.test from origin b', async () => servedBy(await get('news.test')) === b.port);
  assert.equal(servedBy(await get('blog.test')), b.port);
  root.writeSite('new.yaml', 'id: fresh\nhostnames: [fresh.test]\norigin: {url: "' + a.url + '"}\n');
  await until('a new file is served', async () => (await get('fresh.test')).status === 200);
  rmSync(join(root.sitesDir, 'new.yaml'));
  await until('a removed file stops serving', async () => (await get('fresh.test')).status === 421);
  assert.match(proxy.output(), /"msg":"configuration applied"/);
});

test('a broken site file keeps its last good version serving, its problems logged and shown', async () => {
  root.writeSite('blog.yaml', 'id: blog\nhostnames: [blog.test, broken.test]\norigin:\n  url: http://127.0.0.1:1/with/path\nprotection: {rate_limit: {per_ip: {window_secs: 0}}}\n');
  await until('the problems are logged', () => /blog\.yaml.*\/origin\/url.*last good version keeps serving/.test(proxy.output()));
  assert.match(proxy.output(), /\/protection\/rate_limit\/per_ip\/window_secs/);
  assert.equal(servedBy(await get('news.test')), b.port, 'the last good blog site still serves');
  assert.equal((await get('broken.test')).status, 421, 'nothing of the broken version is served');
  const sites = await api(root, 'GET', '/sites');
  const blog = sites.body.data.sites.find((s: { id: string }) => s.id === 'blog');
  assert.ok(blog.file_problems.some((p: { path: string }) => p.path === '/origin/url'));
  root.writeSite('blog.yaml', 'id: blog\nhostnames: [blog.test, : : :\n');
  await until('a YAML syntax error is logged', () => /blog\.yaml.*YAML error/.test(proxy.output()));
  assert.equal(servedBy(await get('news.test')), b.port);
  root.writeSite('blog.yaml', { id: 'blog', hostnames: ['blog.test'], origin: { url: a.url } });
  await until('the fixed file serves again', async () => servedBy(await get('blog.test')) === a.port && (await get('news.test')).status === 421);
  assert.match(proxy.output(), /site file loads again/);
});

test('a broken config.yaml keeps the last good one (tokens included); listen changes only warn', async () => {
  const file = join(root.dir, 'config.yaml');
  const good = readFileSync(file, 'utf8');
  writeFileSync(file, good.replace(/log_level: debug/, 'log_level: loud'));
  await until('the problem is logged', () => /config\.yaml.*\/log_level.*last good version keeps serving/.test(proxy.output()));
  assert.equal((await api(root, 'GET', '/sites')).status, 200, 'tokens of the last good config still work');
  assert.equal((await get('blog.test')).status, 200);
  writeFileSync(file, good.replace(/listen_http:\n\s+- 127\.0\.0\.1:\d+/, 'listen_http:\n  - 127.0.0.1:1'));
  await until('the restart-only change is warned about', () => /"keys":\["listen_http"\].*restart the proxy to apply them/.test(proxy.output()));
  assert.equal((await get('blog.test')).status, 200, 'the old listener keeps serving');
  writeFileSync(file, good);
});

// 2,000 requests from one IP are far above the default per-IP limit (300 per minute).
const NO_RATE_LIMIT = { rate_limit: { enabled: false } };

test('2,000 requests during a stream of reloads (changed, rewritten in place, broken, fixed): none fails', async () => {
  const agent = new Agent({ keepAlive: true, maxSockets: 8 });
  const statuses = new Map<number, number>();
  const errors: string[] = [];
  let done = false;
  const hosts = ['load.test', 'blog.test'];
  const one = (i: number): Promise<void> =>
    new Promise((resolve) => {
      const req = httpRequest({ host: '127.0.0.1', port: root.httpPort, path: `/load/${i}`, headers: withBrowserHeaders({ host: hosts[i % 2] as string }), agent }, (res) => {
        res.resume();
        res.on('end', () => {
          statuses.set(res.statusCode ?? 0, (statuses.get(res.statusCode ?? 0) ?? 0) + 1);
          resolve();
        });
      });
      req.on('error', (err) => {
        errors.push(err.message);
        resolve();
      });
      req.end();
    });
  const reloadsBefore = (proxy.output().match(/configuration applied/g) ?? []).length;
  // The writer: plain writeFileSync (truncate, then write), so the watcher also sees empty and
  // half-written files; every version keeps load.test and blog.test on a live origin.
  const writer = (async () => {
    for (let n = 0; !done; n++) {
      const origin = n % 2 === 0 ? b : a;
      if (n % 5 === 4) writeFileSync(join(root.sitesDir, 'load.yaml'), 'id: load\nhostnames: [load.test\n');
      else writeFileSync(join(root.sitesDir, 'load.yaml'), stringify({ id: 'load', hostnames: ['load.test', `v${n}.test`], origin: { url: origin.url, host_header: `v${n}` }, protection: NO_RATE_LIMIT }));
      writeFileSync(join(root.sitesDir, 'blog.yaml'), stringify({ id: 'blog', hostnames: ['blog.test'], origin: { url: origin.url }, protection: NO_RATE_LIMIT }));
      await new Promise((r) => setTimeout(r, 120));
    }
    writeFileSync(join(root.sitesDir, 'load.yaml'), stringify({ id: 'load', hostnames: ['load.test'], origin: { url: a.url }, protection: NO_RATE_LIMIT }));
  })();
  const started = Date.now();
  let next = 0;
  const workers = Array.from({ length: 8 }, async () => {
    while (next < 2000) {
      const i = next++;
      await one(i);
      // Spread the load over a few seconds so many reloads land in it.
      await new Promise((r) => setTimeout(r, 8));
    }
  });
  await Promise.all(workers);
  done = true;
  await writer;
  agent.destroy();
  const reloads = (proxy.output().match(/configuration applied/g) ?? []).length - reloadsBefore;
  assert.deepEqual(errors, []);
  assert.deepEqual([...statuses], [[200, 2000]], `statuses after ${Date.now() - started} ms and ${reloads} reloads`);
  assert.ok(reloads >= 5, `at least 5 reloads happened during the load (${reloads})`);
});

test('SIGHUP reloads like nginx, and the proxy keeps serving', async () => {
  proxy.child.kill('SIGHUP');
  await proxy.waitFor(/"reason":"SIGHUP".*"msg":"configuration applied"/);
  assert.equal((await get('blog.test')).status, 200);
});

test('SIGUSR1 (logrotate habit) is logged and ignored, and opens no debugger', async () => {
  proxy.child.kill('SIGUSR1');
  await proxy.waitFor(/"msg":"SIGUSR1 ignored/);
  assert.doesNotMatch(proxy.output(), /Debugger listening|inspector/i);
  assert.equal((await get('blog.test')).status, 200);
});

test('RUST_LOG overrides log_level', async () => {
  const quiet = await makeRoot({ global: { log_level: 'error' }, sites: { 's.yaml': { id: 's', hostnames: ['s.test'], origin: { url: a.url } } } });
  const loud = await startProxy(quiet, { env: { RUST_LOG: 'hyper=warn,osproxy=debug' } });
  try {
    await loud.waitFor(/"level":"debug".*"msg":"routing table"/);
  } finally {
    await loud.stop();
  }
  const silent = await makeRoot({ global: { log_level: 'debug' }, sites: { 's.yaml': { id: 's', hostnames: ['s.test'], origin: { url: a.url } } } });
  const p = startHostkit(['proxy', 'serve', '--root', silent.dir], { env: { RUST_LOG: 'error' } });
  try {
    await until('the admin API answers', async () => (await api(silent, 'GET', '/health', { token: null }).catch(() => ({ status: 0 }))).status === 200);
    assert.doesNotMatch(p.output(), /"level":"(info|debug)"/);
  } finally {
    await p.stop();
  }
  assert.equal(seenOf(await get('load.test')).method, 'GET');
});

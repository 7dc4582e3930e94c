/**
 * Configuration checks end to end: a copied site file never takes the running site's id (the
 * copy is a broken file, shown by the API and `check`), `check` reports what `serve` finds across
 * files, internationalised hostnames route by their punycode form, damaged state files are logged
 * at start, and the top help names `--root`.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runHostkit, type Daemon } from '../hostkit-process.ts';
import { api, makeRoot, request, startOrigin, startProxy, until, withBrowserHeaders, type Origin, type ProxyRoot } from './harness.ts';

let root: ProxyRoot;
let proxy: Daemon;
let origin: Origin;

const RATE = { rate_limit: { enabled: false } };

before(async () => {
  origin = await startOrigin();
  root = await makeRoot({
    sites: {
      'shop.yaml': { hostnames: ['shop.test'], origin: { url: origin.url }, protection: RATE },
      'idn.yaml': { id: 'idn', hostnames: ['bücher.test', '*.bücher.test'], origin: { url: origin.url }, protection: RATE },
    },
  });
  // State files damaged before the start: both are logged at warn, neither stops the proxy.
  const data = join(root.dir, 'data');
  mkdirSync(data, { recursive: true });
  writeFileSync(join(data, 'challenge.key'), `${'AB'.repeat(32)}\n`);
  writeFileSync(join(data, 'quota.json'), JSON.stringify({ version: 1, sites: { shop: { window: '2026-11-01', bytes: -5, notified: false } } }));
  proxy = await startProxy(root);
});

after(async () => {
  await proxy?.stop('SIGKILL');
  await origin?.close();
});

const get = (host: string) => request({ port: root.httpPort, host, headers: withBrowserHeaders() });

test('a damaged challenge key and a negative quota counter are logged at warn when the proxy starts', () => {
  assert.match(proxy.output(), /"level":"warn"[^\n]*"how":"replaced"[^\n]*challenge\.key[^\n]*new challenge secret/);
  assert.match(proxy.output(), /"level":"warn"[^\n]*quota\.json[^\n]*"site":"shop"[^\n]*quota counter of a site is damaged/);
});

test('a copy of a running site file is a broken file: the original keeps its id, file and counters', async () => {
  const shopFile = join(root.sitesDir, 'shop.yaml');
  const original = readFileSync(shopFile, 'utf8');
  assert.match(original, /^id: shop\n/);
  assert.equal((await get('shop.test')).status, 200);
  const bytes = (await api(root, 'GET', '/sites/shop/usage')).body.data.bytes as number;
  assert.ok(bytes > 0);

  const copy = original.replace('shop.test', 'shop2.test');
  writeFileSync(join(root.sitesDir, 'shop2.yaml'), copy);
  const copyFile = join(root.sitesDir, 'shop2.yaml');
  await until('the copy is listed as broken', async () => {
    const sites = await api(root, 'GET', '/sites');
    return sites.body.data.broken.some((b: { file: string }) => b.file === copyFile);
  });
  const sites = await api(root, 'GET', '/sites');
  const broken = sites.body.data.broken.find((b: { file: string }) => b.file === copyFile);
  assert.equal(broken.problems[0].path, '/id');
  assert.match(broken.problems[0].message, /site id "shop" is already used by .*shop\.yaml.*delete its id: line/);
  assert.equal(readFileSync(shopFile, 'utf8'), original, 'the original file is never rewritten');
  assert.equal((await get('shop.test')).status, 200);
  assert.equal((await get('shop2.test')).status, 421, 'the copy is not served');
  assert.ok(((await api(root, 'GET', '/sites/shop/usage')).body.data.bytes as number) >= bytes, 'the counter stays with the original');

  const check = runHostkit(['proxy', 'check', '--root', root.dir]);
  assert.equal(check.code, 1, check.stdout + check.stderr);
  assert.match(check.stderr, /shop2\.yaml:\n {2}\/id: site id "shop" is already used by .*\/shop\.yaml/);

  writeFileSync(copyFile, copy.replace(/^id: shop\n/, ''));
  await until('the copy serves under a fresh id', async () => (await get('shop2.test')).status === 200);
  assert.match(readFileSync(copyFile, 'utf8'), /^id: shop2\n/);
  assert.equal((await get('shop.test')).status, 200);
  rmSync(copyFile);
});

test('an internationalised hostname is reached by its punycode form', async () => {
  assert.equal((await get('xn--bcher-kva.test')).status, 200);
  assert.equal((await get('www.XN--BCHER-KVA.test:8080')).status, 200);
});

test('check reports contested hostnames as warnings (exit 0) and unroutable names as problems (exit 1)', async () => {
  const other = await makeRoot({
    sites: {
      'a.yaml': { id: 'a', hostnames: ['both.test'], origin: { url: origin.url } },
      'b.yaml': { id: 'b', hostnames: ['both.test', 'b.test'], origin: { url: origin.url } },
    },
  });
  const contested = runHostkit(['proxy', 'check', '--root', other.dir]);
  assert.equal(contested.code, 0, contested.stderr);
  assert.equal(contested.stdout, 'ok\n');
  assert.match(contested.stderr, /warning: hostname both\.test is claimed by .*\/a\.yaml and .*\/b\.yaml/);
  other.writeSite('c.yaml', { id: 'c', hostnames: ['foo.*.test', '[::1]'], origin: { url: origin.url, host_header: 'x\r\nX-Injected: yes' } });
  const bad = runHostkit(['proxy', 'check', '--root', other.dir]);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /c\.yaml:\n[^]*\/hostnames\/0: [^]*\/hostnames\/1: [^]*\/origin\/host_header: /);
  rmSync(other.dir, { recursive: true, force: true });
});

test('the top help names --root and its default', () => {
  const help = runHostkit(['proxy', '--help']);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /--root <dir> +project root[^\n]*\(default: "\."\)/);
});

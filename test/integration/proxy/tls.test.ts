/**
 * TLS (spec/3 §2.3) with self-signed certificates made by openssl in the test: per-site
 * certificates chosen by SNI, handshakes refused for unknown names and without SNI, the 308
 * redirect keeping or dropping the port, HSTS on HTTPS only, Host/SNI mismatch, and certificate
 * files re-read on an API reload and on a site file change.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, rmSync, utimesSync } from 'node:fs';
import { join } from 'node:path';
import { connect, type PeerCertificate } from 'node:tls';
import type { Daemon } from '../hostkit-process.ts';
import { api, makeCert, makeRoot, request, seenOf, servedBy, startOrigin, startProxy, until, type Origin, type ProxyRoot } from './harness.ts';

let root: ProxyRoot;
let proxy: Daemon;
let origin: Origin;
let shopPem: string;
let blogPem: string;

before(async () => {
  origin = await startOrigin();
  root = await makeRoot();
  shopPem = (await makeCert(root.dir, 'shop', ['shop.test', '*.shop.test'])).pem;
  blogPem = (await makeCert(root.dir, 'blog', ['blog.test'])).pem;
  root.writeSite('shop.yaml', {
    id: 'shop',
    hostnames: ['shop.test', '*.shop.test'],
    origin: { url: origin.url },
    tls: { enabled: true, cert_path: 'shop.crt', key_path: 'shop.key', hsts_max_age: 31536000 },
  });
  root.writeSite('blog.yaml', {
    id: 'blog',
    hostnames: ['blog.test'],
    origin: { url: origin.url },
    tls: { enabled: true, cert_path: join(root.dir, 'blog.crt'), key_path: join(root.dir, 'blog.key'), redirect_http_to_https: false },
  });
  root.writeSite('plain.yaml', { id: 'plain', hostnames: ['plain.test'], origin: { url: origin.url } });
  proxy = await startProxy(root);
});

after(async () => {
  await proxy?.stop('SIGKILL');
  await origin?.close();
});

/** The certificate the proxy presents for `servername` (undefined: no SNI), or the handshake error. */
function handshake(servername: string | undefined): Promise<{ cert?: PeerCertificate; error?: string }> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port: root.httpsPort, ...(servername ? { servername } : {}), rejectUnauthorized: false, ALPNProtocols: ['http/1.1'] });
    socket.once('secureConnect', () => {
      const cert = socket.getPeerCertificate();
      socket.destroy();
      resolve({ cert });
    });
    socket.once('error', (err) => resolve({ error: err.message }));
  });
}

const https = (host: string, path = '/', ca = shopPem) => request({ port: root.httpsPort, host, path, tls: { ca } });

test('SNI picks each site’s certificate, wildcards included', async () => {
  assert.equal((await handshake('shop.test')).cert?.subject.CN, 'shop.test');
  assert.equal((await handshake('cart.shop.test')).cert?.subject.CN, 'shop.test');
  assert.equal((await handshake('BLOG.test')).cert?.subject.CN, 'blog.test');
  const r = await https('shop.test', '/hello');
  assert.equal(r.status, 200);
  assert.equal(servedBy(r), origin.port);
  assert.equal((await https('blog.test', '/', blogPem)).status, 200, 'verified against the blog certificate');
});

test('no default certificate: unknown names, non-TLS sites and handshakes without SNI are refused', async () => {
  for (const name of ['unknown.test', 'plain.test', 'shop.test.evil', undefined]) {
    const h = await handshake(name);
    assert.equal(h.cert, undefined, `${name}: no certificate`);
    assert.ok(h.error, `${name}: handshake aborted`);
  }
});

test('cleartext requests to a TLS site get 308 to https; a non-default port is kept, 80 and 443 dropped', async () => {
  const cases: [string, string][] = [
    ['shop.test', 'https://shop.test/a/b?x=1&y=2'],
    ['shop.test:8443', 'https://shop.test:8443/a/b?x=1&y=2'],
    ['shop.test:80', 'https://shop.test/a/b?x=1&y=2'],
    ['Cart.Shop.Test:443', 'https://cart.shop.test/a/b?x=1&y=2'],
  ];
  for (const [host, location] of cases) {
    const r = await request({ port: root.httpPort, host, path: '/a/b?x=1&y=2', method: 'POST', body: 'kept by 308' });
    assert.equal(r.status, 308, host);
    assert.equal(r.headers['location'], location, host);
    assert.equal(r.headers['strict-transport-security'], undefined, 'never HSTS over cleartext');
  }
  const blog = await request({ port: root.httpPort, host: 'blog.test' });
  assert.equal(servedBy(blog), origin.port, 'redirect_http_to_https false: cleartext is served');
  assert.equal((await request({ port: root.httpPort, host: 'plain.test' })).status, 200, 'no TLS: nothing to redirect to');
});

test('HSTS on HTTPS responses of sites that set hsts_max_age, errors included', async () => {
  assert.equal((await https('shop.test')).headers['strict-transport-security'], 'max-age=31536000');
  assert.equal((await https('shop.test', '/', shopPem).then(() => https('x.shop.test', '/'))).headers['strict-transport-security'], 'max-age=31536000');
  assert.equal((await https('blog.test', '/', blogPem)).headers['strict-transport-security'], undefined);
  // The site's policy replaces an origin's own; a site without one passes the origin's on.
  const replaced = await https('shop.test', '/headers');
  assert.equal(replaced.headers['strict-transport-security'], 'max-age=31536000');
  assert.equal(replaced.headers['x-kept'], 'yes');
  assert.deepEqual(replaced.headers['set-cookie'], ['a=1', 'b=2']);
  assert.equal((await https('blog.test', '/headers', blogPem)).headers['strict-transport-security'], 'max-age=5');
  const refused = await request({ port: root.httpsPort, host: 'shop.test', method: 'TRACE', tls: { ca: shopPem } });
  assert.equal(refused.status, 405);
  assert.equal(refused.headers['strict-transport-security'], 'max-age=31536000');
});

test('the origin learns the scheme: X-Forwarded-Proto https on HTTPS, http on cleartext, a client-sent one replaced', async () => {
  const forged = { 'x-forwarded-proto': 'http' };
  assert.equal(seenOf(await request({ port: root.httpsPort, host: 'blog.test', path: '/p', headers: forged, tls: { ca: blogPem } })).headers['x-forwarded-proto'], 'https');
  assert.equal(seenOf(await request({ port: root.httpPort, host: 'blog.test', path: '/p', headers: { 'x-forwarded-proto': 'https' } })).headers['x-forwarded-proto'], 'http');
});

test('a Host that routes elsewhere than the SNI name gets 421', async () => {
  const r = await request({ port: root.httpsPort, host: 'blog.test', tls: { ca: shopPem, servername: 'shop.test' } });
  assert.equal(r.status, 421);
  const same = await request({ port: root.httpsPort, host: 'www.shop.test', tls: { ca: shopPem, servername: 'shop.test' } });
  assert.equal(same.status, 200, 'two names of one site share a connection');
});

test('certificates are re-read on an API reload and on a site file change; an unreadable one keeps the old', async () => {
  const before = (await handshake('blog.test')).cert?.fingerprint256;
  // Renew the blog certificate in place.
  const renewed = await makeCert(root.dir, 'blog-next', ['blog.test']);
  copyFileSync(renewed.cert, join(root.dir, 'blog.crt'));
  copyFileSync(renewed.key, join(root.dir, 'blog.key'));
  assert.equal((await handshake('blog.test')).cert?.fingerprint256, before, 'not re-read before a reload');
  const reload = await api(root, 'POST', '/reload');
  assert.equal(reload.status, 200);
  const afterReload = (await handshake('blog.test')).cert?.fingerprint256;
  assert.notEqual(afterReload, before);
  assert.equal((await https('blog.test', '/', renewed.pem)).status, 200);

  const again = await makeCert(root.dir, 'blog-third', ['blog.test']);
  copyFileSync(again.cert, join(root.dir, 'blog.crt'));
  copyFileSync(again.key, join(root.dir, 'blog.key'));
  const future = new Date(Date.now() + 2000);
  utimesSync(join(root.sitesDir, 'blog.yaml'), future, future);
  await until('the site file change re-reads the certificate', async () => (await handshake('blog.test')).cert?.fingerprint256 !== afterReload);

  const serving = (await handshake('blog.test')).cert?.fingerprint256;
  rmSync(join(root.dir, 'blog.key'));
  await api(root, 'POST', '/reload');
  assert.equal((await handshake('blog.test')).cert?.fingerprint256, serving, 'the last good certificate keeps serving');
  assert.match(proxy.output(), /blog\.yaml.*file not found: .*blog\.key|blog\.key.*file not found/);
});

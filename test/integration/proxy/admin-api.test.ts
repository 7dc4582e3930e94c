/**
 * The admin API (spec/3 §4.1, §5; docs/proxy-admin-api.md) against the proxy started as
 * `osproxy --root DIR`: the Host allow-list before tokens, the three roles on every endpoint,
 * token rotation applying to the next request, PUT /global, site CRUD writing the files (comments
 * kept) with the 409 conflict naming the other site, validation errors with every problem, JSON
 * bodies only, an admin.listen in use refusing the start, and a graceful SIGTERM that lets an
 * in-flight request finish.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { join } from 'node:path';
import { parse } from 'yaml';
import { runHostkit, startHostkit, type Daemon } from '../hostkit-process.ts';
import {
  ADMIN_TOKEN,
  OPERATOR_TOKEN,
  READONLY_TOKEN,
  api,
  makeRoot,
  request,
  servedBy,
  startOrigin,
  until,
  type Origin,
  type ProxyRoot,
} from './harness.ts';

let root: ProxyRoot;
let proxy: Daemon;
let origin: Origin;

before(async () => {
  origin = await startOrigin();
  root = await makeRoot({
    global: { admin_note: 'unknown keys are ignored' },
    sites: {
      'main.yaml': { id: 'main', hostnames: ['main.test', '*.main.test'], origin: { url: origin.url } },
      'spare.yaml': { id: 'spare', hostnames: ['spare.test'], origin: { url: origin.url } },
    },
  });
  const file = join(root.dir, 'config.yaml');
  // allow_hosts: the loopback addresses (any port) and one name; a comment to keep through PUT /global.
  writeFileSync(file, `# global config, edited by hand\n${readFileSync(file, 'utf8').replace(/^admin:\n/m, "admin:\n  allow_hosts: [127.0.0.1, '::1', proxy-admin.internal:9999]\n")}`);
  // The spec's own command line: osproxy --root DIR.
  proxy = startHostkit(['--root', root.dir], { name: 'osproxy', linkDir: join(root.dir, 'bin'), env: { RUST_LOG: '' } });
  await proxy.waitFor(/"msg":"osproxy started"/);
});

after(async () => {
  await proxy?.stop('SIGKILL');
  await origin?.close();
});

test('GET /health needs no token; the Host allow-list is checked first, for every path', async () => {
  const health = await api(root, 'GET', '/health', { token: null });
  assert.equal(health.status, 200);
  assert.equal(health.body.data.status, 'ok');
  assert.equal(health.body.data.sites, 2);
  for (const path of ['/health', '/sites', '/nope']) {
    for (const token of [ADMIN_TOKEN, 'wrong-token-wrong-token', null]) {
      const r = await api(root, 'GET', path, { token, host: 'evil.test' });
      assert.equal(r.status, 403, `${path} ${token}`);
      assert.equal(r.body.meta.code, 'ERR_HOST_NOT_ALLOWED');
    }
  }
  const metrics = await request({ port: root.adminPort, path: '/metrics', host: 'evil.test', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  assert.equal(metrics.status, 403, '/metrics is behind the allow-list too');
  assert.equal((await api(root, 'GET', '/sites', { host: 'proxy-admin.internal:9999' })).status, 200, 'an entry with a port matches exactly');
  assert.equal((await api(root, 'GET', '/sites', { host: 'proxy-admin.internal' })).status, 403);
  assert.equal((await api(root, 'GET', '/sites', { host: '127.0.0.1:1' })).status, 200, 'an entry without a port matches any port');
});

test('allow_hosts: a bare IPv6 entry matches the bracketed Host a client sends, with any port', async () => {
  for (const host of [`[::1]:${root.adminPort}`, '[::1]:1', '[::1]']) {
    assert.equal((await api(root, 'GET', '/sites', { host })).status, 200, host);
  }
  for (const host of [`[::2]:${root.adminPort}`, '[::1', `[0::1::]:${root.adminPort}`]) {
    const r = await api(root, 'GET', '/sites', { host });
    assert.deepEqual([r.status, r.body.meta.code], [403, 'ERR_HOST_NOT_ALLOWED'], host);
  }
});

/** One request written as raw bytes, for what the HTTP client cannot send (no Host header); resolves with the status and the body. */
function rawRequest(port: number, head: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(head));
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString();
      resolve({ status: Number(/^HTTP\/1\.1 ([0-9]{3}) /.exec(text)?.[1] ?? 0), text: text.slice(text.indexOf('\r\n\r\n') + 4) });
    });
  });
}

test('an HTTP/1.1 request without Host gets the envelope: 403 ERR_HOST_NOT_ALLOWED under an allow-list, served without one', async () => {
  const noHost = 'GET /api/v1/health HTTP/1.1\r\nConnection: close\r\n\r\n';
  const refused = await rawRequest(root.adminPort, noHost);
  assert.equal(refused.status, 403, refused.text);
  assert.equal(JSON.parse(refused.text).meta.code, 'ERR_HOST_NOT_ALLOWED');
  const saved = currentGlobal();
  const open = structuredClone(saved);
  (open['admin'] as { allow_hosts: string[] }).allow_hosts = [];
  assert.equal((await api(root, 'PUT', '/global', { body: open })).status, 200);
  const served = await rawRequest(root.adminPort, noHost);
  assert.equal(served.status, 200, served.text);
  assert.equal(JSON.parse(served.text).data.status, 'ok');
  assert.equal((await api(root, 'PUT', '/global', { body: saved })).status, 200);
  assert.equal((await rawRequest(root.adminPort, noHost)).status, 403);
});

test('tokens: missing or unknown is 401 with WWW-Authenticate', async () => {
  for (const token of [null, 'not-a-configured-token', ADMIN_TOKEN.slice(0, -1)]) {
    const r = await request({ port: root.adminPort, path: '/api/v1/sites', headers: token === null ? {} : { authorization: `Bearer ${token}` } });
    assert.equal(r.status, 401);
    assert.equal(r.headers['www-authenticate'], 'Bearer');
    assert.equal(JSON.parse(r.text).meta.code, 'ERR_UNAUTHORIZED');
  }
});

test('roles: readonly reads, operator also manages sites and reloads, admin also replaces the global config', async () => {
  const site = { hostnames: ['roles.test'], origin: { url: origin.url } };
  const calls: [string, string, unknown, Record<string, number>][] = [
    ['GET', '/sites', undefined, { readonly: 200, operator: 200, admin: 200 }],
    ['GET', '/sites/main', undefined, { readonly: 200, operator: 200, admin: 200 }],
    ['GET', '/events/recent', undefined, { readonly: 200, operator: 200, admin: 200 }],
    ['GET', '/sites/main/usage', undefined, { readonly: 200, operator: 200, admin: 200 }],
    ['GET', '/stats/minutes?site=main', undefined, { readonly: 200, operator: 200, admin: 200 }],
    ['POST', '/reload', undefined, { readonly: 403, operator: 200, admin: 200 }],
    ['POST', '/sites', { ...site, id: 'roles' }, { readonly: 403, operator: 201, admin: 409 }],
    ['PUT', '/sites/roles', { ...site, enabled: false }, { readonly: 403, operator: 200, admin: 200 }],
    ['DELETE', '/sites/roles', undefined, { readonly: 403, operator: 200, admin: 404 }],
    ['GET', '/global', undefined, { readonly: 403, operator: 403, admin: 200 }],
    ['PUT', '/global', 'CURRENT', { readonly: 403, operator: 403, admin: 200 }],
  ];
  const tokens: Record<string, string> = { readonly: READONLY_TOKEN, operator: OPERATOR_TOKEN, admin: ADMIN_TOKEN };
  for (const [method, path, body, expected] of calls) {
    for (const role of ['readonly', 'operator', 'admin']) {
      const payload = body === 'CURRENT' ? currentGlobal() : body;
      const r = await api(root, method, path, { token: tokens[role] as string, ...(payload === undefined ? {} : { body: payload }) });
      assert.equal(r.status, expected[role], `${role} ${method} ${path}: ${JSON.stringify(r.body)}`);
      if (r.status === 403) assert.equal(r.body.meta.code, 'ERR_FORBIDDEN');
    }
  }
});

/** config.yaml as the JSON body of PUT /global. */
function currentGlobal(): Record<string, unknown> {
  return parse(readFileSync(join(root.dir, 'config.yaml'), 'utf8')) as Record<string, unknown>;
}

test('PUT /global: validated by the loader, written with comments kept, tokens rotated for the next request', async () => {
  const bad = await api(root, 'PUT', '/global', { body: { ...currentGlobal(), admin: { tokens: [{ name: 'x', token: 'short' }] }, log_level: 'loud' } });
  assert.equal(bad.status, 400);
  assert.equal(bad.body.meta.code, 'ERR_VALIDATION');
  assert.deepEqual(bad.body.data.problems.map((p: { path: string }) => p.path).sort(), ['/admin/tokens/0/token', '/log_level']);
  const rotated = currentGlobal();
  const admin = rotated['admin'] as { tokens: { name: string; token: string; role: string }[] };
  admin.tokens = admin.tokens.map((t) => (t.role === 'operator' ? { ...t, token: 'rotated-operator-token-0123' } : t));
  const r = await api(root, 'PUT', '/global', { body: rotated });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual(r.body.data.restart_required, []);
  assert.equal((await api(root, 'GET', '/sites', { token: OPERATOR_TOKEN })).status, 401, 'the old token stops at once');
  assert.equal((await api(root, 'GET', '/sites', { token: 'rotated-operator-token-0123' })).status, 200);
  const text = readFileSync(join(root.dir, 'config.yaml'), 'utf8');
  assert.match(text, /^# global config, edited by hand\n/);
  assert.match(text, /rotated-operator-token-0123/);
  // Editing the file works the same way.
  writeFileSync(join(root.dir, 'config.yaml'), text.replace('rotated-operator-token-0123', OPERATOR_TOKEN));
  await until('the file edit rotates the token back', async () => (await api(root, 'GET', '/sites', { token: OPERATOR_TOKEN })).status === 200);
  const moved = await api(root, 'PUT', '/global', { body: { ...currentGlobal(), listen_http: ['127.0.0.1:1'] } });
  assert.deepEqual(moved.body.data.restart_required, ['listen_http']);
  await api(root, 'PUT', '/global', { body: { ...currentGlobal(), listen_http: [`127.0.0.1:${root.httpPort}`] } });
});

test('GET /global is what PUT /global takes back: a round trip with one change writes only that change', async () => {
  const file = join(root.dir, 'config.yaml');
  const before = readFileSync(file, 'utf8');
  const got = await api(root, 'GET', '/global');
  assert.equal(got.status, 200);
  assert.equal(got.body.data.admin.tokens.length, 3, 'the tokens, since PUT replaces them');
  const r = await api(root, 'PUT', '/global', { body: { ...got.body.data, log_level: 'warn' } });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  const after = readFileSync(file, 'utf8');
  assert.equal(after.replace(/\nlog_level: warn\n/, '\n'), before.replace(/\nlog_level: debug\n/, '\n'), `only log_level changed:\n${after}`);
  assert.match(after, /\nlog_level: warn\n/);
  writeFileSync(file, before);
  await until('the file edit applies', async () => (await api(root, 'GET', '/global')).body.data.log_level === 'debug');
});

test('an edit of config.yaml applies to the next request; an edit with problems leaves the previous tokens in force', async () => {
  const file = join(root.dir, 'config.yaml');
  const text = readFileSync(file, 'utf8');
  assert.match(text, /^log_level: debug$/m);
  const edited = 'edited-operator-token-0123456';
  writeFileSync(file, text.replace(OPERATOR_TOKEN, edited));
  // No waiting for the file watcher: the request itself finds the file changed.
  assert.equal((await api(root, 'GET', '/sites', { token: edited })).status, 200);
  assert.equal((await api(root, 'GET', '/sites', { token: OPERATOR_TOKEN })).status, 401);

  const broken = 'broken-operator-token-0123456789';
  writeFileSync(file, text.replace(OPERATOR_TOKEN, broken).replace(/^log_level: debug$/m, 'log_level: loud'));
  assert.equal((await api(root, 'GET', '/sites', { token: broken })).status, 401, 'a file with problems applies nothing');
  const list = await api(root, 'GET', '/sites', { token: edited });
  assert.equal(list.status, 200, 'the last good tokens keep serving');
  assert.deepEqual(list.body.data.broken.map((b: { file: string }) => b.file), [file]);

  writeFileSync(file, text);
  const back = await api(root, 'GET', '/sites', { token: OPERATOR_TOKEN });
  assert.equal(back.status, 200);
  assert.deepEqual(back.body.data.broken, []);
});

test('site CRUD writes the files and applies at once', async () => {
  const created = await api(root, 'POST', '/sites', {
    body: {
      hostnames: ['crud.test'],
      origin: { url: origin.url },
      protection: { waf: { custom_rules: [{ id: 'ua', name: 'bad agent', target: { header: 'User-Agent' }, pattern: 'evilbot' }] } },
    },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  assert.equal(created.body.data.site.id, 'crud.test', 'the id comes from the first hostname');
  const file = join(root.sitesDir, 'crud.test.yaml');
  assert.equal(created.body.data.file, file);
  assert.match(readFileSync(file, 'utf8'), /^id: crud\.test\n/);
  assert.match(readFileSync(file, 'utf8'), /target: !header User-Agent/);
  assert.equal(servedBy(await request({ port: root.httpPort, host: 'crud.test' })), origin.port);

  const got = await api(root, 'GET', '/sites/crud.test');
  assert.equal(got.body.data.origin.connect_timeout_ms, 5000, 'the site as JSON, defaults filled in');
  assert.deepEqual(got.body.data.protection.waf.custom_rules[0].target, { header: 'User-Agent' });

  writeFileSync(file, `# hand-written note\n${readFileSync(file, 'utf8')}`);
  const replaced = await api(root, 'PUT', '/sites/crud.test', { body: { ...got.body.data, hostnames: ['crud.test', 'crud2.test'] } });
  assert.equal(replaced.status, 200, JSON.stringify(replaced.body));
  assert.match(readFileSync(file, 'utf8'), /^# hand-written note\n/, 'comments survive a PUT');
  assert.equal((await request({ port: root.httpPort, host: 'crud2.test' })).status, 200);
  // The GET's defaults went back in the PUT: only what the file wrote, and the change, are in it.
  const written = parse(readFileSync(file, 'utf8'), { customTags: [{ tag: '!header', resolve: (v: string) => v }] }) as Record<string, unknown>;
  assert.deepEqual(Object.keys(written).sort(), ['hostnames', 'id', 'origin', 'protection']);
  assert.deepEqual(written['origin'], { url: origin.url });
  assert.deepEqual(Object.keys((written['protection'] as Record<string, unknown>)['waf'] as object), ['custom_rules']);
  const tuned = await api(root, 'PUT', '/sites/crud.test', { body: { ...got.body.data, hostnames: ['crud.test', 'crud2.test'], origin: { ...got.body.data.origin, connect_timeout_ms: 1234 } } });
  assert.equal(tuned.status, 200, JSON.stringify(tuned.body));
  assert.match(readFileSync(file, 'utf8'), /connect_timeout_ms: 1234/, 'a value other than the default is written');

  const idChange = await api(root, 'PUT', '/sites/crud.test', { body: { ...got.body.data, id: 'other' } });
  assert.equal(idChange.status, 400);
  // null says "no id given", as `id:` left empty in a file and in POST: the site keeps its own.
  const nullId = await api(root, 'PUT', '/sites/crud.test', { body: { ...got.body.data, id: null, hostnames: ['crud.test', 'crud2.test'] } });
  assert.equal(nullId.status, 200, JSON.stringify(nullId.body));
  assert.match(readFileSync(file, 'utf8'), /^id: crud\.test$/m);

  const list = await api(root, 'GET', '/sites');
  assert.ok(list.body.data.sites.some((s: { id: string; hostnames: string[] }) => s.id === 'crud.test' && s.hostnames.includes('crud2.test')));

  const deleted = await api(root, 'DELETE', '/sites/crud.test');
  assert.equal(deleted.status, 200);
  assert.equal(existsSync(file), false);
  assert.equal((await request({ port: root.httpPort, host: 'crud.test' })).status, 421);
  for (const [method, body] of [['GET'], ['PUT', { hostnames: ['x.test'], origin: { url: origin.url } }], ['DELETE']] as const) {
    const r = await api(root, method, '/sites/crud.test', body ? { body } : {});
    assert.equal(r.status, 404, method);
    assert.equal(r.body.meta.code, 'ERR_NOT_FOUND');
  }
});

test('a GET sent back through PUT with one change writes only that change: no rule defaults, unknown keys kept and not shown', async () => {
  const file = join(root.sitesDir, 'trip.yaml');
  // Written in the style the API writes YAML in (flow collections without padding), so the texts compare exactly.
  const text = [
    '# round trip: written by hand',
    'id: trip',
    'hostnames: [trip.test]',
    `origin: {url: "${origin.url}"}`,
    'x-team: platform # an operator extension key',
    'protection:',
    '  rate_limit: {per_ip: {requests: 50, window_secs: 10}}',
    '  waf:',
    '    custom_rules:',
    '      # the tenant rule',
    '      - {id: tenant, name: banned tenant, target: !header X-Tenant, pattern: "^acme-test$"}',
    '      - {id: ie, name: old browsers, target: user_agent, pattern: "msie [5-8]\\\\.", action: log, x-ticket: OPS-12}',
    '',
  ].join('\n');
  writeFileSync(file, text);
  await until('the site served', async () => (await api(root, 'GET', '/sites/trip')).status === 200);
  const got = await api(root, 'GET', '/sites/trip');
  assert.equal(got.body.data['x-team'], undefined, 'ignored keys are not configuration');
  assert.deepEqual(got.body.data.protection.waf.custom_rules[0], { id: 'tenant', name: 'banned tenant', target: { header: 'X-Tenant' }, pattern: '^acme-test$', enabled: true, action: 'block' });

  const same = await api(root, 'PUT', '/sites/trip', { body: got.body.data });
  assert.equal(same.status, 200, JSON.stringify(same.body));
  assert.equal(same.body.data.site['x-team'], undefined);
  assert.deepEqual(same.body.data.warnings, ['/x-team: unknown key, ignored', '/protection/waf/custom_rules/1/x-ticket: unknown key, ignored']);
  assert.equal(readFileSync(file, 'utf8'), text, 'an unchanged GET writes the file as it was');

  const data = structuredClone(got.body.data);
  data.protection.rate_limit.per_ip.requests = 60;
  const changed = await api(root, 'PUT', '/sites/trip', { body: data });
  assert.equal(changed.status, 200, JSON.stringify(changed.body));
  assert.equal(readFileSync(file, 'utf8'), text.replace('requests: 50', 'requests: 60'), 'only the change is written');

  // A null removes an ignored key; leaving it out keeps it.
  const dropped = await api(root, 'PUT', '/sites/trip', { body: { ...data, 'x-team': null } });
  assert.equal(dropped.status, 200, JSON.stringify(dropped.body));
  assert.doesNotMatch(readFileSync(file, 'utf8'), /x-team/);
  assert.match(readFileSync(file, 'utf8'), /x-ticket: OPS-12/);

  // Without the first rule, the other keeps its own ignored key (rules pair by id, not position).
  data.protection.waf.custom_rules.shift();
  const fewer = await api(root, 'PUT', '/sites/trip', { body: data });
  assert.equal(fewer.status, 200, JSON.stringify(fewer.body));
  const rules = (parse(readFileSync(file, 'utf8')) as { protection: { waf: { custom_rules: Record<string, unknown>[] } } }).protection.waf.custom_rules;
  assert.deepEqual(rules, [{ id: 'ie', name: 'old browsers', target: 'user_agent', pattern: 'msie [5-8]\\.', action: 'log', 'x-ticket': 'OPS-12' }]);
  assert.doesNotMatch(readFileSync(file, 'utf8'), /# the tenant rule/, 'no comment is left above another rule');
  assert.equal((await api(root, 'DELETE', '/sites/trip')).status, 200);
});

test('unknown fields written through the API come back as warnings naming their path; a clean write has none', async () => {
  const created = await api(root, 'POST', '/sites', {
    body: { id: 'typo', hostnames: ['typo.test'], origin: { url: origin.url }, protection: { rate_limt: { enabled: false } }, tls: { enabeld: true } },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  assert.deepEqual(created.body.data.warnings, ['/protection/rate_limt: unknown key, ignored', '/tls/enabeld: unknown key, ignored']);
  // And logged (the log reaches this process through a pipe of its own, maybe after the answer).
  await until('the warning in the log', () => /typo\.yaml.*\/protection\/rate_limt: unknown key, ignored/.test(proxy.output()));
  // A body without the typo keeps it (keys the loader ignores stay in the file) and says so; a null removes it.
  const kept = await api(root, 'PUT', '/sites/typo', { body: { hostnames: ['typo.test'], origin: { url: origin.url }, protection: { rate_limit: { enabled: false } } } });
  assert.equal(kept.status, 200, JSON.stringify(kept.body));
  assert.deepEqual(kept.body.data.warnings, ['/protection/rate_limt: unknown key, ignored']);
  const fixed = await api(root, 'PUT', '/sites/typo', { body: { hostnames: ['typo.test'], origin: { url: origin.url }, protection: { rate_limit: { enabled: false }, rate_limt: null } } });
  assert.equal(fixed.status, 200, JSON.stringify(fixed.body));
  assert.deepEqual(fixed.body.data.warnings, []);
  // config.yaml here already holds one unknown key of its own (admin_note).
  const global = await api(root, 'PUT', '/global', { body: { ...currentGlobal(), evnets: { recent_buffer: 10 } } });
  assert.equal(global.status, 200, JSON.stringify(global.body));
  assert.deepEqual(global.body.data.warnings, ['/admin_note: unknown key, ignored', '/evnets: unknown key, ignored']);
  const { evnets: _typo, ...clean } = currentGlobal();
  assert.deepEqual((await api(root, 'PUT', '/global', { body: { ...clean, evnets: null } })).body.data.warnings, ['/admin_note: unknown key, ignored']);
  assert.equal((await api(root, 'DELETE', '/sites/typo')).status, 200);
});

test('409 when a hostname is claimed by another enabled site, naming it; nothing is written', async () => {
  const before = readFileSync(join(root.sitesDir, 'spare.yaml'), 'utf8');
  const taken = await api(root, 'POST', '/sites', { body: { id: 'thief', hostnames: ['new.test', 'SPARE.test.'], origin: { url: origin.url } } });
  assert.equal(taken.status, 409);
  assert.equal(taken.body.meta.code, 'ERR_CONFLICT');
  assert.deepEqual([taken.body.data.site, taken.body.data.hostname], ['spare', 'spare.test']);
  assert.match(taken.body.error ?? '', /spare\.test is already claimed by site spare/);
  assert.equal(existsSync(join(root.sitesDir, 'thief.yaml')), false);
  const wildcard = await api(root, 'PUT', '/sites/spare', { body: { hostnames: ['spare.test', '*.main.test'], origin: { url: origin.url } } });
  assert.equal(wildcard.status, 409);
  assert.equal(wildcard.body.data.site, 'main');
  assert.equal(readFileSync(join(root.sitesDir, 'spare.yaml'), 'utf8'), before);
  const sameId = await api(root, 'POST', '/sites', { body: { id: 'spare', hostnames: ['other.test'], origin: { url: origin.url } } });
  assert.equal(sameId.status, 409);
  const disabled = await api(root, 'POST', '/sites', { body: { id: 'parked', enabled: false, hostnames: ['spare.test'], origin: { url: origin.url } } });
  assert.equal(disabled.status, 201, 'a disabled site claims nothing');
  assert.equal(servedBy(await request({ port: root.httpPort, host: 'spare.test' })), origin.port);
});

test('bad bodies: every validation problem at once, malformed JSON, not an object, bad query', async () => {
  const invalid = await api(root, 'POST', '/sites', { body: { id: 'bad id!', hostnames: [], origin: { url: 'http://user@x/path' }, tls: { enabled: true } } });
  assert.equal(invalid.status, 400);
  assert.equal(invalid.body.meta.code, 'ERR_VALIDATION');
  const paths = invalid.body.data.problems.map((p: { path: string }) => p.path);
  for (const p of ['/id', '/hostnames', '/origin/url', '/tls/cert_path', '/tls/key_path']) assert.ok(paths.includes(p), `${p} in ${paths}`);
  for (const id of [5, '-']) {
    const refused = await api(root, 'POST', '/sites', { body: { id, hostnames: ['numbered.test'], origin: { url: origin.url } } });
    assert.equal(refused.status, 400, `id ${JSON.stringify(id)} is refused, not replaced`);
    assert.deepEqual(refused.body.data.problems.map((p: { path: string }) => p.path), ['/id']);
  }
  for (const target of [{ header: 5 }, { header: 'X-Tenant', name: 'x' }, {}]) {
    const rule = { id: 'h', name: 'h', target, pattern: 'evil' };
    const refused = await api(root, 'POST', '/sites', { body: { hostnames: ['header-target.test'], origin: { url: origin.url }, protection: { waf: { custom_rules: [rule] } } } });
    assert.equal(refused.status, 400);
    const messages = refused.body.data.problems.filter((p: { path: string }) => p.path === '/protection/waf/custom_rules/0/target').map((p: { message: string }) => p.message);
    assert.ok(messages.some((m: string) => m.includes('{"header": "Header-Name"} in JSON')), `target ${JSON.stringify(target)}: ${messages.join('; ')}`);
  }
  const malformed = await request({ port: root.adminPort, method: 'POST', path: '/api/v1/sites', headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' }, body: '{"hostnames": [' });
  assert.equal(malformed.status, 400);
  assert.equal(JSON.parse(malformed.text).meta.code, 'ERR_BAD_REQUEST');
  const array = await api(root, 'POST', '/sites', { body: ['x'] });
  assert.equal(array.status, 400);
  assert.equal(array.body.meta.code, 'ERR_BAD_REQUEST');
  assert.equal((await api(root, 'GET', '/events/recent?limit=0')).status, 400);
  // A repeated site names no site: a 400, not an empty list or a list echoed as data.site.
  for (const path of ['/events/recent?site=main&site=spare', '/stats/minutes?site=main&site=spare']) {
    const twice = await api(root, 'GET', path);
    assert.deepEqual([twice.status, twice.body.meta.code], [400, 'ERR_BAD_REQUEST'], `${path}: ${JSON.stringify(twice.body)}`);
  }
  const unknown = await api(root, 'GET', '/nothing-here');
  assert.deepEqual([unknown.status, unknown.body.meta.code], [404, 'ERR_NOT_FOUND']);
});

test('a body that is not application/json is 415 ERR_BAD_REQUEST, text/plain included; nothing changes', async () => {
  const calls: [string, string, string][] = [
    ['POST', '/api/v1/sites', JSON.stringify({ id: 'plain', hostnames: ['plain.test'], origin: { url: origin.url } })],
    ['PUT', '/api/v1/global', JSON.stringify({ ...currentGlobal(), log_level: 'warn' })],
    ['POST', '/api/v1/bans', JSON.stringify({ ip: '192.0.2.99', duration_secs: 60 })],
  ];
  for (const [method, path, body] of calls) {
    for (const type of ['text/plain', 'text/plain; charset=utf-8', 'application/x-www-form-urlencoded', 'application/vnd.api+json']) {
      const r = await request({ port: root.adminPort, method, path, headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': type }, body });
      assert.equal(r.status, 415, `${method} ${path} as ${type}: ${r.text}`);
      const answer = JSON.parse(r.text) as { success: boolean; data: unknown; meta: { code: string } };
      assert.deepEqual([answer.success, answer.data, answer.meta.code], [false, null, 'ERR_BAD_REQUEST']);
    }
  }
  assert.equal(existsSync(join(root.sitesDir, 'plain.yaml')), false);
  assert.match(readFileSync(join(root.dir, 'config.yaml'), 'utf8'), /^log_level: debug$/m);
  assert.ok(!(await api(root, 'GET', '/bans')).body.data.bans.some((b: { ip: string }) => b.ip === '192.0.2.99'));
});

test('POST /reload re-reads the files and reports the new generation', async () => {
  const first = await api(root, 'POST', '/reload');
  const second = await api(root, 'POST', '/reload');
  assert.equal(second.body.data.generation, first.body.data.generation + 1);
  assert.deepEqual(second.body.data.broken, []);
});

test('GET /events/recent: newest first, per site, bounded by limit', async () => {
  for (let i = 0; i < 5; i++) await request({ port: root.httpPort, host: 'a.main.test', path: `/e/${i}` });
  const r = await api(root, 'GET', '/events/recent?site=main&limit=3');
  assert.deepEqual(r.body.data.events.map((e: { path: string }) => e.path), ['/e/4', '/e/3', '/e/2']);
});

test('admin.listen in use: the start fails naming admin.listen, exit 1, no stack trace', async () => {
  const other = await makeRoot();
  const holder = createServer();
  await new Promise<void>((r) => holder.listen(other.adminPort, '127.0.0.1', r));
  try {
    const r = runHostkit(['proxy', '--root', other.dir], { env: { RUST_LOG: '' } });
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, new RegExp(`^error: cannot listen on admin\\.listen 127\\.0\\.0\\.1:${other.adminPort}: .*EADDRINUSE`, 'm'));
    assert.doesNotMatch(r.stderr, /^\s+at /m);
    assert.match(r.stdout, /"msg":"start failed: cannot listen on admin\.listen .*EADDRINUSE/, 'the log says why');
  } finally {
    await new Promise((r) => holder.close(r));
  }
});

test('SIGTERM: no new connections, the in-flight request finishes, exit 0', async () => {
  const slow = request({ port: root.httpPort, host: 'main.test', path: '/slow/800' });
  await new Promise((r) => setTimeout(r, 200));
  const exited = proxy.stop('SIGTERM');
  await new Promise((r) => setTimeout(r, 100));
  await assert.rejects(request({ port: root.httpPort, host: 'main.test' }), /ECONNREFUSED/);
  const reply = await slow;
  assert.equal(reply.status, 200);
  assert.equal(await exited, 0);
  assert.match(proxy.output(), /"reason":"SIGTERM".*shutting down/);
  assert.match(proxy.output(), /"reason":"SIGTERM".*"msg":"stopped"/);
});

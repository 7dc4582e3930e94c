import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HeaderTarget, headerNameProblem, hostValueProblem, loadProxyFiles, originUrlProblem, patternProblem } from './config.ts';
import { makeCert } from '../../test/integration/proxy/harness.ts';

test('WAF patterns: linear-time syntax only', () => {
  for (const ok of ['union\\s+select', '[(?=]', '\\\\1', '(?:a|b)+', '(?<name>x)']) assert.equal(patternProblem(ok), undefined, ok);
  assert.match(patternProblem('(a)\\1') ?? '', /backreferences/);
  assert.match(patternProblem('(?<n>a)\\k<n>') ?? '', /backreferences/);
  for (const look of ['a(?=b)', 'a(?!b)', '(?<=a)b', '(?<!a)b']) assert.match(patternProblem(look) ?? '', /lookaround/, look);
  assert.match(patternProblem('(unclosed') ?? '', /invalid regular expression/);
});

test('origin URLs: absolute http(s), no path, no userinfo', () => {
  assert.equal(originUrlProblem('http://127.0.0.1:3000'), undefined);
  assert.equal(originUrlProblem('https://origin.example/'), undefined);
  assert.match(originUrlProblem('http://a@origin') ?? '', /userinfo/);
  assert.match(originUrlProblem('http://origin/app') ?? '', /path/);
  assert.match(originUrlProblem('ftp://origin') ?? '', /http or https/);
});

test('a site with only hostnames and origin.url loads with every default; !header targets load', () => {
  const root = mkdtempSync(join(tmpdir(), 'hk-proxy-cfg-'));
  mkdirSync(join(root, 'sites.d'));
  writeFileSync(join(root, 'config.yaml'), 'admin:\n  tokens:\n    - {name: ops, token: 0123456789abcdef0123}\n');
  writeFileSync(join(root, 'sites.d', 'a.yaml'), 'hostnames: [a.example]\norigin:\n  url: http://127.0.0.1:3000\n');
  writeFileSync(
    join(root, 'sites.d', 'b.yaml'),
    'hostnames: [b.example]\norigin: {url: "http://127.0.0.1:3001"}\nprotection:\n  waf:\n    custom_rules:\n      - {id: ua, name: bad agent, target: !header User-Agent, pattern: evilbot}\n',
  );
  const files = loadProxyFiles(root);
  assert.deepEqual(files.errors, []);
  const a = files.sites[0]?.config;
  assert.equal(a?.protection.rate_limit.per_ip.requests, 300);
  assert.equal(a?.protection.challenge.mode, 'off');
  assert.equal(a?.tls.redirect_http_to_https, true);
  assert.equal(a?.bandwidth.monthly_quota_bytes, null);
  assert.deepEqual(files.global?.listen_http, ['0.0.0.0:80']);
  const rule = files.sites[1]?.config.protection.waf.custom_rules[0];
  assert.ok(rule?.target instanceof HeaderTarget);
  assert.equal((rule?.target as HeaderTarget).header, 'User-Agent');
  assert.equal(rule?.action, 'block');
});

test('a TLS site whose files are there but make no certificate is a problem of its file, not an ok', () => {
  const root = mkdtempSync(join(tmpdir(), 'hk-proxy-cfg-'));
  mkdirSync(join(root, 'sites.d'));
  writeFileSync(join(root, 'config.yaml'), 'admin:\n  tokens:\n    - {name: ops, token: 0123456789abcdef0123}\n');
  writeFileSync(join(root, 'garbage.pem'), 'garbage\n');
  writeFileSync(join(root, 'sites.d', 'c.yaml'), 'hostnames: [c.example]\norigin: {url: "http://127.0.0.1:3000"}\ntls: {enabled: true, cert_path: garbage.pem, key_path: garbage.pem}\n');
  const files = loadProxyFiles(root);
  assert.deepEqual(files.sites, []);
  assert.match(files.errors[0]?.message ?? '', /\/tls\/cert_path: garbage\.pem holds no PEM certificate/);
});

test('a bad key file, or a key of another certificate, is the problem of key_path', async () => {
  const root = mkdtempSync(join(tmpdir(), 'hk-proxy-cfg-'));
  mkdirSync(join(root, 'sites.d'));
  writeFileSync(join(root, 'config.yaml'), 'admin:\n  tokens:\n    - {name: ops, token: 0123456789abcdef0123}\n');
  await makeCert(root, 'one', ['one.example']);
  await makeCert(root, 'two', ['two.example']);
  writeFileSync(join(root, 'garbage.pem'), 'garbage\n');
  const site = (key: string): string => `hostnames: [c.example]\norigin: {url: "http://127.0.0.1:3000"}\ntls: {enabled: true, cert_path: one.crt, key_path: ${key}}\n`;
  writeFileSync(join(root, 'sites.d', 'c.yaml'), site('garbage.pem'));
  assert.match(loadProxyFiles(root).errors[0]?.message ?? '', /\/tls\/key_path: garbage\.pem holds no PEM private key/);
  writeFileSync(join(root, 'sites.d', 'c.yaml'), site('two.key'));
  assert.match(loadProxyFiles(root).errors[0]?.message ?? '', /\/tls\/key_path: two\.key is not the key of the certificate in one\.crt/);
  writeFileSync(join(root, 'sites.d', 'c.yaml'), site('one.key'));
  assert.deepEqual(loadProxyFiles(root).errors, []);
});

test('the site id "-" is reserved for the requests no site matched', () => {
  const root = mkdtempSync(join(tmpdir(), 'hk-proxy-cfg-'));
  mkdirSync(join(root, 'sites.d'));
  writeFileSync(join(root, 'config.yaml'), 'admin:\n  tokens:\n    - {name: ops, token: 0123456789abcdef0123}\n');
  writeFileSync(join(root, 'sites.d', 'dash.yaml'), 'id: "-"\nhostnames: [d.example]\norigin: {url: "http://127.0.0.1:3000"}\n');
  assert.match(loadProxyFiles(root).errors[0]?.message ?? '', /\/id: is reserved/);
});

test('origin timeouts longer than a timer holds are problems of the site file, all reported together', () => {
  const root = mkdtempSync(join(tmpdir(), 'hk-proxy-cfg-'));
  mkdirSync(join(root, 'sites.d'));
  writeFileSync(join(root, 'config.yaml'), 'admin:\n  tokens:\n    - {name: ops, token: 0123456789abcdef0123}\n');
  writeFileSync(join(root, 'sites.d', 'slow.yaml'), 'hostnames: [s.example]\norigin: {url: "http://127.0.0.1:3000", connect_timeout_ms: 2592000000, read_timeout_ms: 2592000000, keepalive_secs: 2592000}\n');
  const message = loadProxyFiles(root).errors.map((e) => e.message).join('\n');
  for (const field of ['connect_timeout_ms', 'read_timeout_ms', 'keepalive_secs']) assert.match(message, new RegExp(`/origin/${field}: must be at most `), field);
});

/** A root with the usual config.yaml (or the given one) and site files; returns what `check` loads. */
function loadRoot(sites: Record<string, string>, global = 'admin:\n  tokens:\n    - {name: ops, token: 0123456789abcdef0123}\n'): ReturnType<typeof loadProxyFiles> & { dir: string } {
  const root = mkdtempSync(join(tmpdir(), 'hk-proxy-cfg-'));
  const dir = join(root, 'sites.d');
  mkdirSync(dir);
  writeFileSync(join(root, 'config.yaml'), global);
  for (const [name, text] of Object.entries(sites)) writeFileSync(join(dir, name), text);
  return { ...loadProxyFiles(root), dir };
}

const ORIGIN = 'origin: {url: "http://127.0.0.1:3000"}\n';
const problems = (files: ReturnType<typeof loadProxyFiles>): string => files.errors.map((e) => `${e.source}\n${e.message}`).join('\n');

test('check: a duplicate explicit id is a problem naming both files; a contested hostname is a warning naming both', () => {
  const files = loadRoot({
    'a.yaml': `id: shop\nhostnames: [a.test, both.test]\n${ORIGIN}`,
    'b.yaml': `id: shop\nhostnames: [b.test]\n${ORIGIN}`,
    'c.yaml': `hostnames: [both.test, c.test]\n${ORIGIN}`,
    'd.yaml': `enabled: false\nhostnames: [both.test]\n${ORIGIN}`,
  });
  assert.equal(files.errors.length, 1);
  assert.equal(files.errors[0]?.source, join(files.dir, 'b.yaml'));
  assert.match(problems(files), new RegExp(`/id: site id "shop" is already used by ${join(files.dir, 'a.yaml')}.*delete its id: line`));
  assert.deepEqual(
    files.sites.map((s) => s.config.id),
    ['shop', 'c', 'd'],
  );
  assert.deepEqual(files.warnings, [
    `hostname both.test is claimed by ${join(files.dir, 'a.yaml')} and ${join(files.dir, 'c.yaml')}: the first in sorted order, ${join(files.dir, 'a.yaml')}, keeps it; the other site serves only its other names`,
  ]);
});

test('hostnames that can never route are problems of their file; internationalised names load', () => {
  const files = loadRoot({
    'bad.yaml': `hostnames: ["foo.*.test", "[::1]", ".lead.test", "x..test", "a b.test", ok.test]\n${ORIGIN}`,
    'idn.yaml': `hostnames: [bücher.test]\n${ORIGIN}`,
  });
  const text = problems(files);
  for (const i of [0, 1, 2, 3, 4]) assert.match(text, new RegExp(`/hostnames/${i}: `), String(i));
  assert.doesNotMatch(text, /\/hostnames\/5/);
  assert.deepEqual(
    files.sites.map((s) => s.config.hostnames),
    [['bücher.test']],
  );
});

test('header values and names the proxy sends are checked: host_header, custom_header, methods, header targets', () => {
  const bad = loadRoot({
    'inject.yaml': `hostnames: [i.test]\norigin: {url: "http://127.0.0.1:3000", host_header: "backend\\r\\nX-Injected: yes"}\nclient_ip: {forward_mode: custom, custom_header: "X-Client\\r\\nX-Injected: yes"}\nprotection:\n  request_limits: {allowed_methods: [GET, "BAD METHOD"]}\n  waf: {custom_rules: [{id: h, name: h, target: !header "X Bad", pattern: x}]}\n`,
    'frame.yaml': `hostnames: [f.test]\norigin: {url: "http://127.0.0.1:3000", host_header: "backend:99999"}\nclient_ip: {forward_mode: custom, custom_header: Content-Length}\n`,
    'space.yaml': `hostnames: [s.test]\norigin: {url: "http://127.0.0.1:3000", host_header: "a b"}\nclient_ip: {custom_header: "X Bad"}\n`,
  });
  const text = problems(bad);
  assert.match(text, /inject\.yaml[^]*\/origin\/host_header: must be host or host:port/);
  assert.match(text, /inject\.yaml[^]*\/client_ip\/custom_header: must be a header name/);
  assert.match(text, /\/protection\/request_limits\/allowed_methods\/1: must be a method token/);
  assert.match(text, /\/protection\/waf\/custom_rules\/0\/target: must name a header/);
  assert.match(text, /frame\.yaml[^]*\/origin\/host_header: has a port above 65535/);
  assert.match(text, /frame\.yaml[^]*\/client_ip\/custom_header: must not be Content-Length/);
  assert.match(text, /space\.yaml[^]*\/origin\/host_header: must be host or host:port[^]*\/client_ip\/custom_header: must be a header name/);
  for (const name of ['Transfer-Encoding', 'host', 'Connection', 'keep-alive', 'Upgrade', 'TE', 'Trailer', 'Proxy-Connection', 'Expect']) {
    assert.match(headerNameProblem(name) ?? '', /frames, routes or manages/, name);
  }
  assert.equal(headerNameProblem('X-Client-IP'), undefined);
  for (const ok of ['backend', 'backend.internal:8080', 'my_service', '10.0.0.5:80', '[2001:db8::1]:443', 'shop.example.']) assert.equal(hostValueProblem(ok), undefined, ok);
  const good = loadRoot({ 'ok.yaml': `hostnames: [o.test]\norigin: {url: "http://127.0.0.1:3000", host_header: "backend.internal:8080"}\nclient_ip: {forward_mode: custom, custom_header: X-Client-IP}\nprotection: {request_limits: {allowed_methods: [GET, PROPFIND]}}\n` });
  assert.deepEqual(good.errors, []);
});

test('numbers that size memory or feed time arithmetic have maxima, named by their field', () => {
  const files = loadRoot(
    {
      'huge.yaml': `hostnames: [h.test]\n${ORIGIN}tls: {hsts_max_age: 99999999999}\nprotection:\n  rate_limit: {per_ip: {requests: 99999999999, window_secs: 99999999}, ban_duration_secs: 999999, ban_after_violations: 99999999}\n  request_limits: {max_uri_bytes: 99999999, max_header_bytes: 99999999, body_inspect_bytes: 99999999}\n  challenge: {ttl_secs: 99999999999999, difficulty: 65}\n  auto_mitigation: {duration_secs: 999999}\nwebsockets: {idle_timeout_secs: 99999999, max_lifetime_secs: 99999999}\n`,
    },
    'admin:\n  tokens:\n    - {name: ops, token: 0123456789abcdef0123}\nevents: {recent_buffer: 1000000000000, channel_capacity: 99999999, aggregate_retention_hours: 99999}\n',
  );
  const text = problems(files);
  for (const field of ['recent_buffer', 'channel_capacity', 'aggregate_retention_hours']) assert.match(text, new RegExp(`/events/${field}: must be at most`), field);
  for (const field of [
    '/tls/hsts_max_age',
    '/protection/rate_limit/per_ip/requests',
    '/protection/rate_limit/per_ip/window_secs',
    '/protection/rate_limit/ban_duration_secs',
    '/protection/rate_limit/ban_after_violations',
    '/protection/request_limits/max_uri_bytes',
    '/protection/request_limits/max_header_bytes',
    '/protection/request_limits/body_inspect_bytes',
    '/protection/challenge/ttl_secs',
    '/protection/challenge/difficulty',
    '/protection/auto_mitigation/duration_secs',
    '/websockets/idle_timeout_secs',
    '/websockets/max_lifetime_secs',
  ]) {
    assert.match(text, new RegExp(`${field}: must be at most`), field);
  }
});

test('admin tokens: one token listed twice, or a token with whitespace, is a problem', () => {
  const files = loadRoot(
    {},
    'admin:\n  tokens:\n    - {name: a, token: 0123456789abcdef0123, role: admin}\n    - {name: b, token: 0123456789abcdef0123, role: readonly}\n    - {name: c, token: "                "}\n    - {name: d, token: "0123456789 abcdef"}\n',
  );
  const text = problems(files);
  assert.match(text, /\/admin\/tokens\/1\/token: is the same token as \/admin\/tokens\/0\/token/);
  assert.match(text, /\/admin\/tokens\/2\/token: must not contain whitespace/);
  assert.match(text, /\/admin\/tokens\/3\/token: must not contain whitespace/);
  assert.doesNotMatch(text, /^ *\/admin\/tokens\/0\//m, 'the first of two equal tokens is not the problem');
});

test('listen addresses: one address serving two listeners is a problem naming both, whatever its spelling', () => {
  const tokens = 'admin:\n  listen: "[::ffff:127.0.0.1]:8080"\n  tokens:\n    - {name: ops, token: 0123456789abcdef0123}\n';
  const text = problems(loadRoot({}, `listen_http: ["127.0.0.1:8080", "0.0.0.0:80"]\nlisten_https: ["0.0.0.0:80", "0.0.0.0:443"]\n${tokens}`));
  assert.match(text, /\/listen_https\/0: is the same address as \/listen_http\/1/);
  assert.match(text, /\/admin\/listen: is the same address as \/listen_http\/0/);
  assert.doesNotMatch(text, /listen_https\/1|listen_http\/[01]:/, 'the first listener of an address and distinct ones are fine');
  assert.equal(problems(loadRoot({}, `listen_http: ["127.0.0.1:80"]\nlisten_https: ["127.0.0.1:443"]\n${tokens}`)), '');
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HeaderTarget, loadProxyFiles, originUrlProblem, patternProblem } from './config.ts';

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
  assert.match(files.errors[0]?.message ?? '', /\/tls\/cert_path: cannot use this certificate and key: .*PEM/);
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

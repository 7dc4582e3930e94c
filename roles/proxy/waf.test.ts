import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import type { ProxySiteConfig } from '../../src/contracts/types.ts';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { brotliCompressSync, deflateRawSync, deflateSync, gzipSync } from 'node:zlib';
import { checkBody, CODING_RULE, decodeBody } from './body-inspect.ts';
import { HeaderTarget, loadProxyFiles, patternProblem } from './config.ts';
import type { RequestContext } from './request-context.ts';
import type { Verdict } from './verdict.ts';
import { createWafBodyCheck, createWafCheck, isTextLike } from './waf.ts';
import { FAMILIES, HEADER_RCE, SCANNER_UA } from './waf-patterns.ts';

type Protection = ProxySiteConfig['protection'];
type Waf = Protection['waf'];

const ALL_OFF: Waf = { sqli: false, xss: false, path_traversal: false, rce: false, scanner_block: false, bad_bot: false, inspect_body: true, custom_rules: [] };

function protection(waf: Partial<Waf>): Protection {
  return { waf: { ...ALL_OFF, ...waf }, request_limits: { body_inspect_bytes: 65_536 } } as unknown as Protection;
}

function ctxOf(target: string, headers: Record<string, string> = {}, method = 'GET'): RequestContext {
  const q = target.indexOf('?');
  const req = { method, url: target, headers, rawHeaders: Object.entries(headers).flat() } as unknown as IncomingMessage;
  return { req, target, path: q === -1 ? target : target.slice(0, q), rule: null } as unknown as RequestContext;
}

function ruleOf(v: Verdict): string | null {
  return v.kind === 'allow' ? null : (v as { rule: string }).rule;
}

const SAMPLES: Record<'sqli' | 'xss' | 'path_traversal' | 'rce', string> = {
  sqli: "/item?id=1' or '1'='1",
  xss: '/search?q=%3Cscript%3Ealert(1)%3C/script%3E',
  path_traversal: '/download?file=../../etc/passwd',
  rce: '/ping?host=127.0.0.1;cat%20/etc/passwd',
};

test('each family alone: its payload is blocked with its rule id, the others pass', () => {
  for (const family of Object.keys(SAMPLES) as (keyof typeof SAMPLES)[]) {
    const check = createWafCheck(protection({ [family]: true }));
    assert.ok(check);
    for (const [other, target] of Object.entries(SAMPLES)) {
      const v = check(ctxOf(target));
      if (other === family) {
        assert.equal(v.kind, 'deny', `${family} on ${target}`);
        assert.equal((v as { status: number }).status, 403);
        assert.equal(ruleOf(v), family);
      } else assert.equal(ruleOf(v), null, `${family} must not fire on the ${other} sample`);
    }
  }
});

test('nothing on: no check at all; scanner_block alone only looks at the user agent', () => {
  assert.equal(createWafCheck(protection({})), undefined);
  const check = createWafCheck(protection({ scanner_block: true }));
  assert.ok(check);
  assert.equal(ruleOf(check(ctxOf('/', { 'user-agent': 'sqlmap/1.7' }))), 'scanner');
  assert.equal(ruleOf(check(ctxOf(SAMPLES.sqli, { 'user-agent': 'Mozilla/5.0' }))), null);
});

test('input is percent-decoded once and matched case-insensitively; double encoding evades', () => {
  const check = createWafCheck(protection({ xss: true, sqli: true }));
  assert.ok(check);
  assert.equal(ruleOf(check(ctxOf('/s?q=%3CSCRIPT%3E'))), 'xss');
  assert.equal(ruleOf(check(ctxOf('/s?q=%253Cscript%253E'))), null, 'spec/3 §2.5: double-encoded payloads evade');
  assert.equal(ruleOf(check(ctxOf('/s?q=1+UnIoN+SeLeCt+2'))), 'sqli', '+ is a space in the query');
});

test('remembered family verdicts: repeats, sites with other families, long targets and a full memo', () => {
  const sqliOnly = createWafCheck(protection({ sqli: true }));
  const xssOnly = createWafCheck(protection({ xss: true }));
  const both = createWafCheck(protection({ sqli: true, xss: true }));
  assert.ok(sqliOnly && xssOnly && both);
  for (let round = 0; round < 3; round++) {
    assert.equal(ruleOf(sqliOnly(ctxOf(SAMPLES.sqli))), 'sqli');
    assert.equal(ruleOf(xssOnly(ctxOf(SAMPLES.sqli))), null, 'a verdict is remembered per set of families');
    assert.equal(ruleOf(xssOnly(ctxOf(SAMPLES.xss))), 'xss');
    assert.equal(ruleOf(sqliOnly(ctxOf(SAMPLES.xss))), null);
    assert.equal(ruleOf(both(ctxOf(SAMPLES.xss))), 'xss');
    assert.equal(ruleOf(both(ctxOf('/index.html'))), null);
  }
  const long = `/search?pad=${'a'.repeat(300)}&q=%3Cscript%3E`;
  assert.equal(ruleOf(both(ctxOf(long))), 'xss');
  assert.equal(ruleOf(both(ctxOf(long))), 'xss');
  // More distinct targets than a memo holds: it starts over and every answer stays right.
  for (let i = 0; i < 2_500; i++) {
    assert.equal(ruleOf(both(ctxOf(`/p/${i}`))), null);
    if (i % 500 === 0) assert.equal(ruleOf(both(ctxOf(`/p/${i}?id=1' or '1'='1`))), 'sqli');
  }
});

test('custom rules: every target, header targets in both forms, actions block / challenge / log', () => {
  const rules: Waf['custom_rules'] = [
    { id: 'log-ua', name: 'watch curl', enabled: true, target: 'user_agent', pattern: 'curl', action: 'log' },
    { id: 'uri', name: 'old admin', enabled: true, target: 'uri', pattern: '^/old-admin', action: 'block' },
    { id: 'query', name: 'debug flag', enabled: true, target: 'query', pattern: '(^|&)debug=1', action: 'challenge' },
    { id: 'method', name: 'no trace', enabled: true, target: 'method', pattern: '^trace$', action: 'block' },
    { id: 'hdr', name: 'bad tenant', enabled: true, target: { header: 'X-Tenant' }, pattern: 'evil\\d+', action: 'block' },
    { id: 'ref', name: 'spam referer', enabled: true, target: new HeaderTarget('Referer'), pattern: 'casino', action: 'block' },
    { id: 'off', name: 'disabled', enabled: false, target: 'uri', pattern: '.', action: 'block' },
  ];
  const check = createWafCheck(protection({ custom_rules: rules }));
  assert.ok(check);
  assert.equal(ruleOf(check(ctxOf('/OLD-ADMIN/x'))), 'uri');
  assert.equal(check(ctxOf('/x?a=2&debug=1')).kind, 'challenge');
  assert.equal(ruleOf(check(ctxOf('/x?debug=1'))), 'query');
  assert.equal(ruleOf(check(ctxOf('/x', {}, 'TRACE'))), 'method');
  assert.equal(ruleOf(check(ctxOf('/x', { 'x-tenant': 'EVIL42' }))), 'hdr');
  assert.equal(ruleOf(check(ctxOf('/x', { referer: 'https://best-Casino.example/' }))), 'ref', 'the YAML !header form');
  const logged = ctxOf('/x', { 'user-agent': 'curl/8.0' });
  assert.equal(check(logged).kind, 'allow', 'log rules let the request through');
  assert.equal(logged.rule, 'log-ua', '…and record their id for telemetry');
  assert.equal(ruleOf(check(ctxOf('/x'))), null);
});

test('a block anywhere beats a custom challenge, so clearance never lets a payload through', () => {
  const check = createWafCheck(protection({ sqli: true, custom_rules: [{ id: 'c', name: 'c', enabled: true, target: 'uri', pattern: 'item', action: 'challenge' }] }));
  assert.ok(check);
  assert.equal(ruleOf(check(ctxOf(SAMPLES.sqli))), 'sqli');
  assert.equal(check(ctxOf('/item?id=2')).kind, 'challenge');
});

test('body phase: text-like types only, form decoding, families and body rules, body_inspect_bytes cap', () => {
  assert.ok(isTextLike('application/x-www-form-urlencoded'));
  assert.ok(isTextLike('application/json; charset=utf-8'));
  assert.ok(isTextLike('text/plain'));
  assert.ok(isTextLike('application/vnd.api+json'));
  assert.ok(isTextLike('application/xml'));
  assert.ok(!isTextLike('multipart/form-data; boundary=x'));
  assert.ok(!isTextLike('application/octet-stream'));
  assert.ok(!isTextLike(undefined));
  assert.equal(createWafBodyCheck(protection({ sqli: true, inspect_body: false })), undefined);
  const body = createWafBodyCheck({
    ...protection({ sqli: true, custom_rules: [{ id: 'b', name: 'b', enabled: true, target: 'body', pattern: 'forbidden-word', action: 'block' }] }),
    request_limits: { body_inspect_bytes: 100 },
  } as unknown as Protection);
  assert.ok(body);
  assert.equal(body.limit, 100);
  const form = ctxOf('/login', { 'content-type': 'application/x-www-form-urlencoded', 'content-length': '10' }, 'POST');
  assert.ok(body.wants(form.req));
  assert.ok(!body.wants(ctxOf('/x', { 'content-type': 'text/plain' }, 'POST').req), 'no body, nothing to read');
  assert.equal(ruleOf(body.check(form, Buffer.from('user=admin%27+or+%271%27%3D%271'))), 'sqli');
  assert.equal(ruleOf(body.check(form, Buffer.from('note=FORBIDDEN-word'))), 'b');
  // `+` is a space next to multi-byte UTF-8 text, and the bytes that go on to the origin keep their `+`.
  const sent = Buffer.from("café+crème=1'+or+'1'='1");
  assert.equal(ruleOf(body.check(form, sent)), 'sqli');
  assert.equal(sent.toString(), "café+crème=1'+or+'1'='1");
  assert.equal(ruleOf(body.check(form, Buffer.from('note=caf%C3%A9+cr%C3%A8me+br%C3%BBl%C3%A9e'))), null);
  assert.equal(ruleOf(body.check(form, Buffer.from(`pad=${'x'.repeat(100)}&user=admin' or '1'='1`))), null, 'only the first body_inspect_bytes are read');
});

test('coded bodies: decoded for the check, at most body_inspect_bytes of output, refused when unreadable', () => {
  const text = Buffer.from("user=admin%27+or+%271%27%3D%271&note=hello");
  for (const [coding, coded] of [
    ['gzip', gzipSync(text)],
    ['X-Gzip', gzipSync(text)],
    ['deflate', deflateSync(text)],
    ['br', brotliCompressSync(text)],
    ['gzip, br', brotliCompressSync(gzipSync(text))],
    ['identity, gzip', gzipSync(text)],
    ['identity', text],
  ] as const) {
    assert.deepEqual(decodeBody(coded, coding, 1000), text, coding);
  }
  // Only the start of a body is read: a cut stream decodes as far as it goes.
  const long = Buffer.from('a'.repeat(5000) + 'b'.repeat(5000));
  const cut = decodeBody(gzipSync(long).subarray(0, 30), 'gzip', 100_000) as Buffer;
  assert.ok(cut.length > 0 && long.subarray(0, cut.length).equals(cut));
  // A zip bomb yields the cap and no more, as fast as an ordinary body; the output of the input
  // byte that crosses the cap is left out (a deflate byte decodes to at most 1,032 bytes).
  const bomb = Buffer.concat([Buffer.from('<script>'), Buffer.alloc(50_000_000, 'a')]);
  const [gzBomb, brBomb] = [gzipSync(bomb), brotliCompressSync(bomb)];
  const big = Buffer.from(Array.from({ length: 20_000 }, (_, i) => `word${i} `).join(''));
  const [dfBig, brBig] = [deflateSync(big), brotliCompressSync(big)];
  let t = performance.now();
  const out = decodeBody(gzBomb, 'gzip', 4096) as Buffer;
  assert.ok(performance.now() - t < 100, `gzip bomb: ${performance.now() - t} ms`);
  assert.ok(out.length > 4096 - 1032 && out.length <= 4096, `gzip bomb: ${out.length}`);
  assert.ok(bomb.subarray(0, out.length).equals(out));
  assert.ok(big.subarray(0, 4000).equals((decodeBody(dfBig, 'deflate', 4096) as Buffer).subarray(0, 4000)), 'an ordinary body past the cap');
  // br decodes its whole window before its first byte comes out, so what decodes past the cap is
  // refused after one decode instead of searched.
  t = performance.now();
  assert.equal(decodeBody(brBomb, 'br', 4096), undefined);
  assert.equal(decodeBody(brBig, 'br', 4096), undefined);
  assert.ok(performance.now() - t < 200, `br: ${performance.now() - t} ms`);
  // Unknown, corrupt, raw deflate (not the zlib format RFC 9110 names), or nested three deep.
  for (const [coding, coded] of [
    ['compress', text],
    ['zstd', text],
    ['gzip', Buffer.from('not gzip at all')],
    ['br', Buffer.from('not brotli at all')],
    ['deflate', deflateRawSync(text)],
    ['gzip, gzip, gzip', gzipSync(gzipSync(gzipSync(text)))],
  ] as const) {
    assert.equal(decodeBody(coded, coding, 1000), undefined, coding);
  }
  const body = createWafBodyCheck(protection({ sqli: true }));
  assert.ok(body);
  const post = (headers: Record<string, string>): RequestContext => ({ ...ctxOf('/login', { 'content-type': 'application/x-www-form-urlencoded', ...headers }, 'POST'), bytesIn: 0 }) as RequestContext;
  const prefix = (b: Buffer): { chunks: Buffer[]; bytes: number; ended: boolean } => ({ chunks: [b], bytes: b.length, ended: true });
  assert.equal(ruleOf(checkBody(post({ 'content-encoding': 'gzip' }), body, prefix(gzipSync(text))).verdict), 'sqli');
  const refused = checkBody(post({ 'content-encoding': 'gzip' }), body, prefix(Buffer.from('garbage')));
  assert.deepEqual([(refused.verdict as { status: number }).status, ruleOf(refused.verdict)], [400, CODING_RULE]);
  assert.equal(ruleOf(checkBody(post({}), body, prefix(Buffer.from('note=hello'))).verdict), null);
});

test('built-in families stay fast on large adversarial inputs (no catastrophic backtracking)', () => {
  const units = [' ', "'", "' or ", '1 ', '<a ', '<a/', '" ', 'select ', '/*', '../', ';', '&&', '$(', '${', '{{', '`', 'href=', 'javascript:', 'style=', 'char(1,', ',', '\n', '%', 'sleep', 'and sleep', '(select', '= select', 'onload=', '" onload=', '<a onclick=', 'etc', '/etc', '=/', 'windows/', 'href= javascript', 'text/html'];
  for (const unit of units) {
    const input = `${unit.repeat(Math.ceil(65_536 / unit.length))}\u0001`;
    const t = performance.now();
    for (const f of Object.values(FAMILIES)) {
      f.url.test(input);
      f.body.test(input);
    }
    HEADER_RCE.test(input);
    SCANNER_UA.test(input);
    const ms = performance.now() - t;
    assert.ok(ms < 500, `${JSON.stringify(unit)} x 64 KiB took ${ms.toFixed(0)} ms`);
  }
});

test('custom patterns: the loader refuses what the linear engine cannot run and accepts evil-looking ones it runs in linear time', () => {
  assert.match(patternProblem('(?=x)') ?? '', /lookaround/);
  assert.match(patternProblem('(a)\\1') ?? '', /backreference/);
  assert.match(patternProblem('\\p{L}+') ?? '', /not supported/);
  assert.match(patternProblem('(a{500}){500}') ?? '', /too large/);
  assert.equal(patternProblem('(a+)+$'), undefined);
  const check = createWafCheck(protection({ custom_rules: [{ id: 'evil', name: 'evil', enabled: true, target: 'uri', pattern: '(a+)+$', action: 'block' }] }));
  assert.ok(check);
  const t = performance.now();
  assert.equal(ruleOf(check(ctxOf(`/${'a'.repeat(8000)}!`))), null);
  assert.ok(performance.now() - t < 500);
});

test('YAML header targets: the !header tag loads, the map form and an invalid pattern fail the whole file', () => {
  const root = mkdtempSync(join(tmpdir(), 'hk-proxy-waf-'));
  mkdirSync(join(root, 'sites.d'));
  writeFileSync(join(root, 'config.yaml'), 'admin:\n  tokens:\n    - {name: ops, token: 0123456789abcdef0123}\n');
  const site = (name: string, rule: string): void =>
    writeFileSync(join(root, 'sites.d', `${name}.yaml`), `hostnames: [${name}.example]\norigin: {url: "http://127.0.0.1:3000"}\nprotection:\n  waf:\n    custom_rules:\n      - ${rule}\n`);
  site('tag', '{id: t, name: t, target: !header X-Tenant, pattern: evil}');
  site('map', '{id: m, name: m, target: {header: X-Tenant}, pattern: evil}');
  site('regex', '{id: r, name: r, target: uri, pattern: "(?<=admin)x"}');
  const files = loadProxyFiles(root);
  assert.deepEqual(files.sites.map((s) => s.config.hostnames[0]), ['tag.example']);
  const text = files.errors.map((e) => e.message).join('\n');
  assert.match(text, /custom_rules\/0\/target.*!header/);
  assert.match(text, /custom_rules\/0\/pattern.*lookaround/);
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import type { RequestContext } from './request-context.ts';
import { botScore, createBotCheck, isGoodBot, type BotConfig } from './bot-score.ts';

const CHROME = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36';
const BROWSER = { 'user-agent': CHROME, accept: 'text/html,*/*;q=0.8', 'accept-language': 'en-US,en;q=0.9', 'accept-encoding': 'gzip, deflate, br' };
const DEFAULTS: BotConfig = { enabled: true, challenge_score: 50, block_score: 80, allow_good_bots: true };

function reqOf(headers: Record<string, string>, version = '1.1'): IncomingMessage {
  const [major, minor] = version.split('.').map(Number);
  return { headers, httpVersionMajor: major, httpVersionMinor: minor } as unknown as IncomingMessage;
}

function ctxOf(headers: Record<string, string>, version?: string): RequestContext {
  return { req: reqOf(headers, version) } as unknown as RequestContext;
}

test('scores: browsers 0, HTTP libraries at the default challenge score, bare HTTP/1.0 blocked', () => {
  const cases: [string, Record<string, string>, string, number][] = [
    ['a full browser', BROWSER, '1.1', 0],
    ['a browser over HTTP/1.0', BROWSER, '1.0', 20],
    ['curl', { 'user-agent': 'curl/8.5.0', accept: '*/*' }, '1.1', 55],
    ['python-requests', { 'user-agent': 'python-requests/2.31.0', accept: '*/*', 'accept-encoding': 'gzip, deflate' }, '1.1', 50],
    ['Go', { 'user-agent': 'Go-http-client/1.1', 'accept-encoding': 'gzip' }, '1.1', 65],
    ['no headers at all', {}, '1.1', 75],
    ['no headers at all over HTTP/1.0', {}, '1.0', 95],
    ['headless Chrome with browser headers', { ...BROWSER, 'user-agent': CHROME.replace('Chrome', 'HeadlessChrome') }, '1.1', 50],
    ['a spoofed browser UA without browser headers', { 'user-agent': CHROME, accept: '*/*' }, '1.1', 35],
    ['an odd user agent', { ...BROWSER, 'user-agent': 'x' }, '1.1', 25],
    ['an unknown crawler', { 'user-agent': 'SomeCrawler/1.0 (+https://crawl.example)', accept: '*/*', 'accept-encoding': 'gzip' }, '1.1', 45],
    ['a WebSocket handshake from a browser (no Accept)', { 'user-agent': CHROME, upgrade: 'websocket', 'accept-language': 'en', 'accept-encoding': 'gzip' }, '1.1', 0],
  ];
  for (const [what, headers, version, want] of cases) assert.equal(botScore(reqOf(headers, version)), want, what);
});

test('thresholds: challenge at challenge_score, 403 at block_score, rule bot', () => {
  const check = createBotCheck(true, DEFAULTS);
  assert.ok(check);
  assert.equal(check(ctxOf(BROWSER)).kind, 'allow');
  assert.deepEqual(check(ctxOf({ 'user-agent': 'curl/8.5.0', accept: '*/*' })), { kind: 'challenge', rule: 'bot' });
  const blocked = check(ctxOf({}, '1.0'));
  assert.equal(blocked.kind, 'deny');
  assert.equal((blocked as { status: number; rule: string }).status, 403);
  assert.equal((blocked as { rule: string }).rule, 'bot');
  const strict = createBotCheck(true, { ...DEFAULTS, challenge_score: 10, block_score: 20 });
  assert.equal(strict?.(ctxOf(BROWSER, '1.0')).kind, 'deny', 'a score equal to block_score blocks');
});

test('good crawlers skip the bot rules only while allow_good_bots is on', () => {
  const googlebot = { 'user-agent': 'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)' };
  assert.ok(isGoodBot(googlebot['user-agent']));
  assert.ok(isGoodBot('Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)'));
  assert.ok(!isGoodBot('SomeCrawler/1.0'));
  assert.equal(createBotCheck(true, DEFAULTS)?.(ctxOf(googlebot, '1.0')).kind, 'allow');
  assert.notEqual(createBotCheck(true, { ...DEFAULTS, allow_good_bots: false })?.(ctxOf(googlebot, '1.0')).kind, 'allow');
});

test('waf.bad_bot and bot.enabled both gate the score', () => {
  assert.equal(createBotCheck(false, DEFAULTS), undefined);
  assert.equal(createBotCheck(true, { ...DEFAULTS, enabled: false }), undefined);
  assert.ok(createBotCheck(true, DEFAULTS));
});

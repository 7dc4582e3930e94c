/**
 * The bot score (spec/3 §2.5 `bot.*`, `waf.bad_bot`): 0-100, how unlike a browser a request
 * looks, from its headers alone. Browsers always send a User-Agent naming a browser, Accept,
 * Accept-Language and Accept-Encoding over HTTP/1.1 or later; scripts and tools skip some of
 * them. One user-agent signal counts (the first that applies, in the order of UA_SIGNALS), the
 * header signals add to it, and the sum is capped at 100. The weights are chosen so that with
 * the default thresholds (challenge 50, block 80) a full browser scores 0, a bare HTTP library
 * (curl, python-requests) is challenged, and a request with no headers at all over HTTP/1.0 is
 * blocked. docs/proxy.md lists them for operators.
 */
import type { RequestContext, ProxyRequest } from './request-context.ts';
import { memoizeString } from './string-memo.ts';
import { ALLOW, deny, type Verdict } from './verdict.ts';

/** Rule id of bot-score verdicts (telemetry). */
export const BOT_RULE = 'bot';

/** The points of each signal; exported for the documentation test and unit tests. */
export const BOT_WEIGHTS = {
  noUserAgent: 40,
  headless: 50,
  tool: 35,
  unknownCrawler: 30,
  oddUserAgent: 25,
  noAccept: 15,
  noAcceptLanguage: 15,
  noAcceptEncoding: 5,
  http10: 20,
  browserWithoutBrowserHeaders: 15,
} as const;

// Automated browsers say so in their user agent.
const HEADLESS = /headlesschrome|phantomjs|slimerjs|selenium|webdriver|puppeteer|playwright|electron\/|cypress/i;
// HTTP libraries and command-line tools, as they announce themselves by default.
const TOOLS =
  /^(?:curl|wget|python-requests|python-urllib|python-httpx|aiohttp|httpx|go-http-client|java\/|apache-httpclient|okhttp|libwww-perl|lwp-|httpie|powershell|ruby|php\/|guzzlehttp|node-fetch|axios|undici|got |scrapy|mechanize|winhttp|rest-client|postmanruntime|insomnia)|\b(?:scrapy|python-requests|go-http-client|libwww-perl)\b/i;
// Crawler words in a user agent that is not a known good one.
const CRAWLER = /bot\b|crawl|spider|scrape|slurp|fetcher|archiver/i;
// Search engines and link-preview fetchers that site owners want (user-agent match only).
const GOOD_BOTS =
  /googlebot|google-inspectiontool|storebot-google|adsbot-google|mediapartners-google|googleother|bingbot|bingpreview|msnbot|adidxbot|duckduckbot|applebot|yandex(?:bot|images|mobilebot)|baiduspider|slurp|facebookexternalhit|facebot|twitterbot|linkedinbot|pinterestbot|slackbot|discordbot|telegrambot|whatsapp|qwantify|ecosia|petalbot|seznambot|sogou/i;
// A product token (`name/version`), which every real user agent has.
const PRODUCT = /[a-z][\w.-]*\/\d/i;

export interface BotConfig {
  enabled: boolean;
  challenge_score: number;
  block_score: number;
  allow_good_bots: boolean;
}

/** Whether `ua` names a crawler site owners want (Googlebot, Bingbot, …). */
export const isGoodBot = memoizeString((ua: string): boolean => GOOD_BOTS.test(ua));

/** What the user agent alone says: its signal's points, and whether it claims a browser. */
const uaSignals = memoizeString((ua: string): { points: number; claimsBrowser: boolean } => {
  let points = 0;
  if (ua === '') points = BOT_WEIGHTS.noUserAgent;
  else if (HEADLESS.test(ua)) points = BOT_WEIGHTS.headless;
  else if (TOOLS.test(ua)) points = BOT_WEIGHTS.tool;
  else if (CRAWLER.test(ua)) points = BOT_WEIGHTS.unknownCrawler;
  else if (ua.length < 10 || !PRODUCT.test(ua)) points = BOT_WEIGHTS.oddUserAgent;
  return { points, claimsBrowser: ua.startsWith('Mozilla/') && !/compatible;/i.test(ua) };
});

/** The request's score, 0-100; pure, runs once per request when bot scoring is on. */
export function botScore(req: ProxyRequest): number {
  const h = req.headers;
  const signals = uaSignals((h['user-agent'] ?? '').trim());
  let score = signals.points;
  // A WebSocket handshake from a browser has no Accept.
  if (h.accept === undefined && h.upgrade === undefined) score += BOT_WEIGHTS.noAccept;
  const noLanguage = h['accept-language'] === undefined;
  const noEncoding = h['accept-encoding'] === undefined;
  if (noLanguage) score += BOT_WEIGHTS.noAcceptLanguage;
  if (noEncoding) score += BOT_WEIGHTS.noAcceptEncoding;
  if (req.httpVersionMajor < 1 || (req.httpVersionMajor === 1 && req.httpVersionMinor === 0)) score += BOT_WEIGHTS.http10;
  // Claims to be a browser, yet lacks what every browser sends.
  if ((noLanguage || noEncoding) && signals.claimsBrowser) score += BOT_WEIGHTS.browserWithoutBrowserHeaders;
  return Math.min(100, score);
}

/**
 * The site's bot check for the waf phase, or undefined when scoring is off: `waf.bad_bot` (the
 * WAF's switch for its heuristic family) and `bot.enabled` (the bot section's) must both be on.
 * Scores at or above block_score get 403, at or above challenge_score the challenge verdict,
 * both with rule `bot`. Runs after the WAF's pattern rules.
 */
export function createBotCheck(badBot: boolean, cfg: BotConfig): ((ctx: RequestContext) => Verdict) | undefined {
  if (!badBot || !cfg.enabled) return undefined;
  const blocked = deny(403, BOT_RULE);
  const challenge: Verdict = Object.freeze({ kind: 'challenge', rule: BOT_RULE });
  const { challenge_score: challengeAt, block_score: blockAt, allow_good_bots: allowGood } = cfg;
  return function checkBot(ctx) {
    const req = ctx.req;
    if (allowGood) {
      const ua = req.headers['user-agent'];
      if (ua !== undefined && isGoodBot(ua)) return ALLOW;
    }
    const score = botScore(req);
    if (score >= blockAt) return blocked;
    if (score >= challengeAt) return challenge;
    return ALLOW;
  };
}

/**
 * The challenge phase and gate (spec/3 §2.5 `challenge`, "Challenge flow"; §4.1 the verify
 * endpoint). `challenge` verdicts of any phase (rate limits with action challenge, WAF custom
 * rules, bot score) go through the site's gate: with `mode: off` they degrade to a 403 block, a
 * client holding a valid `osc_clear` clearance skips them (deny verdicts, WAF blocks included,
 * are never skipped), anyone else gets the proof-of-work page. The challenge phase itself answers
 * `POST /__osc_challenge/verify` and, with `mode: on`, challenges every request without clearance.
 */
import { randomBytes } from 'node:crypto';
import type { Check } from './pipeline.ts';
import type { RequestContext, ProxyRequest } from './request-context.ts';
import { sendBody } from './responses.ts';
import { CLEARANCE_COOKIE, effectiveDifficulty, readCookie, type ChallengeTokens, type VerifyOutcome } from './challenge-tokens.ts';
import { challengeCsp, renderChallengePage, VERIFY_PATH } from './challenge-page.ts';
import { ALLOW, deny, type ChallengeVerdict, type Verdict } from './verdict.ts';

/** Rule ids of the challenge phase (telemetry). */
export const CHALLENGE_RULES = {
  /** The page served because mode is on. */
  on: 'challenge',
  /** A solution accepted: the clearance cookie was set. */
  passed: 'challenge.passed',
  /** A solution refused. */
  failed: 'challenge.failed',
} as const;

/**
 * The page's status. 403 as other challenge pages (Cloudflare's) use: the content was not served,
 * clients that retry on 429 would loop without solving, and 200 would let caches and crawlers
 * take the page for the content.
 */
export const CHALLENGE_STATUS = 403;
// A `{seed, nonce}` body is under 150 bytes.
const MAX_VERIFY_BODY = 1024;
const VERIFY_TIMEOUT_MS = 10_000;

export interface ChallengeSettings {
  mode: 'off' | 'auto' | 'on';
  difficulty: number;
  ttl_secs: number;
}

/**
 * Decides what a `challenge` verdict becomes: a verdict to answer with, or undefined when the
 * client has clearance and the pipeline goes on with its next check.
 */
export type ChallengeGate = (ctx: RequestContext, verdict: ChallengeVerdict) => Verdict | undefined;

interface SiteChallenge {
  siteId: string;
  settings: Readonly<ChallengeSettings>;
  tokens: ChallengeTokens;
}

function wantsHtml(req: ProxyRequest): boolean {
  const accept = req.headers.accept;
  return accept !== undefined && accept.toLowerCase().includes('text/html');
}

/** Clearance of the request's client, computed once per request (gate and phase may both ask). */
function clearanceTest(site: SiteChallenge): (ctx: RequestContext) => boolean {
  let lastCtx: RequestContext | undefined;
  let lastResult = false;
  return function isCleared(ctx) {
    if (ctx === lastCtx) return lastResult;
    const value = readCookie(ctx.req.headers.cookie, CLEARANCE_COOKIE);
    lastCtx = ctx;
    lastResult = value !== undefined && site.tokens.isCleared(site.siteId, ctx.clientIp, value);
    return lastResult;
  };
}

/**
 * The page, or for clients that do not accept HTML (API clients, WebSocket handshakes) a plain
 * 403 saying a browser is needed; either way with `X-Osc-Challenge: required`.
 */
function servePage(site: SiteChallenge, ctx: RequestContext, rule: string): void {
  ctx.rule = rule;
  if (!wantsHtml(ctx.req)) {
    sendBody(ctx, CHALLENGE_STATUS, 'challenge required: open this address in a web browser\n', { 'x-osc-challenge': 'required' });
    return;
  }
  const cspNonce = randomBytes(16).toString('base64');
  const html = renderChallengePage({ seed: site.tokens.issueSeed(site.siteId), difficulty: effectiveDifficulty(site.settings.difficulty), cspNonce });
  sendBody(ctx, CHALLENGE_STATUS, html, {
    'content-type': 'text/html; charset=utf-8',
    'content-security-policy': challengeCsp(cspNonce),
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'x-osc-challenge': 'required',
  });
}

function answerVerify(site: SiteChallenge, ctx: RequestContext, outcome: VerifyOutcome): void {
  const json = { 'content-type': 'application/json' };
  if (outcome !== 'ok') {
    ctx.rule = CHALLENGE_RULES.failed;
    sendBody(ctx, 403, `${JSON.stringify({ ok: false, error: outcome })}\n`, json);
    return;
  }
  ctx.rule = CHALLENGE_RULES.passed;
  const ttl = site.settings.ttl_secs;
  const cookie = `${CLEARANCE_COOKIE}=${site.tokens.clearance(site.siteId, ctx.clientIp, ttl)}; Path=/; Max-Age=${ttl}; HttpOnly; SameSite=Lax${ctx.scheme === 'https' ? '; Secure' : ''}`;
  sendBody(ctx, 200, `${JSON.stringify({ ok: true, ttl_secs: ttl })}\n`, { ...json, 'set-cookie': cookie });
}

/** `POST /__osc_challenge/verify`: reads the small JSON body, checks the solution, sets the cookie. */
function verify(site: SiteChallenge, ctx: RequestContext): void {
  const { req } = ctx;
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > MAX_VERIFY_BODY) {
    ctx.rule = CHALLENGE_RULES.failed;
    sendBody(ctx, 413, '413 Payload Too Large\n');
    return;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  const timer = setTimeout(() => req.destroy(), VERIFY_TIMEOUT_MS);
  timer.unref();
  req.on('data', (chunk: Buffer) => {
    ctx.bytesIn += chunk.length;
    size += chunk.length;
    if (size > MAX_VERIFY_BODY) {
      clearTimeout(timer);
      req.removeAllListeners('data');
      ctx.rule = CHALLENGE_RULES.failed;
      sendBody(ctx, 413, '413 Payload Too Large\n');
      return;
    }
    chunks.push(chunk);
  });
  req.on('close', () => clearTimeout(timer));
  req.on('end', () => {
    clearTimeout(timer);
    if (size > MAX_VERIFY_BODY) return;
    let body: unknown;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      body = undefined;
    }
    const { seed, nonce } = typeof body === 'object' && body !== null ? (body as { seed?: unknown; nonce?: unknown }) : {};
    answerVerify(site, ctx, site.tokens.verify(site.siteId, seed, nonce, site.settings.difficulty));
  });
}

/** Per-site gate and phase check, compiled once per generation. */
export interface SiteChallengeChecks {
  gate: ChallengeGate;
  /** The challenge phase's check; undefined with mode off (the verify path is then the origin's). */
  check: Check | undefined;
}

/** Compiles the site's challenge gate and phase check; runs once per site and generation. */
export function createChallenge(siteId: string, settings: Readonly<ChallengeSettings>, tokens: ChallengeTokens): SiteChallengeChecks {
  const site: SiteChallenge = { siteId, settings, tokens };
  if (settings.mode === 'off') {
    // spec/3 §2.5: challenge verdicts degrade to blocks (rate limits degrade to 429 themselves).
    const blocks = new Map<string, Verdict>();
    return {
      gate(_ctx, v) {
        let b = blocks.get(v.rule);
        if (!b) blocks.set(v.rule, (b = deny(403, v.rule)));
        return b;
      },
      check: undefined,
    };
  }
  const isCleared = clearanceTest(site);
  const verifyVerdict: Verdict = Object.freeze({ kind: 'respond', rule: CHALLENGE_RULES.passed, respond: (ctx: RequestContext) => verify(site, ctx) });
  const verifyMethod = deny(405, CHALLENGE_RULES.failed, { allow: 'POST' });
  const pageVerdicts = new Map<string, Verdict>();
  const page = (rule: string): Verdict => {
    let v = pageVerdicts.get(rule);
    if (!v) pageVerdicts.set(rule, (v = Object.freeze({ kind: 'respond', rule, respond: (ctx: RequestContext) => servePage(site, ctx, rule) })));
    return v;
  };
  const onPage = page(CHALLENGE_RULES.on);
  const isVerify = (ctx: RequestContext): boolean => ctx.path === VERIFY_PATH;
  return {
    gate(ctx, v) {
      // Answering the challenge is never challenged; the verify phase check answers it.
      if (isVerify(ctx) || isCleared(ctx)) return undefined;
      return page(v.rule);
    },
    check: function challengePhase(ctx) {
      if (isVerify(ctx)) return ctx.req.method === 'POST' ? verifyVerdict : verifyMethod;
      if (settings.mode === 'on' && !isCleared(ctx)) return onPage;
      return ALLOW;
    },
  };
}

/**
 * The per-site request pipeline of DESIGN "The proxy's request pipeline", between routing and
 * forwarding. Phases run in the spec's fixed order; each phase may contribute one check per site;
 * the first non-allow verdict wins. Part 2 (bans, ACLs, connection and rate limits, WAF, bot
 * score, challenge) and the quota only add factories to CHECK_FACTORIES.
 */
import type { ProxyGlobalConfig, ProxySiteConfig } from '../../src/contracts/types.ts';
import { createSiteAcl } from './acl.ts';
import type { BanList } from './ban-list.ts';
import { createChallenge, type SiteChallengeChecks } from './challenge.ts';
import type { ChallengeTokens } from './challenge-tokens.ts';
import { createConnectionLimits } from './connection-limits.ts';
import type { ConnectionSlots } from './connection-slots.ts';
import { createHttpsRedirect } from './https-redirect.ts';
import { createQuotaCheck } from './quota-check.ts';
import type { QuotaCounters } from './quota-store.ts';
import { createBanCheck, createRateLimit, type RateCounters } from './rate-limit.ts';
import type { RateShaper } from './rate-shaper.ts';
import type { RequestContext } from './request-context.ts';
import { createRequestLimits } from './request-limits.ts';
import { createMitigationMeter, type Mitigation } from './mitigation.ts';
import { ALLOW, type Verdict } from './verdict.ts';
import { createWafBodyCheck, createWafCheck, type WafBodyCheck } from './waf.ts';
import { createBotCheck } from './bot-score.ts';

/** The phases between routing and forwarding, in the order they run. */
export const PHASES = ['ban_acl', 'tls_redirect', 'connections', 'rate_limit', 'request_limits', 'waf', 'challenge', 'quota'] as const;
export type Phase = (typeof PHASES)[number];

export type Check = (ctx: RequestContext) => Verdict;

/** What a check factory sees when a config generation is compiled. */
export interface PipelineInput {
  site: Readonly<ProxySiteConfig>;
  global: Readonly<ProxyGlobalConfig>;
  /**
   * State that outlives a generation (ban list, rate counters, quota store): part 2 adds it here
   * so a reload recompiles the rules but keeps the counts.
   */
  services: PipelineServices;
}

/** A reload hands the same object to every generation; part 2 adds its ban list and counters. */
export interface PipelineServices {
  /** Monthly byte counters (persisted in data_dir). */
  readonly quota: QuotaCounters;
  /** Send-rate token buckets. */
  readonly shaper: RateShaper;
  /** Active-connection slots: in-flight requests and live tunnels. */
  readonly slots: ConnectionSlots;
  /** Temporary bans (rate-limit offenders and the admin API's). */
  readonly bans: BanList;
  /** Fixed-window request counters of the rate_limit phase. */
  readonly rates: RateCounters;
  /** Site ids already told in the log whether transparent mode works or falls back to normal egress. */
  readonly transparentSaid: Set<string>;
  /** Challenge seeds and clearances (its secret is in data_dir; solved seeds are remembered). */
  readonly challenge: ChallengeTokens;
  /** Per-site request rates and running auto-mitigations. */
  readonly mitigation: Mitigation;
}

export interface CheckFactory {
  phase: Phase;
  /** Returns the site's check for this phase, or undefined when the phase has nothing to do for it. */
  create(input: PipelineInput): Check | undefined;
}

// The challenge gate and phase check of one compile share their per-request clearance memo.
const challenges = new WeakMap<PipelineInput, SiteChallengeChecks>();
function challengeOf(input: PipelineInput): SiteChallengeChecks {
  let c = challenges.get(input);
  if (!c) challenges.set(input, (c = createChallenge(input.site.id, input.site.protection.challenge, input.services.challenge)));
  return c;
}

/** Within a phase, factories run in this array's order (the ban check before the site ACL). */
export const CHECK_FACTORIES: readonly CheckFactory[] = [
  // Counts every request that reaches the site (banned ones too: they are part of a flood).
  { phase: 'ban_acl', create: ({ site, services }) => createMitigationMeter(services.mitigation.forSite(site.id, site.protection.auto_mitigation), site.protection.auto_mitigation.enabled) },
  { phase: 'ban_acl', create: ({ site, services }) => createBanCheck(site.id, services.bans) },
  { phase: 'ban_acl', create: ({ site }) => createSiteAcl(site.protection.acl) },
  { phase: 'tls_redirect', create: ({ site }) => createHttpsRedirect(site.tls) },
  {
    phase: 'connections',
    create: ({ site, services }) => createConnectionLimits({ siteId: site.id, perIp: site.protection.connections.per_ip, perSite: site.protection.connections.per_site, slots: services.slots }),
  },
  {
    phase: 'rate_limit',
    create: ({ site, services }) =>
      createRateLimit({
        siteId: site.id,
        config: site.protection.rate_limit,
        challengeMode: site.protection.challenge.mode,
        counters: services.rates,
        bans: services.bans,
        mitigation: services.mitigation.forSite(site.id, site.protection.auto_mitigation),
      }),
  },
  { phase: 'request_limits', create: ({ site }) => createRequestLimits(site.protection.request_limits) },
  // The WAF's pattern rules before the bot score: a payload is reported as what it is.
  { phase: 'waf', create: ({ site }) => createWafCheck(site.protection) },
  { phase: 'waf', create: ({ site }) => createBotCheck(site.protection.waf.bad_bot, site.protection.bot) },
  { phase: 'challenge', create: (input) => challengeOf(input).check },
  { phase: 'quota', create: ({ site, services }) => createQuotaCheck(site, services.quota) },
];

/**
 * Compiles one site's pipeline for a config generation. The returned closure runs once per routed
 * request and returns the first non-allow verdict, or ALLOW. A `challenge` verdict goes through
 * the site's challenge gate first: with clearance the next check runs instead.
 */
export function createSitePipeline(input: PipelineInput, factories: readonly CheckFactory[] = CHECK_FACTORIES): Check {
  const ordered = [...factories].sort((a, b) => PHASES.indexOf(a.phase) - PHASES.indexOf(b.phase));
  const checks: Check[] = [];
  for (const f of ordered) {
    const check = f.create(input);
    if (check) checks.push(check);
  }
  const gate = challengeOf(input).gate;
  return function runPipeline(ctx) {
    for (let i = 0; i < checks.length; i++) {
      const verdict = (checks[i] as Check)(ctx);
      if (verdict.kind === 'allow') continue;
      if (verdict.kind !== 'challenge') return verdict;
      const gated = gate(ctx, verdict);
      if (gated !== undefined) return gated;
    }
    return ALLOW;
  };
}

/**
 * The site's body phase (body-inspect.ts), or undefined when the WAF reads no bodies. Runs after
 * the pipeline allowed a request; its challenge verdicts go through the same gate, and with
 * clearance the request goes on (the WAF only challenges when nothing blocks).
 */
export function createSiteBodyPhase(input: PipelineInput): WafBodyCheck | undefined {
  const body = createWafBodyCheck(input.site.protection);
  if (!body) return undefined;
  const gate = challengeOf(input).gate;
  return {
    limit: body.limit,
    wants: body.wants,
    check(ctx, bytes) {
      const verdict = body.check(ctx, bytes);
      return verdict.kind === 'challenge' ? (gate(ctx, verdict) ?? ALLOW) : verdict;
    },
  };
}

/**
 * The WAF (spec/3 §2.5 `waf.*`): scanner user agents, the operators' custom rules and the
 * built-in pattern families, in that order, in the pipeline's waf phase (headers and target),
 * and again for the body in the body phase (body-inspect.ts) when `inspect_body` is on and the
 * body is text-like. Everything is compiled once per config generation; a request decodes its
 * target once, and only when some rule looks at it or its family verdict is not remembered.
 *
 * Verdicts: a family or scanner hit is 403 with the family's rule id (sqli, xss, path_traversal,
 * rce, scanner); a custom rule blocks (403), challenges, or logs (the request goes on with the
 * rule id recorded, so its hits show in rule_hits). A block anywhere beats a challenge.
 */
import type { ProxySiteConfig } from '../../src/contracts/types.ts';
import { compileLinear, type LinearRegex } from './linear-regex.ts';
import { decodeOnce } from './request-limits.ts';
import type { RequestContext, ProxyRequest } from './request-context.ts';
import { ALLOW, deny, type Verdict } from './verdict.ts';
import { memoizeString } from './string-memo.ts';
import { FAMILIES, HEADER_RCE, SCANNER_UA, type Family } from './waf-patterns.ts';

type Protection = ProxySiteConfig['protection'];
type WafConfig = Protection['waf'];
type CustomRule = WafConfig['custom_rules'][number];

/** Rule id of scanner user agents (the family ids are the family names). */
export const SCANNER_RULE = 'scanner';

const SCANNER = deny(403, SCANNER_RULE);
const NO_HIT: { block?: Verdict; challenge?: Verdict } = Object.freeze({});
const FAMILY_ORDER: readonly Family[] = ['sqli', 'xss', 'path_traversal', 'rce'];
const FAMILY_DENY: Readonly<Record<Family, Verdict>> = {
  sqli: deny(403, 'sqli'),
  xss: deny(403, 'xss'),
  path_traversal: deny(403, 'path_traversal'),
  rce: deny(403, 'rce'),
};

/** Form decoding: `+` is a space, then percent escapes, once. */
export function decodeForm(s: string): string {
  return decodeOnce(s.includes('+') ? s.replace(/\+/g, ' ') : s);
}

/**
 * The first `limit` bytes of a form body as decodeForm reads it. The `+`s are replaced in a copy
 * of the bytes (a byte loop; as a string replace, the spaces of a 1 KiB form cost more than all
 * four families' patterns) before the UTF-8 decoding, which is the same: no multi-byte UTF-8
 * sequence holds the byte of `+`.
 */
function formBodyText(body: Buffer, limit: number): string {
  const bytes = Buffer.from(body.subarray(0, limit));
  for (let i = 0; i < bytes.length; i++) if (bytes[i] === 0x2b) bytes[i] = 0x20;
  return decodeOnce(bytes.toString('utf8'));
}

/** A request target with its path percent-decoded once and its query form-decoded once. */
function decodedTarget(target: string): string {
  const q = target.indexOf('?');
  return q === -1 ? decodeOnce(target) : `${decodeOnce(target.slice(0, q))}?${decodeForm(target.slice(q + 1))}`;
}

// Targets up to this long have their family verdict remembered (longer ones are rare and are
// matched each time), so a memo holds at most 1,024 of them.
const MEMO_TARGET_CHARS = 256;
// The family verdict memos, one per set of enabled families (a bit per family): shared by every
// site with the same set, so many sites cost no more memory than one.
const FAMILY_MEMOS = new Map<number, (target: string) => Verdict | null>();

/**
 * The first enabled family that matches a request target, as a verdict (null: none). The same
 * targets recur in real traffic (pages, assets, API routes), so the verdict of a short target is
 * remembered; the patterns are fixed, so a remembered verdict is the one matching would give.
 */
function familyCheck(enabled: readonly Family[]): (target: string) => Verdict | null {
  const families = enabled.map((f) => ({ re: FAMILIES[f].url, verdict: FAMILY_DENY[f] }));
  const match = (target: string): Verdict | null => {
    const decoded = decodedTarget(target);
    for (const f of families) if (f.re.test(decoded)) return f.verdict;
    return null;
  };
  const mask = enabled.reduce((m, f) => m | (1 << FAMILY_ORDER.indexOf(f)), 0);
  let memo = FAMILY_MEMOS.get(mask);
  if (!memo) FAMILY_MEMOS.set(mask, (memo = memoizeString(match)));
  const remembered = memo;
  return (target) => (target.length <= MEMO_TARGET_CHARS ? remembered(target) : match(target));
}

/** The views a request offers to custom rules, each computed at most once. */
class RequestViews {
  private readonly ctx: RequestContext;
  private decodedTarget: string | undefined;
  private decodedQuery: string | undefined;
  private readonly lower = new Map<string, string>();

  constructor(ctx: RequestContext) {
    this.ctx = ctx;
  }

  /** The query string without `?`, form-decoded once. */
  query(): string {
    if (this.decodedQuery === undefined) {
      const { target, path } = this.ctx;
      this.decodedQuery = target.length > path.length ? decodeForm(target.slice(path.length + 1)) : '';
    }
    return this.decodedQuery;
  }

  /** Path and query decoded once (`+` stays in the path, is a space in the query). */
  target(): string {
    this.decodedTarget ??= decodedTarget(this.ctx.target);
    return this.decodedTarget;
  }

  /** A custom rule's input, lower-cased for the linear matcher; undefined when absent. */
  input(target: CustomRule['target']): string | undefined {
    const key = typeof target === 'string' ? target : `h:${target.header}`;
    let v = this.lower.get(key);
    if (v !== undefined) return v;
    const req = this.ctx.req;
    let raw: string | undefined;
    if (target === 'uri') raw = this.target();
    else if (target === 'query') raw = this.query();
    else if (target === 'method') raw = req.method;
    else if (target === 'user_agent') raw = headerValue(req, 'user-agent');
    else if (typeof target === 'object') raw = headerValue(req, target.header.toLowerCase());
    if (raw === undefined) return undefined;
    v = raw.toLowerCase();
    this.lower.set(key, v);
    return v;
  }
}

/** A header's value (repeated ones joined), decoded once; undefined when absent. */
function headerValue(req: ProxyRequest, name: string): string | undefined {
  const v = req.headers[name];
  if (v === undefined) return undefined;
  const s = Array.isArray(v) ? v.join(', ') : v;
  return s.includes('%') ? decodeOnce(s) : s;
}

/** Every header value, one per line (for Log4Shell lookups and shellshock anywhere). */
function headerValues(rawHeaders: readonly string[]): string {
  let s = '';
  for (let i = 1; i < rawHeaders.length; i += 2) s += `${rawHeaders[i] as string}\n`;
  return s;
}

/**
 * Whether the header values hold a lookup or function-definition payload (HEADER_RCE). Every
 * such payload has a `{`, so values without one (nearly all requests) skip the pattern.
 */
function headersCarryRce(rawHeaders: readonly string[]): boolean {
  let brace = false;
  for (let i = 1; i < rawHeaders.length && !brace; i += 2) brace = (rawHeaders[i] as string).includes('{');
  return brace && HEADER_RCE.test(headerValues(rawHeaders));
}

interface CompiledRule {
  readonly id: string;
  readonly target: CustomRule['target'];
  readonly re: LinearRegex;
  readonly action: CustomRule['action'];
  /** The verdict for block and challenge; undefined for log. */
  readonly verdict: Verdict | undefined;
}

function compileRules(rules: readonly CustomRule[]): CompiledRule[] {
  return rules
    .filter((r) => r.enabled)
    .map((r) => ({
      id: r.id,
      target: r.target,
      re: compileLinear(r.pattern),
      action: r.action,
      verdict: r.action === 'block' ? deny(403, r.id) : r.action === 'challenge' ? Object.freeze({ kind: 'challenge' as const, rule: r.id }) : undefined,
    }));
}

/**
 * Runs custom rules over their inputs in file order: the first block wins at once; a log hit
 * records its id (unless an earlier rule did) and matching goes on. The first challenge hit is
 * returned separately: the caller answers it only when no family blocks either, so a client
 * with challenge clearance never gets a blocked payload through.
 */
function runRules(rules: readonly CompiledRule[], ctx: RequestContext, inputOf: (r: CompiledRule) => string | undefined): { block?: Verdict; challenge?: Verdict } {
  let challenge: Verdict | undefined;
  for (const rule of rules) {
    if (rule.action === 'challenge' && challenge !== undefined) continue;
    const input = inputOf(rule);
    if (input === undefined || !rule.re.test(input)) continue;
    if (rule.action === 'block') return { block: rule.verdict as Verdict };
    if (rule.action === 'challenge') challenge = rule.verdict;
    else ctx.rule ??= rule.id;
  }
  return challenge ? { challenge } : {};
}

function enabledFamilies(waf: WafConfig): Family[] {
  return FAMILY_ORDER.filter((f) => waf[f]);
}

const isScanner = memoizeString((ua: string): boolean => SCANNER_UA.test(ua));

/**
 * The site's waf-phase check, or undefined when nothing is on. Runs after request limits, once
 * per request: scanner user agent, custom rules on the target and headers, then the families on
 * the decoded target (and the rce family's lookups on header values).
 */
export function createWafCheck(protection: Protection): ((ctx: RequestContext) => Verdict) | undefined {
  const waf = protection.waf;
  const rules = compileRules(waf.custom_rules.filter((r) => r.target !== 'body'));
  const enabled = enabledFamilies(waf);
  const families = enabled.length > 0 ? familyCheck(enabled) : undefined;
  const scanner = waf.scanner_block;
  const rceHeaders = waf.rce;
  if (!scanner && rules.length === 0 && !families) return undefined;

  return function checkWaf(ctx) {
    const req = ctx.req;
    if (scanner) {
      const ua = req.headers['user-agent'];
      if (ua !== undefined && isScanner(ua)) return SCANNER;
    }
    // Requests of sites without custom rules allocate nothing here.
    const views = rules.length > 0 ? new RequestViews(ctx) : undefined;
    const hit = views ? runRules(rules, ctx, (r) => views.input(r.target)) : NO_HIT;
    if (hit.block) return hit.block;
    if (families) {
      const verdict = families(ctx.target);
      if (verdict) return verdict;
      if (rceHeaders && headersCarryRce(req.rawHeaders)) return FAMILY_DENY.rce;
    }
    return hit.challenge ?? ALLOW;
  };
}

// Bodies the WAF reads: forms, text, JSON and XML (spec/3 §2.5 "urlencoded or text bodies").
const TEXT_LIKE = /^(?:text\/[^;]+|application\/(?:x-www-form-urlencoded|json|xml|[\w.+-]+\+(?:json|xml)))\s*(?:;|$)/i;

/** Whether a Content-Type names a body the WAF inspects. */
export function isTextLike(contentType: string | undefined): boolean {
  return contentType !== undefined && TEXT_LIKE.test(contentType);
}

/** The body phase of the WAF (see body-inspect.ts for how the bytes are read). */
export interface WafBodyCheck {
  /** At most this many bytes are buffered and inspected (body_inspect_bytes). */
  readonly limit: number;
  /** Whether this request's body is inspected: it has one and its type is text-like. */
  wants(req: ProxyRequest): boolean;
  /** Inspects the first `limit` bytes of the body. */
  check(ctx: RequestContext, body: Buffer): Verdict;
}

/**
 * The site's body check, or undefined when `inspect_body` is off or no family or body rule is on.
 * Runs after every header-phase check allowed the request, on at most body_inspect_bytes.
 */
export function createWafBodyCheck(protection: Protection): WafBodyCheck | undefined {
  const waf = protection.waf;
  const limit = protection.request_limits.body_inspect_bytes;
  if (!waf.inspect_body || limit <= 0) return undefined;
  const rules = compileRules(waf.custom_rules.filter((r) => r.target === 'body'));
  const families = enabledFamilies(waf).map((f) => ({ re: FAMILIES[f].body, verdict: FAMILY_DENY[f] }));
  if (rules.length === 0 && families.length === 0) return undefined;

  return {
    limit,
    wants(req) {
      const declared = req.headers['content-length'];
      const hasBody = req.headers['transfer-encoding'] !== undefined || (declared !== undefined && declared !== '0');
      return hasBody && isTextLike(req.headers['content-type']);
    },
    check(ctx, body) {
      const form = /^application\/x-www-form-urlencoded/i.test(ctx.req.headers['content-type'] ?? '');
      const text = form ? formBodyText(body, limit) : decodeOnce(body.toString('utf8', 0, Math.min(body.length, limit)));
      let hit = NO_HIT;
      if (rules.length > 0) {
        const lower = text.toLowerCase();
        hit = runRules(rules, ctx, () => lower);
        if (hit.block) return hit.block;
      }
      for (const f of families) if (f.re.test(text)) return f.verdict;
      return hit.challenge ?? ALLOW;
    },
  };
}

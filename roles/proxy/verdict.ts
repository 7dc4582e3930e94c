/**
 * Verdicts of the request pipeline (DESIGN "The proxy's request pipeline"): every check answers
 * `allow`, or a non-allow verdict naming its rule id; the first non-allow verdict wins.
 */
import type { RequestContext } from './request-context.ts';

export interface AllowVerdict {
  readonly kind: 'allow';
}

/** Answer with `status` and stop; `rule` is the telemetry rule id (`request.method`, ...). */
export interface DenyVerdict {
  readonly kind: 'deny';
  readonly status: number;
  readonly rule: string;
  /** Extra response headers (`Allow` on a 405). */
  readonly headers?: Readonly<Record<string, string>>;
}

/**
 * Ask for the proof-of-work page. The pipeline's challenge gate (challenge.ts) turns it into the
 * page (a respond verdict), skips it for a client with clearance, or degrades it per
 * challenge.mode; one that reaches the data plane anyway is answered 429.
 */
export interface ChallengeVerdict {
  readonly kind: 'challenge';
  readonly rule: string;
}

/** Answer with a redirect and stop (the cleartext-to-HTTPS 308). */
export interface RedirectVerdict {
  readonly kind: 'redirect';
  readonly status: 301 | 302 | 307 | 308;
  readonly location: string;
  readonly rule: string;
}

/** Close the connection without an answer (quota_action `close`, part 2). */
export interface CloseVerdict {
  readonly kind: 'close';
  readonly rule: string;
}

/** The proxy answers itself (the challenge page, the verify endpoint): `respond` writes the whole answer. */
export interface RespondVerdict {
  readonly kind: 'respond';
  readonly rule: string | null;
  readonly respond: (ctx: RequestContext) => void;
}

export type Verdict = AllowVerdict | DenyVerdict | ChallengeVerdict | RedirectVerdict | CloseVerdict | RespondVerdict;

export const ALLOW: AllowVerdict = Object.freeze({ kind: 'allow' });

/** A deny verdict; callers keep them in module constants where status and rule are fixed. */
export function deny(status: number, rule: string, headers?: Record<string, string>): DenyVerdict {
  return Object.freeze(headers ? { kind: 'deny', status, rule, headers: Object.freeze({ ...headers }) } : { kind: 'deny', status, rule });
}

/**
 * One webhook request and how to read its answer, for every role that notifies chat platforms or
 * generic endpoints (bandwidthd's notifier, the panel's firewall alerts): what counts as
 * delivered, what is worth retrying, how long a 429 asks to wait. Queues, retries and rate gates
 * stay with the callers; this is the single attempt they share.
 */
import { errorMessage } from '../core/app-error.ts';
import { requestText } from './http-request.ts';
import { webhookTarget } from './webhook-url.ts';

export const MAX_BACKOFF_MS = 60_000;
/**
 * The longest Retry-After honoured (docs/decisions.md): a platform asking for more is taken to
 * mean "much later", not a pause of days that would outlive any queue.
 */
export const MAX_RETRY_AFTER_MS = 3_600_000;
/** spec/3 §8: generic webhook client timeout; the default for every destination. */
export const WEBHOOK_TIMEOUT_MS = 10_000;

export interface WebhookRequest {
  /** May carry basic-auth credentials as userinfo; they are sent as an Authorization header. */
  url: string;
  /** Default POST. */
  method?: string;
  /** Sent after the defaults (content-type application/json, the user agent), so they may replace them. */
  headers?: Record<string, string>;
  body: string;
  userAgent: string;
  /** The whole exchange; default WEBHOOK_TIMEOUT_MS. */
  timeoutMs?: number;
}

export interface SendResult {
  ok: boolean;
  status?: number;
  error?: string;
  /** 4xx other than 408/429: retrying cannot help (bad or revoked URL, refused payload). */
  permanent?: boolean;
  retryAfterMs?: number;
}

/** Wait before attempt n+1 after attempt n failed: base x 2^(n-1), at most `maxMs` (60 s). Pure. */
export function backoffMs(baseMs: number, failedAttempt: number, maxMs: number = MAX_BACKOFF_MS): number {
  return Math.min(maxMs, baseMs * 2 ** Math.max(0, failedAttempt - 1));
}

const retryAfterMs = (secs: number): number => Math.min(MAX_RETRY_AFTER_MS, Math.max(0, secs * 1000));

/** Retry-After as seconds or an HTTP date, in ms (at most MAX_RETRY_AFTER_MS); undefined when absent or unreadable. Pure. */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  const secs = Number(value);
  if (Number.isFinite(secs)) return retryAfterMs(secs);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : retryAfterMs((at - now) / 1000);
}

/**
 * One HTTP attempt, past no gate or queue (callers bring theirs); never throws. Userinfo in the
 * URL becomes basic authentication; a URL that cannot be used fails for good without a request.
 * Returns ok for a 2xx; otherwise the status, an error to log, whether retrying is pointless and
 * how long a 429 asked to wait.
 */
export async function sendWebhook(req: WebhookRequest): Promise<SendResult> {
  const timeoutMs = req.timeoutMs ?? WEBHOOK_TIMEOUT_MS;
  const target = webhookTarget(req.url);
  if ('error' in target) return { ok: false, permanent: true, error: target.error };
  const headers: Record<string, string> = { 'content-type': 'application/json', 'user-agent': req.userAgent, ...req.headers };
  if (target.authorization) headers['authorization'] = target.authorization;
  try {
    const res = await requestText(target.url, { method: req.method ?? 'POST', headers, body: req.body, timeoutMs });
    const text = res.text;
    if (res.status >= 200 && res.status <= 299) return { ok: true, status: res.status };
    const out: SendResult = { ok: false, status: res.status, error: `HTTP ${res.status}${text ? `: ${text.slice(0, 200)}` : ''}` };
    if (res.status === 429) {
      let after = parseRetryAfter(res.headers['retry-after'] ?? null);
      if (after === undefined) {
        // The embed-style platform also says it in the body, in (fractional) seconds.
        try {
          const j = JSON.parse(text) as { retry_after?: unknown };
          if (typeof j.retry_after === 'number') after = retryAfterMs(j.retry_after);
        } catch {
          // no JSON body
        }
      }
      if (after !== undefined) out.retryAfterMs = after;
    } else if (res.status >= 300 && res.status < 400) {
      // Not followed (that would send the payload and its credentials wherever the answer points)
      // and not retried: the same URL answers the same way. The configured URL needs changing.
      const location = res.headers['location'];
      out.permanent = true;
      out.error = `HTTP ${res.status}: the endpoint redirects${typeof location === 'string' ? ` to ${location.slice(0, 200)}` : ''}; put that URL in the config (redirects are not followed)`;
    } else if (res.status >= 400 && res.status < 500 && res.status !== 408) {
      out.permanent = true;
    }
    return out;
  } catch (err) {
    const e = err as { name?: string };
    return { ok: false, error: e.name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : errorMessage(err) };
  }
}

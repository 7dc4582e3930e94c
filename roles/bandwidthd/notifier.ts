/**
 * Webhook delivery of the daemon (spec/3 §2.8 webhook.*, §2.9, §3, §6.2): destinations from the
 * config, a bounded in-memory queue (webhook.queue_size for all destinations together; a full
 * queue drops and counts), batching within notifications.batch_window, retries waiting
 * base x 2^(n-1) capped at 60 s, a 429's Retry-After honoured, and the persisted outbox for
 * `webhook.endpoints` (persist_queue) retried by the scheduler. The `notifications.*`
 * destinations are not persisted: §6.2 says that retry path drops after the last failure.
 */
import type { Logger } from 'pino';
import type { BandwidthdConfig } from '../../src/contracts/types.ts';
import { errorMessage } from '../../src/core/app-error.ts';
import { SERVICE_VERSION } from '../../src/core/version.ts';
import { requestText } from '../../src/lib/http-request.ts';
import { durationMs } from '../../src/lib/units.ts';
import { chatABody, chatBBody, EVENT_STYLE, EVENTS, genericBody, type EventName, type Notice } from './payloads.ts';
import type { BandwidthdStore } from './store.ts';

export type Platform = 'chat_a' | 'chat_b' | 'generic';
export const MAX_BACKOFF_MS = 60_000;
/** §8: generic webhook client timeout; used for every destination. */
export const REQUEST_TIMEOUT_MS = 10_000;
export const CHAT_A_PER_MINUTE = 30;

export interface Destination {
  name: string;
  type: Platform;
  url: string;
  method: string;
  headers: Record<string, string>;
  events: ReadonlySet<EventName>;
  maxRetries: number;
  backoffMs: number;
  /** Failures after the last retry go to the store (webhook.endpoints with persist_queue). */
  persist: boolean;
  channel?: string;
  username?: string;
}

export interface SendResult {
  ok: boolean;
  status?: number;
  error?: string;
  /** 4xx other than 408/429: retrying cannot help (bad or revoked URL, refused payload). */
  permanent?: boolean;
  retryAfterMs?: number;
}

/** Wait before attempt n+1 after attempt n failed: base x 2^(n-1), at most 60 s. Pure. */
export function backoffMs(base: number, failedAttempt: number): number {
  return Math.min(MAX_BACKOFF_MS, base * 2 ** Math.max(0, failedAttempt - 1));
}

/** Retry-After as seconds or an HTTP date, in ms (capped at 60 s); undefined when absent or unreadable. Pure. */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  const secs = Number(value);
  if (Number.isFinite(secs)) return Math.min(MAX_BACKOFF_MS, Math.max(0, secs * 1000));
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.min(MAX_BACKOFF_MS, Math.max(0, at - now));
}

function eventSet(map: Partial<Record<EventName, boolean>> | undefined): Set<EventName> {
  return new Set(EVENTS.filter((e) => map?.[e] ?? EVENT_STYLE[e].on));
}

/**
 * Every destination the config names, enabled or not (runs at start and for `webhook test`).
 * `webhook.endpoints` count only when webhook.enabled (their master switch); the `notifications`
 * destinations have their own enabled flags.
 */
export function destinationsOf(config: BandwidthdConfig): { dest: Destination; enabled: boolean }[] {
  const out: { dest: Destination; enabled: boolean }[] = [];
  const w = config.webhook;
  for (const e of w.endpoints) {
    out.push({
      enabled: w.enabled && e.enabled,
      dest: { name: e.name, type: e.type, url: e.url, method: 'POST', headers: {}, events: eventSet(undefined), maxRetries: w.max_retries, backoffMs: durationMs(w.backoff_base), persist: w.persist_queue },
    });
  }
  const n = config.notifications;
  const retry = (r: { max_retries?: number; backoff_base?: string } | undefined): { maxRetries: number; backoffMs: number } => ({
    maxRetries: r?.max_retries ?? n.retry.max_retries,
    backoffMs: durationMs(r?.backoff_base ?? n.retry.backoff_base),
  });
  if (n.chat_a.webhook_url) {
    out.push({ enabled: n.chat_a.enabled, dest: { name: 'chat_a', type: 'chat_a', url: n.chat_a.webhook_url, method: 'POST', headers: {}, events: eventSet(n.chat_a.events), ...retry(n.chat_a.retry), persist: false } });
  }
  if (n.chat_b.webhook_url) {
    const d: Destination = { name: 'chat_b', type: 'chat_b', url: n.chat_b.webhook_url, method: 'POST', headers: {}, events: eventSet(n.chat_b.events), ...retry(n.chat_b.retry), persist: false };
    if (n.chat_b.channel) d.channel = n.chat_b.channel;
    if (n.chat_b.username) d.username = n.chat_b.username;
    out.push({ enabled: n.chat_b.enabled, dest: d });
  }
  for (const g of n.generic) {
    out.push({ enabled: g.enabled, dest: { name: g.name, type: 'generic', url: g.url, method: g.method, headers: { ...g.headers }, events: eventSet(g.events), ...retry(g.retry), persist: false } });
  }
  return out;
}

/** The request body for a batch of notices (generic: exactly one). Pure. */
export function bodyFor(dest: Destination, notices: Notice[]): string {
  if (dest.type === 'chat_a') return JSON.stringify(chatABody(notices, dest.username));
  if (dest.type === 'chat_b') return JSON.stringify(chatBBody(notices, { ...(dest.channel ? { channel: dest.channel } : {}), ...(dest.username ? { username: dest.username } : {}) }));
  return JSON.stringify(genericBody(notices[0] as Notice));
}

/** One HTTP attempt; never throws. Userinfo in the URL becomes basic authentication. */
export async function sendOnce(dest: Destination, body: string, timeoutMs: number = REQUEST_TIMEOUT_MS): Promise<SendResult> {
  let url: URL;
  try {
    url = new URL(dest.url);
  } catch {
    return { ok: false, permanent: true, error: 'invalid URL (an unresolved ${VAR}?)' };
  }
  const headers: Record<string, string> = { 'content-type': 'application/json', 'user-agent': `bandwidth-daemon/${SERVICE_VERSION}`, ...dest.headers };
  if (url.username || url.password) {
    headers['authorization'] = `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString('base64')}`;
    url.username = '';
    url.password = '';
  }
  try {
    const res = await requestText(url, { method: dest.method, headers, body, timeoutMs });
    const text = res.text;
    if (res.status >= 200 && res.status <= 299) return { ok: true, status: res.status };
    const out: SendResult = { ok: false, status: res.status, error: `HTTP ${res.status}${text ? `: ${text.slice(0, 200)}` : ''}` };
    if (res.status === 429) {
      let after = parseRetryAfter(res.headers['retry-after'] ?? null);
      if (after === undefined) {
        // The embed-style platform also says it in the body, in (fractional) seconds.
        try {
          const j = JSON.parse(text) as { retry_after?: unknown };
          if (typeof j.retry_after === 'number') after = Math.min(MAX_BACKOFF_MS, j.retry_after * 1000);
        } catch {
          // no JSON body
        }
      }
      if (after !== undefined) out.retryAfterMs = after;
    } else if (res.status >= 400 && res.status < 500 && res.status !== 408) {
      out.permanent = true;
    }
    return out;
  } catch (err) {
    const e = err as { name?: string };
    return { ok: false, error: e.name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : errorMessage(err) };
  }
}

export interface NotifierStats {
  queued: number;
  dropped: number;
  delivered: number;
  failed: number;
  stored: number;
}

export interface Notifier {
  /** Queues a notice for every enabled destination that wants the event; never blocks. */
  notify(event: EventName, message: string, data?: Notice['data']): void;
  /** The scheduler's webhook_retry job: one attempt per stored delivery; returns [delivered, left]. */
  retryStored(): Promise<{ delivered: number; left: number }>;
  stats(): NotifierStats;
  /** Waits until the queue is empty (tests, shutdown). */
  idle(): Promise<void>;
  /** Delivers what is queued without further waits (persisting what fails), then stops. */
  stop(): Promise<void>;
}

export interface NotifierOptions {
  config: BandwidthdConfig;
  store: BandwidthdStore | null;
  logger: Logger;
  now?: () => Date;
  requestTimeoutMs?: number;
  /** Tests: the chat_a pace (default 30 messages per 60 s). */
  chatAPace?: { messages: number; windowMs: number };
}

/** Built once at daemon start; destinations are fixed for the life of the process. */
export function createNotifier(opts: NotifierOptions): Notifier {
  const log = opts.logger;
  const now = opts.now ?? (() => new Date());
  const timeout = opts.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
  const dests = destinationsOf(opts.config).filter((d) => d.enabled).map((d) => d.dest);
  const byName = new Map(destinationsOf(opts.config).map((d) => [d.dest.name, d.dest]));
  const capacity = opts.config.webhook.queue_size;
  const windowMs = durationMs(opts.config.notifications.batch_window);
  const queues = new Map<Destination, Notice[]>(dests.map((d) => [d, []]));
  const running = new Map<Destination, Promise<void>>();
  const sleeps = new Set<() => void>();
  const counts = { dropped: 0, delivered: 0, failed: 0, stored: 0 };
  let stopping = false;
  let queued = 0;

  function sleep(ms: number): Promise<void> {
    if (stopping || ms <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = (): void => {
        clearTimeout(t);
        sleeps.delete(wake);
        resolve();
      };
      const t = setTimeout(wake, ms);
      sleeps.add(wake);
    });
  }

  /** chat_a allows 30 messages a minute per webhook (spec/3 §8): stay under it rather than earn 429s. */
  const recent = new Map<Destination, number[]>();
  const pace = opts.chatAPace ?? { messages: CHAT_A_PER_MINUTE, windowMs: 60_000 };
  async function paced(dest: Destination): Promise<void> {
    if (dest.type !== 'chat_a') return;
    const times = recent.get(dest) ?? [];
    recent.set(dest, times);
    while (times.length > 0 && (times[0] as number) <= Date.now() - pace.windowMs) times.shift();
    if (times.length >= pace.messages) await sleep((times[0] as number) + pace.windowMs - Date.now());
    times.push(Date.now());
  }

  async function deliver(dest: Destination, body: string, what: string): Promise<void> {
    let last: SendResult = { ok: false };
    for (let attempt = 1; attempt <= Math.max(1, dest.maxRetries); attempt++) {
      await paced(dest);
      last = await sendOnce(dest, body, timeout);
      if (last.ok) {
        counts.delivered++;
        return;
      }
      log.warn({ destination: dest.name, attempt, status: last.status }, `webhook delivery failed: ${last.error ?? 'unknown error'}`);
      if (last.permanent || stopping || attempt >= dest.maxRetries) break;
      await sleep(last.retryAfterMs ?? backoffMs(dest.backoffMs, attempt));
    }
    counts.failed++;
    if (dest.persist && opts.store && !last.permanent) {
      opts.store.enqueue(dest.name, body, now().getTime());
      counts.stored++;
      log.warn({ destination: dest.name, events: what }, 'webhook stored for the retry job');
    } else {
      log.error({ destination: dest.name, events: what }, `webhook dropped: ${last.error ?? 'failed'}`);
    }
  }

  async function drain(dest: Destination): Promise<void> {
    const q = queues.get(dest) as Notice[];
    await sleep(windowMs);
    while (q.length > 0) {
      const batch = q.splice(0, dest.type === 'generic' ? 1 : dest.type === 'chat_a' ? 10 : 16);
      queued -= batch.length;
      await deliver(dest, bodyFor(dest, batch), batch.map((n) => n.event).join(','));
    }
  }

  function kick(dest: Destination): void {
    if (running.has(dest)) return;
    const p = drain(dest)
      .catch((err: unknown) => log.error({ err, destination: dest.name }, 'webhook worker failed'))
      .finally(() => {
        running.delete(dest);
        if ((queues.get(dest)?.length ?? 0) > 0) kick(dest);
      });
    running.set(dest, p);
  }

  return {
    notify(event, message, data = {}) {
      const notice: Notice = { event, timestamp: now().toISOString(), message, data };
      for (const dest of dests) {
        if (!dest.events.has(event)) continue;
        if (queued >= capacity) {
          counts.dropped++;
          if (counts.dropped === 1 || counts.dropped % 1000 === 0) log.warn({ dropped: counts.dropped, capacity }, 'webhook queue full: notification dropped');
          continue;
        }
        (queues.get(dest) as Notice[]).push(notice);
        queued++;
        kick(dest);
      }
    },
    async retryStored() {
      if (!opts.store) return { delivered: 0, left: 0 };
      let delivered = 0;
      for (const row of opts.store.outbox()) {
        const dest = byName.get(row.destination);
        if (!dest) {
          log.warn({ destination: row.destination }, 'stored webhook for a destination no longer configured: dropped');
          opts.store.outboxDelete(row.id);
          continue;
        }
        const r = await sendOnce(dest, row.body, timeout);
        if (r.ok) {
          opts.store.outboxDelete(row.id);
          delivered++;
          counts.delivered++;
        } else if (r.permanent) {
          log.error({ destination: dest.name, status: r.status }, `stored webhook refused, dropped: ${r.error ?? ''}`);
          opts.store.outboxDelete(row.id);
        } else {
          opts.store.outboxFailed(row.id);
        }
      }
      return { delivered, left: opts.store.outboxCount() };
    },
    stats: () => ({ queued, ...counts }),
    async idle() {
      while (running.size > 0) await Promise.all([...running.values()]);
    },
    async stop() {
      stopping = true;
      for (const wake of [...sleeps]) wake();
      while (running.size > 0) await Promise.all([...running.values()]);
    },
  };
}

/**
 * Webhook delivery of the daemon (spec/3 §2.8 webhook.*, §2.9, §3, §6.2): destinations from the
 * config, a bounded in-memory queue (webhook.queue_size for all destinations together; a full
 * queue drops and counts), batching within notifications.batch_window, retries waiting
 * base x 2^(n-1) capped at 60 s, and the persisted outbox for `webhook.endpoints` (persist_queue)
 * retried by the scheduler's webhook_retry job. The `notifications.*` destinations are not
 * persisted: §6.2 says that retry path drops after the last failure.
 *
 * Every request of a destination, live or from the outbox, passes its one gate: chat_a's pace of
 * 30 messages a minute (§8) and the hold a 429's Retry-After puts on the destination.
 */
import type { Logger } from 'pino';
import type { BandwidthdConfig } from '../../src/contracts/types.ts';
import { expandEnv } from '../../src/core/config-loader.ts';
import { SERVICE_VERSION } from '../../src/core/version.ts';
import { chatABody, chatBBody } from '../../src/lib/chat-payloads.ts';
import { durationMs } from '../../src/lib/units.ts';
import { backoffMs, MAX_BACKOFF_MS, MAX_RETRY_AFTER_MS, sendWebhook, type SendResult } from '../../src/lib/webhook-send.ts';
import { chatNotice, EVENT_STYLE, EVENTS, genericBody, type EventName, type Notice } from './payloads.ts';
import type { BandwidthdStore } from './store.ts';

export type Platform = 'chat_a' | 'chat_b' | 'generic';
/** Stored deliveries a retry pass sends per destination at most; the rest wait for the next pass. */
export const RETRY_PASS_ROWS = 100;
export const CHAT_A_PER_MINUTE = 30;
/**
 * How long a stop lets queued notifications have their one attempt. It stays under the 10 s a
 * shutdown step gets, which one endpoint that never answers would use up alone: what is still
 * unanswered then is stored (or dropped, without an outbox) instead of lost with the process.
 */
export const STOP_GRACE_MS = 5_000;
/**
 * The least time between two "webhook queue full" warnings: a full queue stays full while events
 * keep coming, and one line per drop would flood the log. Each names the event and destination
 * that met it and how many were dropped since the previous one.
 */
export const DROP_LOG_INTERVAL_MS = 60_000;

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

/** What one request through a destination's gate came to. */
interface AttemptResult extends SendResult {
  /** Nothing was sent: the destination's gate stays closed this much longer than the caller would wait. */
  deferredMs?: number;
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
  if (dest.type === 'chat_a') return JSON.stringify(chatABody(notices.map(chatNotice), { username: dest.username }));
  if (dest.type === 'chat_b') return JSON.stringify(chatBBody(notices.map(chatNotice), { channel: dest.channel, username: dest.username }));
  return JSON.stringify(genericBody(notices[0] as Notice));
}

/**
 * The variables of `${VAR}` references left in the destination's URL and headers: the loader
 * leaves a reference to an unset variable literal (spec/3 §2.9). Found by the loader's own
 * expansion, with an environment that records every name asked for and knows none. Pure.
 */
function unsetVariables(dest: Destination): string[] {
  const names = new Set<string>();
  const none = new Proxy({}, { get: (_, name) => void names.add(String(name)) }) as NodeJS.ProcessEnv;
  for (const text of [dest.url, ...Object.values(dest.headers)]) expandEnv(text, none);
  return [...names];
}

/**
 * One HTTP attempt, past no gate (the notifier's workers send through theirs; `webhook test` is
 * one request per destination); never throws. A destination with an unset variable fails without
 * a request, for good (§2.9: unknown variables make delivery fail), rather than sending the literal
 * reference as its secret; otherwise sendWebhook's rules decide (userinfo as basic authentication,
 * 2xx delivered, 3xx and 4xx but 408/429 permanent).
 */
export async function sendOnce(dest: Destination, body: string, timeoutMs?: number): Promise<SendResult> {
  const unset = unsetVariables(dest);
  if (unset.length > 0) {
    const refs = unset.map((v) => `\${${v}}`).join(', ');
    return { ok: false, permanent: true, error: `environment variable${unset.length === 1 ? ` ${unset[0]} is` : `s ${unset.join(', ')} are`} not set: ${refs} would be sent literally in the URL or headers` };
  }
  return sendWebhook({ url: dest.url, method: dest.method, headers: dest.headers, body, userAgent: `bandwidth-daemon/${SERVICE_VERSION}`, timeoutMs });
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
  /**
   * The webhook_retry job: one pass over the stored deliveries, all destinations side by side,
   * each in order until one fails or its gate is closed, at most RETRY_PASS_ROWS each. One pass
   * at a time (a call during a pass gets that pass's outcome); never waits for a gate; stop()
   * ends it at once. The daemon runs it beside its serial work, never inside it: an endpoint
   * that does not answer must not hold up polling, enforcement or the CLI. Returns what it
   * delivered and how many deliveries are left stored.
   */
  retryStored(): Promise<{ delivered: number; left: number }>;
  stats(): NotifierStats;
  /** Waits until the queue is empty (tests, shutdown). */
  idle(): Promise<void>;
  /**
   * Ends a retry pass, gives what is queued one attempt each without further waits, for at most
   * STOP_GRACE_MS (persisting what fails or is unanswered by then), then stops.
   */
  stop(): Promise<void>;
}

export interface NotifierOptions {
  config: BandwidthdConfig;
  store: BandwidthdStore | null;
  logger: Logger;
  now?: () => Date;
  /** Default WEBHOOK_TIMEOUT_MS (src/lib/webhook-send.ts). */
  requestTimeoutMs?: number;
  /** Tests: the chat_a pace (default 30 messages per 60 s). */
  chatAPace?: { messages: number; windowMs: number };
  /** Tests: STOP_GRACE_MS. */
  stopGraceMs?: number;
}

/** Built once at daemon start; destinations are fixed for the life of the process. */
export function createNotifier(opts: NotifierOptions): Notifier {
  const log = opts.logger;
  const store = opts.store;
  const now = opts.now ?? (() => new Date());
  const graceMs = opts.stopGraceMs ?? STOP_GRACE_MS;
  // One object per destination, so the live workers and the retry pass share its gate.
  const all = destinationsOf(opts.config);
  const dests = all.filter((d) => d.enabled).map((d) => d.dest);
  const byName = new Map(all.map((d) => [d.dest.name, d.dest]));
  const capacity = opts.config.webhook.queue_size;
  const windowMs = durationMs(opts.config.notifications.batch_window);
  const queues = new Map<Destination, Notice[]>(dests.map((d) => [d, []]));
  const running = new Map<Destination, Promise<void>>();
  const sleeps = new Set<() => void>();
  const counts = { dropped: 0, delivered: 0, failed: 0, stored: 0 };
  let stopping = false;
  let queued = 0;
  const drops = { unlogged: 0, loggedAt: -Infinity };
  let pass: Promise<{ delivered: number; left: number }> | undefined;
  let stopNow = (): void => undefined;
  const whenStopped = new Promise<undefined>((resolve) => (stopNow = () => resolve(undefined)));
  // The end of a stop's grace: live deliveries give up their request in flight and send no more.
  let givenUp = false;
  let giveUp = (): void => undefined;
  const whenGivenUp = new Promise<undefined>((resolve) => (giveUp = () => ((givenUp = true), resolve(undefined))));

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

  /**
   * A destination's gate: until when a 429 told it to wait, and for chat_a its send times within
   * the pace window (30 messages a minute per webhook, spec/3 §8: stay under it rather than earn 429s).
   */
  const gates = new Map<Destination, { holdUntil: number; sent: number[] }>();
  const pace = opts.chatAPace ?? { messages: CHAT_A_PER_MINUTE, windowMs: 60_000 };
  function gateOf(dest: Destination): { holdUntil: number; sent: number[] } {
    let g = gates.get(dest);
    if (!g) gates.set(dest, (g = { holdUntil: 0, sent: [] }));
    return g;
  }

  /** How long `dest` must wait before its next request; 0 = now. */
  function gateWait(dest: Destination): number {
    const g = gateOf(dest);
    const t = Date.now();
    let wait = g.holdUntil - t;
    if (dest.type === 'chat_a') {
      while (g.sent.length > 0 && (g.sent[0] as number) <= t - pace.windowMs) g.sent.shift();
      if (g.sent.length >= pace.messages) wait = Math.max(wait, (g.sent[0] as number) + pace.windowMs - t);
    }
    return Math.max(0, wait);
  }

  /**
   * One request through the destination's gate: the only way the live workers and the retry pass
   * send. Waits up to `maxWaitMs` for the gate, never while stopping; a longer wait sends nothing
   * and returns `deferredMs`. A 429's Retry-After closes the gate for both paths.
   */
  async function attempt(dest: Destination, body: string, maxWaitMs: number): Promise<AttemptResult> {
    for (let wait = gateWait(dest); wait > 0; wait = gateWait(dest)) {
      if (stopping || wait > maxWaitMs) return { ok: false, deferredMs: wait, error: `held back ${Math.ceil(wait / 1000)} s by the platform's rate limit` };
      await sleep(wait);
    }
    if (dest.type === 'chat_a') gateOf(dest).sent.push(Date.now());
    const r = await sendOnce(dest, body, opts.requestTimeoutMs);
    if (r.retryAfterMs !== undefined) gateOf(dest).holdUntil = Date.now() + r.retryAfterMs;
    return r;
  }

  async function deliver(dest: Destination, body: string, what: string): Promise<void> {
    const outbox = dest.persist ? store : null;
    // A destination with an outbox waits at most the fixed 60 s backoff and hands a longer hold to
    // the retry job. One without has only its own worker to wait in: it waits the hold out, which
    // delays no other destination.
    const maxWait = outbox ? MAX_BACKOFF_MS : MAX_RETRY_AFTER_MS;
    let last: AttemptResult = { ok: false };
    for (let n = 1; n <= Math.max(1, dest.maxRetries); n++) {
      const r = givenUp ? undefined : await Promise.race([attempt(dest, body, maxWait), whenGivenUp]);
      if (r === undefined) {
        // An abandoned request may still arrive: stored, it is delivered at least once.
        last = { ok: false, error: `not delivered within the ${Math.round(graceMs / 1000)} s a stop allows` };
        break;
      }
      last = r;
      if (last.ok) {
        counts.delivered++;
        return;
      }
      if (last.deferredMs !== undefined) break;
      log.warn({ destination: dest.name, attempt: n, status: last.status }, `webhook delivery failed: ${last.error ?? 'unknown error'}`);
      if (last.permanent || stopping || n >= dest.maxRetries) break;
      // After a 429 the gate holds the destination for its Retry-After; the backoff is for the rest.
      if (last.retryAfterMs === undefined) await sleep(backoffMs(dest.backoffMs, n));
    }
    counts.failed++;
    if (outbox && !last.permanent) {
      outbox.enqueue(dest.name, body, now().getTime());
      counts.stored++;
      log.warn({ destination: dest.name, events: what }, `webhook stored for the retry job: ${last.error ?? 'failed'}`);
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

  /** One destination's share of a retry pass; returns how many it delivered. */
  async function retryDestination(outbox: BandwidthdStore, name: string): Promise<number> {
    const dest = byName.get(name);
    if (!dest) {
      log.warn({ destination: name, deliveries: outbox.outboxDrop(name) }, 'stored webhooks for a destination no longer configured: dropped');
      return 0;
    }
    // Switched off (its own `enabled` or webhook.enabled): it receives nothing, stored deliveries
    // included; they wait for it to be switched on again.
    if (!dests.includes(dest)) return 0;
    let delivered = 0;
    for (const row of outbox.outbox(name, RETRY_PASS_ROWS)) {
      if (stopping) break;
      // A stop abandons the request in flight; its row stays and goes out after the next start.
      const r = await Promise.race([attempt(dest, row.body, 0), whenStopped]);
      if (r === undefined) break;
      if (r.ok) {
        outbox.outboxDelete(row.id);
        delivered++;
        counts.delivered++;
      } else if (r.permanent) {
        log.error({ destination: dest.name, status: r.status }, `stored webhook refused, dropped: ${r.error ?? ''}`);
        outbox.outboxDelete(row.id);
      } else {
        // Down or held back: its other deliveries wait for a later pass. A hold is no attempt (the
        // 429 that set it was logged when it came). One line per destination and pass: the pass
        // stops at its first failure.
        if (r.deferredMs === undefined) {
          outbox.outboxFailed(row.id);
          const left = outbox.outboxCount(name);
          log.warn({ destination: name, status: r.status, deliveries: left }, `stored webhook not delivered by the retry job, ${left} left for a later pass: ${r.error ?? 'failed'}`);
        }
        break;
      }
    }
    return delivered;
  }

  return {
    notify(event, message, data = {}) {
      const notice: Notice = { event, timestamp: now().toISOString(), message, data };
      for (const dest of dests) {
        if (!dest.events.has(event)) continue;
        if (queued >= capacity) {
          counts.dropped++;
          drops.unlogged++;
          const t = now().getTime();
          if (t - drops.loggedAt >= DROP_LOG_INTERVAL_MS) {
            log.warn({ event, destination: dest.name, dropped: drops.unlogged, capacity }, `webhook queue full (${capacity}): ${event} for ${dest.name} dropped, ${drops.unlogged} dropped since the last such warning`);
            drops.unlogged = 0;
            drops.loggedAt = t;
          }
          continue;
        }
        (queues.get(dest) as Notice[]).push(notice);
        queued++;
        kick(dest);
      }
    },
    retryStored() {
      if (!store) return Promise.resolve({ delivered: 0, left: 0 });
      pass ??= Promise.all(store.outboxDestinations().map((name) => retryDestination(store, name)))
        .then((n) => ({ delivered: n.reduce((a, b) => a + b, 0), left: store.outboxCount() }))
        .finally(() => {
          pass = undefined;
        });
      return pass;
    },
    stats: () => ({ queued, ...counts }),
    async idle() {
      while (running.size > 0) await Promise.all([...running.values()]);
    },
    async stop() {
      stopping = true;
      stopNow();
      for (const wake of [...sleeps]) wake();
      const grace = setTimeout(giveUp, graceMs);
      while (running.size > 0) await Promise.all([...running.values()]);
      clearTimeout(grace);
      // The job that started the pass reports its failure; here it only has to be over.
      await pass?.catch(() => undefined);
    },
  };
}

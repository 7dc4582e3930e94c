/**
 * Delivery of the firewall alert outbox (spec/3 §6.3): per destination (the admin webhook, an
 * owner's webhook, an owner's e-mail), oldest first, a burst digested into one message
 * (notices.ts planMessage); rows are deleted only once delivered. A failure closes the
 * destination's gate: for the Retry-After of a 429, else with backoff (2 s doubling to 60 s);
 * a permanent refusal (4xx, an SMTP 5xx) drops what the message stood for, with a log line and
 * an activity entry. Rows stay in the table across restarts until one of those happens.
 * Runs only under `panel serve`, one run at a time.
 */
import type { Logger } from 'pino';
import { errorMessage } from '../../../../src/core/app-error.ts';
import type { ChatNotice } from '../../../../src/lib/chat-payloads.ts';
import { backoffMs } from '../../../../src/lib/webhook-send.ts';
import type { ActivityLog } from '../../services/activity.ts';
import { planMessage, type PendingAlert } from './notices.ts';
import type { FirewallStore } from './store.ts';

/** The first retry waits this long, doubling per failure in a row up to webhook-send's 60 s. */
export const RETRY_BASE_MS = 2_000;
/** The waiting alerts one delivery looks at (a larger backlog is worked through in further messages). */
const BATCH = 1_000;
/** The longest pause between looks at closed gates while alerts wait. */
const MAX_IDLE_MS = 60_000;

export interface DeliveryResult {
  ok: boolean;
  status?: number;
  error?: string;
  permanent?: boolean;
  retryAfterMs?: number;
}

/** Where a destination's alerts go now: what to call it in logs (a URL masked), notices per message, and the send. */
export interface Destination {
  label: string;
  perMessage: number;
  send(notices: ChatNotice[]): Promise<DeliveryResult>;
}

export interface Outbox {
  /** New alerts are waiting: deliver soon. */
  kick(): void;
  /** One pass over every open destination; resolves when it is done. */
  deliverNow(): Promise<void>;
  start(): void;
  stop(): Promise<void>;
}

/**
 * Creates the deliverer; `resolve` says where a destination's alerts go now, or undefined when
 * it is no longer set up (a cleared URL, SMART revoked, mail switched off): its alerts are dropped.
 */
export function createOutbox(store: FirewallStore, resolve: (destination: string) => Promise<Destination | undefined>, log: Logger, activity: ActivityLog): Outbox {
  let started = false;
  let stopped = false;
  let running: Promise<void> | undefined;
  let again = false;
  let timer: NodeJS.Timeout | undefined;

  /** Delivers a destination's alerts message by message until none wait or one fails. */
  async function drain(destination: string, failures: number): Promise<void> {
    while (!stopped) {
      const rows = await store.pending(destination, BATCH);
      const last = rows[rows.length - 1];
      if (last === undefined) return;
      const target = await resolve(destination);
      if (target === undefined) {
        const n = await store.done(destination, last.id);
        log.info({ destination, dropped: n }, 'dropped %d alerts for %s: it is no longer set up', n, destination);
        continue;
      }
      const pending: PendingAlert[] = rows.map((r) => ({ id: r.id, kind: r.kind, server_id: r.server_id, level: r.level, notice: JSON.parse(r.notice) as ChatNotice }));
      const plan = planMessage(pending, target.perMessage, new Date().toISOString());
      if (plan === undefined) return;
      let r: DeliveryResult;
      try {
        r = await target.send(plan.notices);
      } catch (err) {
        r = { ok: false, error: errorMessage(err) };
      }
      if (r.ok) {
        await store.done(destination, plan.covers);
        log.info({ destination, alerts: plan.count, notices: plan.notices.length }, 'delivered %d %s to %s in one message', plan.count, plan.count === 1 ? 'alert' : 'alerts', target.label);
        failures = 0;
        continue;
      }
      if (r.permanent === true) {
        await store.done(destination, plan.covers);
        log.warn({ destination, status: r.status, error: r.error, dropped: plan.count }, '%s refused %d alerts for good (%s): dropped', target.label, plan.count, r.error ?? `HTTP ${r.status ?? '?'}`);
        await activity.log({ event: 'firewall:alert.dropped', properties: { destination: target.label, alerts: plan.count, status: r.status ?? null, error: r.error ?? null } });
        continue;
      }
      const wait = r.retryAfterMs ?? backoffMs(RETRY_BASE_MS, failures + 1);
      const inRow = await store.failed(destination, new Date(Date.now() + wait).toISOString());
      log.warn(
        { destination, status: r.status, error: r.error, failures: inRow, retry_in_ms: wait },
        'delivery to %s failed (%s); %d alerts wait, next try in %s s',
        target.label,
        r.error ?? `HTTP ${r.status ?? '?'}`,
        rows.length,
        (wait / 1000).toFixed(1),
      );
      return;
    }
  }

  /** One pass over the destinations whose gate is open; returns the ms until the next closed gate opens (undefined: nothing waits). */
  async function pass(): Promise<number | undefined> {
    const opensIn = (d: { not_before: string | null }): number => (d.not_before === null ? 0 : Math.max(0, Date.parse(d.not_before) - Date.now()));
    for (const d of await store.destinations()) {
      if (stopped) return undefined;
      if (opensIn(d) === 0) await drain(d.destination, d.failures);
    }
    const waits = (await store.destinations()).map(opensIn);
    return waits.length === 0 ? undefined : Math.min(...waits);
  }

  function run(): Promise<void> {
    if (running !== undefined) {
      again = true;
      return running;
    }
    clearTimeout(timer);
    running = (async () => {
      let next: number | undefined;
      do {
        again = false;
        next = await pass().catch((err: unknown) => {
          log.error({ err }, 'alert delivery failed');
          return RETRY_BASE_MS;
        });
      } while (again && !stopped);
      running = undefined;
      if (started && !stopped && next !== undefined) timer = setTimeout(() => void run(), Math.min(Math.max(next, 50), MAX_IDLE_MS));
    })();
    return running;
  }

  return {
    kick() {
      if (started && !stopped) void run();
    },
    deliverNow: run,
    start() {
      started = true;
      void run();
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}

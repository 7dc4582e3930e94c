/**
 * Connection timeouts of the data plane (client keep-alive and head timeouts, origin connect,
 * read and idle timeouts) as deadlines one timer checks, instead of a node timer per socket:
 * `socket.setTimeout` re-arms a timer on every state change and on every read and write, which
 * cost a worker about 5% of its time under load. A deadline is a number set on a connection; a
 * timeout fires up to one tick late.
 */
import { monoNow } from './read-clock.ts';

export interface Expiring {
  /** When (performance.now()) the connection's current wait is over; 0: no wait is timed. */
  deadline: number;
  /** The deadline passed; runs on the list's tick. */
  expire(): void;
}

/** A set of connections checked every `tickMs`; the timer runs only while the set has members. */
export class DeadlineList {
  private readonly items = new Set<Expiring>();
  private readonly tickMs: number;
  private timer: NodeJS.Timeout | undefined;

  constructor(tickMs: number) {
    this.tickMs = tickMs;
  }

  add(item: Expiring): void {
    this.items.add(item);
    if (this.timer === undefined) {
      this.timer = setInterval(() => this.tick(), this.tickMs);
      this.timer.unref();
    }
  }

  delete(item: Expiring): void {
    this.items.delete(item);
    if (this.items.size === 0 && this.timer !== undefined) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  private tick(): void {
    const now = performance.now();
    for (const item of this.items) if (item.deadline !== 0 && item.deadline <= now) item.expire();
  }
}

/** The deadline `ms` from now, or 0 (none) for 0. */
export function deadlineIn(ms: number): number {
  return ms > 0 ? monoNow() + ms : 0;
}

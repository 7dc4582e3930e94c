/**
 * The telemetry bus (spec/3 §2.2 `events.channel_capacity`, §6.1): the data plane publishes
 * events without waiting; subscribers (the recent-events rings, aggregates and metrics) get them
 * in order on a later turn of the event loop. When `capacity` events are already waiting, new
 * ones are dropped and counted: the bus is lossy under congestion, never a brake on requests.
 */
import type { ProxyEvent } from './recent-events.ts';

export interface EventBus {
  /** Queues an event for the subscribers; returns false when it was dropped. Never throws. */
  publish(event: ProxyEvent): boolean;
  subscribe(fn: (event: ProxyEvent) => void): void;
  /** Applies a new `events.channel_capacity` (events already queued stay). */
  setCapacity(capacity: number): void;
  /** Events dropped since start. */
  dropped(): number;
  /** Events waiting now. */
  queued(): number;
}

/** Creates the bus; runs once at start. */
export function createEventBus(capacity: number, onSubscriberError: (err: unknown) => void): EventBus {
  let cap = capacity;
  let queue: ProxyEvent[] = [];
  let dropped = 0;
  let scheduled = false;
  const subscribers: ((e: ProxyEvent) => void)[] = [];

  function deliver(): void {
    scheduled = false;
    const batch = queue;
    queue = [];
    for (const e of batch) {
      for (const fn of subscribers) {
        try {
          fn(e);
        } catch (err) {
          onSubscriberError(err);
        }
      }
    }
  }

  return {
    publish(event) {
      if (queue.length >= cap) {
        dropped++;
        return false;
      }
      queue.push(event);
      if (!scheduled) {
        scheduled = true;
        setImmediate(deliver);
      }
      return true;
    },
    subscribe(fn) {
      subscribers.push(fn);
    },
    setCapacity(next) {
      cap = next;
    },
    dropped: () => dropped,
    queued: () => queue.length,
  };
}

import type { MitigationEvent } from './mitigation.ts';

/**
 * Proxy events (spec/3 §6.1): one request event per finished request (at the 101 for a tunnel),
 * `quota_exceeded` once per site and quota window, and `mitigation` when a site enters or leaves
 * auto-mitigation (mitigation.ts), kept in a ring per site of
 * `events.recent_buffer` entries for `GET /api/v1/events/recent`. Requests no site answered (421)
 * go to a ring of their own.
 */

export interface RequestEvent {
  kind: 'request';
  /** RFC 3339 time the request arrived. */
  time: string;
  /** Site id, or null when no site matched. */
  site: string | null;
  client_ip: string;
  method: string;
  host: string;
  path: string;
  status: number;
  /** Request body bytes read from the client. */
  bytes_in: number;
  /** Response body bytes sent to the client. */
  bytes_out: number;
  duration_ms: number;
  /** The rule that decided the outcome (`request.method`, `origin.connect`, ...), or null. */
  rule: string | null;
}

/** A site reached its monthly quota: once per quota window. */
export interface QuotaExceededEvent {
  kind: 'quota_exceeded';
  time: string;
  site: string;
  /** First day of the quota window (UTC). */
  window_start: string;
  bytes: number;
  limit: number;
}

export type ProxyEvent = RequestEvent | QuotaExceededEvent | MitigationEvent;

/**
 * A request event as a worker's data plane makes it: `time` in ms since the epoch, formatted on
 * the main thread (worker-protocol.ts), so the busy thread does not format a date per request.
 */
export type PlaneRequestEvent = Omit<RequestEvent, 'time'> & { time: number };

/** Receives every request event as the request finishes; must not throw or block. */
export type RequestEventSink = (event: PlaneRequestEvent) => void;

export interface RecentEvents {
  readonly record: (event: ProxyEvent) => void;
  /** Newest first, across sites or for one site (`null` = unrouted requests); at most `limit`. */
  recent(opts: { site?: string | null; limit: number }): ProxyEvent[];
  /** Applies a new `events.recent_buffer` (keeps the newest events) and drops rings of removed sites. */
  configure(capacity: number, siteIds: ReadonlySet<string>): void;
}

class Ring {
  items: (ProxyEvent | undefined)[];
  next = 0;
  size = 0;

  constructor(capacity: number) {
    this.items = new Array<ProxyEvent | undefined>(capacity);
  }

  push(e: ProxyEvent): void {
    this.items[this.next] = e;
    this.next = (this.next + 1) % this.items.length;
    if (this.size < this.items.length) this.size++;
  }

  /** Newest first. */
  newest(limit: number): ProxyEvent[] {
    const out: ProxyEvent[] = [];
    const cap = this.items.length;
    for (let i = 0; i < Math.min(limit, this.size); i++) out.push(this.items[(this.next - 1 - i + cap * 2) % cap] as ProxyEvent);
    return out;
  }

  resized(capacity: number): Ring {
    const r = new Ring(capacity);
    for (const e of this.newest(capacity).reverse()) r.push(e);
    return r;
  }
}

const UNROUTED = '\0unrouted';

/** Creates the rings; runs once at start. Rings are made on a site's first event. */
export function createRecentEvents(initialCapacity: number): RecentEvents {
  let capacity = initialCapacity;
  const rings = new Map<string, Ring>();

  return {
    record: function recordEvent(event) {
      const key = event.site ?? UNROUTED;
      let ring = rings.get(key);
      if (!ring) rings.set(key, (ring = new Ring(capacity)));
      ring.push(event);
    },
    recent({ site, limit }) {
      if (site !== undefined) return rings.get(site ?? UNROUTED)?.newest(limit) ?? [];
      const all: ProxyEvent[] = [];
      for (const ring of rings.values()) all.push(...ring.newest(limit));
      // RFC 3339 strings of one format sort by time.
      return all.sort((a, b) => (a.time < b.time ? 1 : a.time > b.time ? -1 : 0)).slice(0, limit);
    },
    configure(next, siteIds) {
      for (const key of rings.keys()) if (key !== UNROUTED && !siteIds.has(key)) rings.delete(key);
      if (next === capacity) return;
      capacity = next;
      for (const [key, ring] of rings) rings.set(key, ring.resized(capacity));
    },
  };
}

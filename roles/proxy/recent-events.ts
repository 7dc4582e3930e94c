/**
 * Request events (spec/3 §6.1): one per finished request, kept in a ring per site of
 * `events.recent_buffer` entries for `GET /api/v1/events/recent`. Requests no site answered (421)
 * go to a ring of their own. The telemetry bus, aggregates and Prometheus (later) subscribe
 * through `RequestEventSink`.
 */

export interface RequestEvent {
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

/** Receives every request event as the request finishes; must not throw or block. */
export type RequestEventSink = (event: RequestEvent) => void;

export interface RecentEvents {
  readonly record: RequestEventSink;
  /** Newest first, across sites or for one site (`null` = unrouted requests); at most `limit`. */
  recent(opts: { site?: string | null; limit: number }): RequestEvent[];
  /** Applies a new `events.recent_buffer` (keeps the newest events) and drops rings of removed sites. */
  configure(capacity: number, siteIds: ReadonlySet<string>): void;
}

class Ring {
  items: (RequestEvent | undefined)[];
  next = 0;
  size = 0;

  constructor(capacity: number) {
    this.items = new Array<RequestEvent | undefined>(capacity);
  }

  push(e: RequestEvent): void {
    this.items[this.next] = e;
    this.next = (this.next + 1) % this.items.length;
    if (this.size < this.items.length) this.size++;
  }

  /** Newest first. */
  newest(limit: number): RequestEvent[] {
    const out: RequestEvent[] = [];
    const cap = this.items.length;
    for (let i = 0; i < Math.min(limit, this.size); i++) out.push(this.items[(this.next - 1 - i + cap * 2) % cap] as RequestEvent);
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
      const all: RequestEvent[] = [];
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

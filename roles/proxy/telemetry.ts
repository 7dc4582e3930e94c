/**
 * Request telemetry fed by the event bus (spec/3 §6.1, §2.2 `events.aggregate_retention_hours`):
 * per-site counters since start (requests by status class, bytes, rule hits, a duration
 * histogram) for the Prometheus endpoint, and per-minute aggregates per site kept for the
 * retention period for the admin API. Minutes are those in which a request finished (UTC);
 * tunnel bytes land in the minute the tunnel closed.
 */

import type { ProxyEvent } from './recent-events.ts';

export interface MinuteAggregate {
  /** Start of the minute, RFC 3339 UTC. */
  minute: string;
  requests: number;
  status: Record<string, number>;
  bytes_in: number;
  bytes_out: number;
  rule_hits: Record<string, number>;
}

/** Gauges the metrics page reads from the rest of the proxy when it is rendered. */
export interface MetricsGauges {
  generation: number;
  /** Requests in flight on each data-plane worker, by worker number. */
  inFlight: readonly number[];
  eventsDropped: number;
  eventsQueued: number;
  sites: { id: string; connections: number; quotaBytes: number; quotaLimit: number | null }[];
}

export interface Telemetry {
  /** The bus subscriber: counts one event. */
  record(event: ProxyEvent): void;
  /** A tunnel ended: its bytes after the handshake. */
  tunnelBytes(site: string, up: number, down: number): void;
  /** Newest first, at most `limit` minutes of one site (`null`: requests no site matched). */
  minutes(site: string | null, limit: number): MinuteAggregate[];
  /** Applies `events.aggregate_retention_hours` and forgets sites no longer configured. */
  configure(retentionHours: number, siteIds: ReadonlySet<string>): void;
  /** The Prometheus text exposition (format 0.0.4). */
  renderMetrics(gauges: MetricsGauges): string;
}

// Request duration buckets (seconds), from a cached hit to a slow origin.
const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const UNROUTED = '-';
// Status class labels, made once rather than per event.
const STATUS_CLASSES = ['0xx', '1xx', '2xx', '3xx', '4xx', '5xx'];
const MINUTE_MS = 60_000;

interface SiteCounters {
  requests: Map<string, number>;
  bytesIn: number;
  bytesOut: number;
  rules: Map<string, number>;
  buckets: number[];
  durationSum: number;
  durationCount: number;
  quotaExceeded: number;
  /** mitigation enter events; `mitigating` is 1 between an enter and its exit. */
  mitigations: number;
  mitigating: number;
  /** Minute start (ms) -> aggregate, oldest first (insertion order). */
  minutes: Map<number, MinuteAggregate>;
}

function newSite(): SiteCounters {
  return { requests: new Map(), bytesIn: 0, bytesOut: 0, rules: new Map(), buckets: BUCKETS.map(() => 0), durationSum: 0, durationCount: 0, quotaExceeded: 0, mitigations: 0, mitigating: 0, minutes: new Map() };
}

function label(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

function bump(map: Map<string, number>, key: string, by = 1): void {
  map.set(key, (map.get(key) ?? 0) + by);
}

/** Creates the counters; runs once at start. */
export function createTelemetry(retentionHours: number, now: () => number = Date.now): Telemetry {
  let retentionMs = retentionHours * 3_600_000;
  const sites = new Map<string, SiteCounters>();

  function site(id: string): SiteCounters {
    let s = sites.get(id);
    if (!s) sites.set(id, (s = newSite()));
    return s;
  }

  function minuteOf(s: SiteCounters): MinuteAggregate {
    const t = now();
    const start = t - (t % MINUTE_MS);
    let m = s.minutes.get(start);
    if (!m) {
      // A new minute: drop those past the retention first (the map is oldest first).
      for (const key of s.minutes.keys()) {
        if (key > t - retentionMs) break;
        s.minutes.delete(key);
      }
      m = { minute: new Date(start).toISOString(), requests: 0, status: {}, bytes_in: 0, bytes_out: 0, rule_hits: {} };
      s.minutes.set(start, m);
    }
    return m;
  }

  return {
    record(e) {
      if (e.kind === 'quota_exceeded') {
        site(e.site).quotaExceeded++;
        return;
      }
      if (e.kind === 'mitigation') {
        const s = site(e.site);
        if (e.state === 'enter') s.mitigations++;
        s.mitigating = e.state === 'enter' ? 1 : 0;
        return;
      }
      const s = site(e.site ?? UNROUTED);
      const hundreds = Math.floor(e.status / 100);
      const cls = STATUS_CLASSES[hundreds] ?? `${hundreds}xx`;
      bump(s.requests, cls);
      s.bytesIn += e.bytes_in;
      s.bytesOut += e.bytes_out;
      const secs = e.duration_ms / 1000;
      s.durationSum += secs;
      s.durationCount++;
      for (let i = 0; i < BUCKETS.length; i++) if (secs <= (BUCKETS[i] as number)) s.buckets[i] = (s.buckets[i] as number) + 1;
      const m = minuteOf(s);
      m.requests++;
      m.status[cls] = (m.status[cls] ?? 0) + 1;
      m.bytes_in += e.bytes_in;
      m.bytes_out += e.bytes_out;
      if (e.rule !== null) {
        bump(s.rules, e.rule);
        m.rule_hits[e.rule] = (m.rule_hits[e.rule] ?? 0) + 1;
      }
    },
    tunnelBytes(id, up, down) {
      const s = site(id);
      s.bytesIn += up;
      s.bytesOut += down;
      const m = minuteOf(s);
      m.bytes_in += up;
      m.bytes_out += down;
    },
    minutes(id, limit) {
      const s = sites.get(id ?? UNROUTED);
      if (!s) return [];
      const cutoff = now() - retentionMs;
      const out: MinuteAggregate[] = [];
      for (const [start, m] of s.minutes) if (start > cutoff) out.push(m);
      return out.reverse().slice(0, limit);
    },
    configure(hours, siteIds) {
      retentionMs = hours * 3_600_000;
      for (const id of sites.keys()) if (id !== UNROUTED && !siteIds.has(id)) sites.delete(id);
    },
    renderMetrics(g) {
      const out: string[] = [];
      const family = (name: string, type: string, help: string): void => {
        out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
      };
      family('osproxy_requests_total', 'counter', 'Requests answered, by site and status class (tunnels count at their 101).');
      for (const [id, s] of sites) for (const [cls, n] of s.requests) out.push(`osproxy_requests_total{site="${label(id)}",status_class="${cls}"} ${n}`);
      family('osproxy_bytes_total', 'counter', 'Body and tunnel bytes, by site and direction (in = from clients).');
      for (const [id, s] of sites) out.push(`osproxy_bytes_total{site="${label(id)}",direction="in"} ${s.bytesIn}`, `osproxy_bytes_total{site="${label(id)}",direction="out"} ${s.bytesOut}`);
      family('osproxy_rule_hits_total', 'counter', 'Requests decided by a rule, by site and rule id.');
      for (const [id, s] of sites) for (const [rule, n] of s.rules) out.push(`osproxy_rule_hits_total{site="${label(id)}",rule="${label(rule)}"} ${n}`);
      family('osproxy_request_duration_seconds', 'histogram', 'Time from a request\'s arrival to the end of its answer (to the 101 for tunnels).');
      for (const [id, s] of sites) {
        const l = `site="${label(id)}"`;
        BUCKETS.forEach((b, i) => out.push(`osproxy_request_duration_seconds_bucket{${l},le="${b}"} ${s.buckets[i]}`));
        out.push(`osproxy_request_duration_seconds_bucket{${l},le="+Inf"} ${s.durationCount}`);
        out.push(`osproxy_request_duration_seconds_sum{${l}} ${s.durationSum}`, `osproxy_request_duration_seconds_count{${l}} ${s.durationCount}`);
      }
      family('osproxy_quota_exceeded_total', 'counter', 'quota_exceeded events (one per site and quota window).');
      for (const [id, s] of sites) if (s.quotaExceeded > 0) out.push(`osproxy_quota_exceeded_total{site="${label(id)}"} ${s.quotaExceeded}`);
      family('osproxy_mitigations_total', 'counter', 'Times a site entered auto-mitigation (RPS above threshold_rps).');
      for (const [id, s] of sites) if (s.mitigations > 0) out.push(`osproxy_mitigations_total{site="${label(id)}"} ${s.mitigations}`);
      family('osproxy_mitigating', 'gauge', '1 while the site is under auto-mitigation (rate limits multiplied by factor).');
      for (const [id, s] of sites) if (s.mitigations > 0) out.push(`osproxy_mitigating{site="${label(id)}"} ${s.mitigating}`);
      family('osproxy_quota_used_bytes', 'gauge', 'Bytes counted in the current quota window.');
      for (const s of g.sites) out.push(`osproxy_quota_used_bytes{site="${label(s.id)}"} ${s.quotaBytes}`);
      family('osproxy_quota_limit_bytes', 'gauge', 'monthly_quota_bytes of sites that have one.');
      for (const s of g.sites) if (s.quotaLimit !== null) out.push(`osproxy_quota_limit_bytes{site="${label(s.id)}"} ${s.quotaLimit}`);
      family('osproxy_connections', 'gauge', 'Active-connection slots held (live WebSocket tunnels).');
      for (const s of g.sites) out.push(`osproxy_connections{site="${label(s.id)}"} ${s.connections}`);
      family('osproxy_in_flight_requests', 'gauge', 'Requests whose answer is not over yet.');
      out.push(`osproxy_in_flight_requests ${g.inFlight.reduce((a, b) => a + b, 0)}`);
      family('osproxy_worker_in_flight_requests', 'gauge', 'Requests in flight on each data-plane worker thread (global workers).');
      for (const [w, n] of g.inFlight.entries()) out.push(`osproxy_worker_in_flight_requests{worker="${w}"} ${n}`);
      family('osproxy_events_dropped_total', 'counter', 'Telemetry events dropped because the bus was full (events.channel_capacity).');
      out.push(`osproxy_events_dropped_total ${g.eventsDropped}`);
      family('osproxy_events_queued', 'gauge', 'Telemetry events waiting for delivery.');
      out.push(`osproxy_events_queued ${g.eventsQueued}`);
      family('osproxy_config_generation', 'gauge', 'Number of the configuration generation serving.');
      out.push(`osproxy_config_generation ${g.generation}`);
      return `${out.join('\n')}\n`;
    },
  };
}

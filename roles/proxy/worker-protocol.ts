/**
 * What the main thread and the data-plane workers say to each other (proxy-workers.ts on the
 * main side, worker-main.ts in each worker). The main thread owns the files, the admin API,
 * telemetry and quota.json; workers own the listeners and the requests. Counters are not in any
 * message: both sides use the shared table (shared-table.ts).
 */
import type { ProxyGlobalConfig } from '../../src/contracts/types.ts';
import { deepFreeze } from '../../src/core/config-loader.ts';
import { HeaderTarget, type ProxySiteFile } from './config.ts';
import type { MitigationEvent } from './mitigation.ts';
import type { QuotaExceeded } from './quota-store.ts';
import type { RequestEvent } from './recent-events.ts';

/** A config generation as the main thread built it: each worker compiles its own from this. */
export interface ConfigSnapshot {
  number: number;
  global: ProxyGlobalConfig;
  /** ProxySiteFile[] with HeaderTarget instances as `{ [HEADER_TAG]: name }` (they do not clone). */
  sites: unknown;
  /** The challenge secret now in use. */
  secret: Uint8Array;
  /** The parser's header cap for new connections. */
  maxHeaderSize: number;
}

export interface WorkerData {
  /** 0-based; the worker's slot in the shared table's in-flight gauges. */
  index: number;
  root: string;
  table: SharedArrayBuffer;
  /** Listen addresses (ip:port), bound by every worker with SO_REUSEPORT. */
  http: string[];
  https: string[];
  snapshot: ConfigSnapshot;
}

/** A request event of a WebSocket 101 carries `ref`, so its tunnel's totals can follow later. */
export type WorkerRequestEvent = RequestEvent & { ref?: number };

/**
 * Request events on their way to the main thread, flattened: EVENT_FIELDS values per event.
 * Structured cloning a dense array of primitives costs a fraction of cloning as many objects,
 * and a busy worker sends one event per request.
 */
export type PackedEvents = (string | number | null)[];
export const EVENT_FIELDS = 12;

/** Appends one event (and its tunnel ref, 0 for none) to a batch; runs once per request in a worker. */
export function packEvent(out: PackedEvents, e: RequestEvent, ref: number): void {
  out.push(e.time, e.site, e.client_ip, e.method, e.host, e.path, e.status, e.bytes_in, e.bytes_out, e.duration_ms, e.rule, ref);
}

/** The events of a batch; runs on the main thread for each batch. */
export function unpackEvents(packed: PackedEvents): WorkerRequestEvent[] {
  const out: WorkerRequestEvent[] = [];
  for (let i = 0; i + EVENT_FIELDS <= packed.length; i += EVENT_FIELDS) {
    const e: WorkerRequestEvent = {
      kind: 'request',
      time: packed[i] as string,
      site: packed[i + 1] as string | null,
      client_ip: packed[i + 2] as string,
      method: packed[i + 3] as string,
      host: packed[i + 4] as string,
      path: packed[i + 5] as string,
      status: packed[i + 6] as number,
      bytes_in: packed[i + 7] as number,
      bytes_out: packed[i + 8] as number,
      duration_ms: packed[i + 9] as number,
      rule: packed[i + 10] as string | null,
    };
    const ref = packed[i + 11] as number;
    if (ref !== 0) e.ref = ref;
    out.push(e);
  }
  return out;
}

export type FromWorker =
  | { type: 'ready'; addresses: string[] }
  | { type: 'failed'; message: string }
  | { type: 'events'; events: PackedEvents }
  | { type: 'tunnel'; ref: number | undefined; site: string; up: number; down: number; duration_ms: number }
  | { type: 'quota_exceeded'; event: QuotaExceeded }
  | { type: 'mitigation'; event: MitigationEvent }
  | { type: 'synced'; id: number };

/**
 * `sync` asks for `synced` once everything sent before it is applied and the events so far are
 * sent: messages on a port arrive in order, so this is a barrier.
 */
export type ToWorker = { type: 'config'; snapshot: ConfigSnapshot } | { type: 'sync'; id: number } | { type: 'close'; graceMs: number };

const HEADER_TAG = '$header';

function mapDeep(value: unknown, fn: (v: unknown) => unknown | undefined): unknown {
  const mapped = fn(value);
  if (mapped !== undefined) return mapped;
  if (Array.isArray(value)) return value.map((v) => mapDeep(v, fn));
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, mapDeep(v, fn)]));
  return value;
}

/** Site files in a form structured clone keeps whole. */
export function encodeSites(sites: readonly ProxySiteFile[]): unknown {
  return mapDeep(sites, (v) => (v instanceof HeaderTarget ? { [HEADER_TAG]: v.header } : undefined));
}

/** The worker's side of encodeSites. */
export function decodeSites(encoded: unknown): ProxySiteFile[] {
  const sites = mapDeep(encoded, (v) => {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return undefined;
    const header = (v as Record<string, unknown>)[HEADER_TAG];
    return typeof header === 'string' && Object.keys(v).length === 1 ? new HeaderTarget(header) : undefined;
  }) as ProxySiteFile[];
  return deepFreeze(sites);
}

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
import type { PlaneRequestEvent, RequestEvent } from './recent-events.ts';

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

/**
 * Request events on their way to the main thread: EVENT_FIELDS numbers per event in a Float64Array
 * (transferred, not copied), strings as indexes into `strings`, where each distinct one appears
 * once per batch. A batch's events share their site, host, method and address strings, so
 * cloning costs a fraction of cloning each event's, and the main thread keeps one copy of each.
 */
export interface PackedEvents {
  strings: string[];
  fields: Float64Array<ArrayBuffer>;
}
const EVENT_FIELDS = 12;
// Of which strings: site, client IP, method, host, path, rule.
const STRING_FIELDS = 6;
// The string index of a null field.
const NO_STRING = -1;

/** Collects a worker's request events into batches; one per worker. */
export class EventPacker {
  count = 0;
  private readonly max: number;
  private readonly fields: Float64Array<ArrayBuffer>;
  private strings: string[] = [];
  private readonly ids = new Map<string, number>();
  // Each string field's last string and its id: a field mostly repeats (one site, one client
  // per connection, the same few methods and paths), so most fields cost a comparison, not a lookup.
  private readonly lastString: (string | null)[] = new Array<string | null>(STRING_FIELDS).fill(null);
  private readonly lastId = new Array<number>(STRING_FIELDS).fill(NO_STRING);

  constructor(max: number) {
    this.max = max;
    this.fields = new Float64Array(max * EVENT_FIELDS);
  }

  /** The batch's id of `s`, the value of string field `field` (0 to STRING_FIELDS - 1). */
  private id(field: number, s: string | null): number {
    if (s === null) return NO_STRING;
    if (s === this.lastString[field]) return this.lastId[field] as number;
    let id = this.ids.get(s);
    if (id === undefined) {
      id = this.strings.push(s) - 1;
      this.ids.set(s, id);
    }
    this.lastString[field] = s;
    this.lastId[field] = id;
    return id;
  }

  /** Adds one event and its tunnel ref (0 for none); true once the batch is full. Runs once per request. */
  add(e: PlaneRequestEvent, ref: number): boolean {
    const f = this.fields;
    const i = this.count * EVENT_FIELDS;
    f[i] = e.time;
    f[i + 1] = this.id(0, e.site);
    f[i + 2] = this.id(1, e.client_ip);
    f[i + 3] = this.id(2, e.method);
    f[i + 4] = this.id(3, e.host);
    f[i + 5] = this.id(4, e.path);
    f[i + 6] = e.status;
    f[i + 7] = e.bytes_in;
    f[i + 8] = e.bytes_out;
    f[i + 9] = e.duration_ms;
    f[i + 10] = this.id(5, e.rule);
    f[i + 11] = ref;
    return ++this.count >= this.max;
  }

  /** The batch so far (its buffer is the caller's to transfer); the next one starts empty. */
  take(): PackedEvents {
    const batch = { strings: this.strings, fields: this.fields.slice(0, this.count * EVENT_FIELDS) };
    this.strings = [];
    this.ids.clear();
    this.lastString.fill(null);
    this.count = 0;
    return batch;
  }
}

let isoSecond = -1;
let isoPrefix = '';
/** `new Date(ms).toISOString()`, with the formatting done once a second (one event per request). */
export function isoTime(ms: number): string {
  const second = Math.floor(ms / 1000);
  if (second !== isoSecond) {
    isoSecond = second;
    isoPrefix = new Date(second * 1000).toISOString().slice(0, 20);
  }
  const milli = ms - second * 1000;
  return `${isoPrefix}${milli < 10 ? '00' : milli < 100 ? '0' : ''}${milli}Z`;
}

/** Hands each event of a batch, with its tunnel ref (0 for none), to `each`; runs on the main thread. */
export function unpackEvents(packed: PackedEvents, each: (e: RequestEvent, ref: number) => void): void {
  const { strings, fields: f } = packed;
  const str = (id: number): string | null => (id === NO_STRING ? null : (strings[id] as string));
  for (let i = 0; i + EVENT_FIELDS <= f.length; i += EVENT_FIELDS) {
    const e: RequestEvent = {
      kind: 'request',
      time: isoTime(f[i] as number),
      site: str(f[i + 1] as number),
      client_ip: str(f[i + 2] as number) as string,
      method: str(f[i + 3] as number) as string,
      host: str(f[i + 4] as number) as string,
      path: str(f[i + 5] as number) as string,
      status: f[i + 6] as number,
      bytes_in: f[i + 7] as number,
      bytes_out: f[i + 8] as number,
      duration_ms: f[i + 9] as number,
      rule: str(f[i + 10] as number),
    };
    each(e, f[i + 11] as number);
  }
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

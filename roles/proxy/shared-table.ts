/**
 * The one place the proxy keeps state that every worker thread shares (issue 7 item 10): quota
 * bytes, rate-limit windows, connection slots, bans and their strikes, send-rate buckets,
 * mitigation meters and solved challenge seeds. It is an open-addressing hash table (linear
 * probing, backward-shift deletion, so no tombstones) in one SharedArrayBuffer, guarded by one
 * futex-style lock: a worker takes the lock, finds or creates its entry, reads and writes the
 * entry's numbers, and lets go, so every count is exact however many workers run.
 *
 * An entry is a string key (at most KEY_BYTES bytes of Latin-1; anything else is replaced by its
 * SHA-256), an expiry (epoch ms; Infinity = never) and VALUE_COUNT numbers. An entry past its
 * expiry is absent: the next probe that meets it deletes it, and the main thread sweeps the rest.
 * The table never grows: at MAX_LOAD of its slots new keys are refused (counted), and every user
 * of the table treats a refused key as "not counted" rather than failing the request.
 */
import { createHash } from 'node:crypto';

/** Numbers an entry holds besides its expiry. */
export const VALUE_COUNT = 6;
/** Longest key stored as itself. */
export const KEY_BYTES = 128;
/** Slots of a table made with the default size (48 MiB of address space, touched as used). */
export const DEFAULT_SLOTS = 1 << 18;
const MAX_LOAD = 0.75;

// Header: Int32 [0] lock (0 free, 1 held, 2 held with waiters), [1] live entries, [2] refused
// inserts, [3] quota-changed and [4] bans-changed flags, [1024 + 16 w] requests in flight on
// worker w: each worker's gauge on a cache line of its own, as every request moves it twice.
/** Worker slots of the in-flight gauges. */
export const MAX_WORKERS = 256;
const CACHE_LINE_I32 = 16;
const IN_FLIGHT = 1024;
const HEADER_BYTES = (IN_FLIGHT + MAX_WORKERS * CACHE_LINE_I32) * 4;
const LOCK = 0;
const LIVE = 1;
const REFUSED = 2;

/** The data_dir files kept from the table (state-file.ts), each with a changed flag. */
export type DirtyFile = 'quota' | 'bans';
const DIRTY: Readonly<Record<DirtyFile, number>> = { quota: 3, bans: 4 };
// Header Float64 indexes of the latest ban expiry and the latest origin backoff expiry (cheap
// "none can be active" tests), each on a cache line of its own.
const BAN_HORIZON = 300;
const BACKOFF_HORIZON = 312;

// Slot: Int32 [0] key length + 1 (0 = empty), [1] key hash; Float64 [1] expiry, [2..7] values;
// bytes 64..191 the key.
const SLOT_BYTES = 192;
const SLOT_I32 = SLOT_BYTES / 4;
const SLOT_F64 = SLOT_BYTES / 8;
const KEY_AT = 64;
const SPINS = 64;

export interface SharedTableOptions {
  /** Slots; a power of two. */
  slots?: number;
}

export class SharedTable {
  /** Hand this to a worker (structured clone shares it) and attach there. */
  readonly buffer: SharedArrayBuffer;
  /**
   * Entry numbers: for a position `at` returned by find, `values[at]` is the expiry and
   * `values[at + 1]` .. `values[at + VALUE_COUNT]` the entry's numbers.
   */
  readonly values: Float64Array;
  /** True when the last find created its entry (numbers zero, expiry Infinity). */
  created = false;
  private readonly header: Int32Array;
  private readonly headerF64: Float64Array;
  private readonly i32: Int32Array;
  private readonly u8: Uint8Array;
  private readonly mask: number;
  private readonly maxLive: number;
  private readonly scratch = new Uint8Array(KEY_BYTES);
  /** The hash of the key encode() last wrote. */
  private hash = 0;

  private constructor(buffer: SharedArrayBuffer) {
    this.buffer = buffer;
    const slots = (buffer.byteLength - HEADER_BYTES) / SLOT_BYTES;
    if (!Number.isInteger(slots) || slots < 2 || (slots & (slots - 1)) !== 0) throw new Error('shared table: bad buffer size');
    this.header = new Int32Array(buffer, 0, HEADER_BYTES / 4);
    this.headerF64 = new Float64Array(buffer, 0, HEADER_BYTES / 8);
    this.i32 = new Int32Array(buffer, HEADER_BYTES);
    this.values = new Float64Array(buffer, HEADER_BYTES);
    this.u8 = new Uint8Array(buffer, HEADER_BYTES);
    this.mask = slots - 1;
    this.maxLive = Math.floor(slots * MAX_LOAD);
  }

  static create(opts: SharedTableOptions = {}): SharedTable {
    const slots = opts.slots ?? DEFAULT_SLOTS;
    return new SharedTable(new SharedArrayBuffer(HEADER_BYTES + slots * SLOT_BYTES));
  }

  static attach(buffer: SharedArrayBuffer): SharedTable {
    return new SharedTable(buffer);
  }

  /** Takes the table's lock; every find and every read or write of `values` happens under it. */
  lock(): void {
    const h = this.header;
    let c = Atomics.compareExchange(h, LOCK, 0, 1);
    if (c === 0) return;
    for (let i = 0; i < SPINS; i++) {
      if (Atomics.load(h, LOCK) === 0 && (c = Atomics.compareExchange(h, LOCK, 0, 1)) === 0) return;
    }
    if (c !== 2) c = Atomics.exchange(h, LOCK, 2);
    while (c !== 0) {
      Atomics.wait(h, LOCK, 2);
      c = Atomics.exchange(h, LOCK, 2);
    }
  }

  unlock(): void {
    if (Atomics.sub(this.header, LOCK, 1) !== 1) {
      Atomics.store(this.header, LOCK, 0);
      Atomics.notify(this.header, LOCK, 1);
    }
  }

  /**
   * The entry of `key` + `suffix` (under the lock): its position in `values`, or -1 when it is
   * absent and `create` is false, or the table is full. A created entry never expires until its
   * user says so.
   */
  find(key: string, now: number, create: boolean, suffix = ''): number {
    const len = this.encode(key, suffix);
    const hash = this.hash;
    const { i32, values, mask } = this;
    let i = hash & mask;
    for (let probes = 0; probes <= mask; probes++) {
      const s = i * SLOT_I32;
      const stored = i32[s] as number;
      if (stored === 0) {
        this.created = false;
        if (!create) return -1;
        if (Atomics.load(this.header, LIVE) >= this.maxLive) {
          Atomics.add(this.header, REFUSED, 1);
          return -1;
        }
        i32[s] = len + 1;
        i32[s + 1] = hash;
        this.u8.set(this.scratch.subarray(0, len), i * SLOT_BYTES + KEY_AT);
        const at = i * SLOT_F64 + 1;
        values[at] = Infinity;
        values.fill(0, at + 1, at + 1 + VALUE_COUNT);
        Atomics.add(this.header, LIVE, 1);
        this.created = true;
        return at;
      }
      if ((values[i * SLOT_F64 + 1] as number) <= now) {
        // Expired: delete it here; the backward shift may have moved another entry into slot i.
        this.removeSlot(i);
        continue;
      }
      if (stored === len + 1 && i32[s + 1] === hash && this.keyIs(i, len)) {
        this.created = false;
        return i * SLOT_F64 + 1;
      }
      i = (i + 1) & mask;
    }
    this.created = false;
    return -1;
  }

  /** Deletes the entry at `at` (a find result; under the lock). */
  remove(at: number): void {
    this.removeSlot((at - 1) / SLOT_F64);
  }

  /**
   * Visits every live entry whose key starts with `prefix` (under the lock); `visit` may remove
   * the entry it is given but must not call find. Admin reads and the main thread's writes of
   * bans.json use it, never the hot path.
   */
  scan(prefix: string, now: number, visit: (key: string, at: number) => void): void {
    const { i32, values, mask } = this;
    // Start after an empty slot: no cluster then wraps round the scan's end, so a removal only
    // ever shifts entries the scan has yet to reach (into the slot it is on, or later ones).
    let first = 0;
    while (first <= mask && i32[first * SLOT_I32] !== 0) first++;
    for (let k = 1; k <= mask + 1; k++) {
      const i = (first + k) & mask;
      for (;;) {
        const stored = i32[i * SLOT_I32] as number;
        if (stored === 0) break;
        const at = i * SLOT_F64 + 1;
        if ((values[at] as number) <= now) break;
        // The prefix is compared on the bytes: a whole scan makes no string of the other users' keys.
        if (!this.keyStartsWith(i, prefix)) break;
        const key = this.keyAt(i);
        visit(key, at);
        // Visit again only if a removal shifted another entry into slot i.
        if (i32[i * SLOT_I32] === stored && this.keyAt(i) === key) break;
      }
    }
  }

  /**
   * Deletes expired entries that no probe met (under the lock): slots `from` to `from + count`,
   * so the main thread can sweep the table a slice at a time. Returns where to go on from.
   */
  sweep(now: number, from: number, count: number): number {
    const end = Math.min(this.mask + 1, from + count);
    for (let i = from; i < end; i++) {
      // A removal shifts the next entry into slot i: look at it again.
      while (this.i32[i * SLOT_I32] !== 0 && (this.values[i * SLOT_F64 + 1] as number) <= now) this.removeSlot(i);
    }
    return end > this.mask ? 0 : end;
  }

  /** Live entries (some may have expired since they were last met). */
  size(): number {
    return Atomics.load(this.header, LIVE);
  }

  /** Inserts refused since the start because the table was full. */
  refused(): number {
    return Atomics.load(this.header, REFUSED);
  }

  /** Marks the state of `file` as changed; the main thread writes the file when it sees the mark. */
  markDirty(file: DirtyFile): void {
    // Read first: the flags' line is the lock's, and a write would take it from the other workers.
    if (Atomics.load(this.header, DIRTY[file]) === 0) Atomics.store(this.header, DIRTY[file], 1);
  }

  /** True (and clears the mark) when the state of `file` changed since the last call. */
  takeDirty(file: DirtyFile): boolean {
    return Atomics.exchange(this.header, DIRTY[file], 0) === 1;
  }

  /** Worker `w`'s requests in flight: add `by` (under no lock; the gauge is atomic on its own). */
  addInFlight(w: number, by: number): void {
    Atomics.add(this.header, IN_FLIGHT + w * CACHE_LINE_I32, by);
  }

  inFlight(w: number): number {
    return Atomics.load(this.header, IN_FLIGHT + w * CACHE_LINE_I32);
  }

  /** The latest expiry of any ban ever made (under the lock to write; a plain read is only a hint). */
  get banHorizon(): number {
    return this.headerF64[BAN_HORIZON] as number;
  }

  set banHorizon(until: number) {
    this.headerF64[BAN_HORIZON] = until;
  }

  /** The latest expiry of any origin backoff entry ever made (as banHorizon). */
  get backoffHorizon(): number {
    return this.headerF64[BACKOFF_HORIZON] as number;
  }

  set backoffHorizon(until: number) {
    this.headerF64[BACKOFF_HORIZON] = until;
  }

  /**
   * Puts the bytes of `key` followed by `suffix` into `scratch` and their hash into `hash`;
   * returns their length. Two parts, so callers need not join a prefix and an id per request.
   */
  private encode(key: string, suffix: string): number {
    const s = this.scratch;
    const n = key.length + suffix.length;
    if (n <= KEY_BYTES) {
      // FNV-1a over the bytes as they are written.
      let h = 0x811c9dc5;
      let wide = false;
      for (let i = 0; i < key.length; i++) {
        const c = key.charCodeAt(i);
        wide ||= c > 0xff;
        s[i] = c;
        h = Math.imul(h ^ c, 0x01000193);
      }
      for (let i = 0, at = key.length; i < suffix.length; i++, at++) {
        const c = suffix.charCodeAt(i);
        wide ||= c > 0xff;
        s[at] = c;
        h = Math.imul(h ^ c, 0x01000193);
      }
      if (!wide) {
        // Signed, as the Int32Array stores it.
        this.hash = h | 0;
        return n;
      }
    }
    // Longer or wider keys are stored by their digest; no proxy key needs this in practice.
    const digest = createHash('sha256').update(key + suffix).digest().toString('latin1');
    return this.encode(`#${digest}`, '');
  }

  private keyAt(slot: number): string {
    const start = slot * SLOT_BYTES + KEY_AT;
    const end = start + (this.i32[slot * SLOT_I32] as number) - 1;
    let key = '';
    for (let b = start; b < end; b++) key += String.fromCharCode(this.u8[b] as number);
    return key;
  }

  /** Whether the key in `slot` starts with `prefix` (Latin-1, as every prefix of the proxy is). */
  private keyStartsWith(slot: number, prefix: string): boolean {
    if ((this.i32[slot * SLOT_I32] as number) - 1 < prefix.length) return false;
    const start = slot * SLOT_BYTES + KEY_AT;
    for (let b = 0; b < prefix.length; b++) if (this.u8[start + b] !== prefix.charCodeAt(b)) return false;
    return true;
  }

  private keyIs(slot: number, len: number): boolean {
    const { u8, scratch } = this;
    const start = slot * SLOT_BYTES + KEY_AT;
    for (let b = 0; b < len; b++) if (u8[start + b] !== scratch[b]) return false;
    return true;
  }

  private removeSlot(slot: number): void {
    const { i32, u8, mask } = this;
    let hole = slot;
    let j = slot;
    for (;;) {
      j = (j + 1) & mask;
      if (i32[j * SLOT_I32] === 0) break;
      const home = (i32[j * SLOT_I32 + 1] as number) & mask;
      // Entry j may move back into the hole unless its home lies cyclically after the hole.
      if (((j - home) & mask) >= ((j - hole) & mask)) {
        u8.copyWithin(hole * SLOT_BYTES, j * SLOT_BYTES, (j + 1) * SLOT_BYTES);
        hole = j;
      }
    }
    i32[hole * SLOT_I32] = 0;
    Atomics.sub(this.header, LIVE, 1);
  }
}

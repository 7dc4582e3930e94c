/**
 * Traffic control of a host-side interface (a container's host veth), shaped in two directions:
 *
 * - down = what the host sends INTO the interface, towards the container (the server's RX):
 *   HTB on the interface's root qdisc.
 * - up = what arrives FROM the container (the server's TX): an ingress qdisc on the interface
 *   whose u32 match-all filter redirects every packet (`mirred egress redirect`) to a per-interface
 *   IFB device, with HTB on the IFB's root. The kernel here has no `police`, so ingress traffic can
 *   only be shaped after that detour.
 *
 * Each shaped direction is the same two-class HTB tree: qdisc `1:` (default class 1:10), parent
 * class 1:1 at the ceiling and leaf class 1:10 with (rate, ceil). The parent is needed because a
 * class hanging directly off the qdisc can never borrow: it is held at its `rate` whatever its
 * `ceil` says (measured: rate 5mbit ceil 10mbit gave 4.8 Mbit/s).
 *
 * Used by the node agent's enforce phase and by the container daemon. All changes of one call
 * go through one `tc -force -batch -` (plus `ip -force -batch -` for the IFB devices), so 1,000
 * interfaces cost a handful of processes, and a failing line is attributed to its interface by
 * the line number tc prints. An in-memory cache of what was applied skips unchanged interfaces.
 */
import { execFile } from 'node:child_process';

// ---------------------------------------------------------------------------------------------
// Public types

/** One direction's limits. Bits per second; burst in bytes. */
export interface Shape {
  /** Guaranteed rate, bit/s. */
  rateBps: number;
  /** Cap, bit/s; defaults to rateBps and must not be below it. The interface can use up to this. */
  ceilBps?: number;
  /** Token bucket size in bytes for both rate and ceil; defaults to defaultBurstBytes(). */
  burstBytes?: number;
}

export interface InterfaceRef {
  iface: string;
  ifindex: number;
}

/** Desired rules of one interface; null/undefined for a direction means "no rule that way". */
export interface InterfaceShape extends InterfaceRef {
  down?: Shape | null;
  up?: Shape | null;
}

export interface ApplyResult {
  /** Interfaces whose kernel state was changed (or confirmed) by this call without error. */
  applied: number;
  /** Interfaces skipped because the cache says they already are in the desired state. */
  unchanged: number;
  failed: { iface: string; error: string }[];
}

/** An interface whose real rules are missing or differ, with what was found. */
export interface VerifyProblem extends InterfaceShape {
  problem: string;
}

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs one program. Resolves with its exit code and output (a non-zero exit is not a rejection);
 * rejects only when the program could not be started or timed out.
 */
export type Runner = (file: string, args: readonly string[], input?: string) => Promise<RunResult>;

export interface TrafficControlLogger {
  warn(o: object, m: string): void;
  debug?(o: object, m: string): void;
}

export interface TrafficControlOptions {
  tcPath?: string;
  ipPath?: string;
  /** Run every command in this named network namespace (`tc -n NS`, `ip -n NS`); tests use it. */
  netns?: string;
  /** IFB name prefix, at most 5 characters so prefix + any ifindex fits in 15. Default `hkb`. */
  ifbPrefix?: string;
  logger?: TrafficControlLogger;
  /** Replaces execFile, to count or fake processes. */
  runner?: Runner;
  /** Kill a tc/ip process after this long. Default 30 s. */
  timeoutMs?: number;
}

/** See the functions of the same name inside createTrafficControl for when each runs. */
export interface TrafficControl {
  /** Makes the named interfaces' rules equal to `shapes`; unchanged ones cost no process. */
  apply(shapes: InterfaceShape[]): Promise<ApplyResult>;
  /** Removes all rules and the IFB of each interface; absent rules count as removed. */
  remove(ifaces: InterfaceRef[]): Promise<ApplyResult>;
  /** Creates the IFB devices of new interfaces ahead of any limit. */
  prepare(refs: InterfaceRef[]): Promise<ApplyResult>;
  /** Reads the kernel (not the cache); returns the shapes whose rules are missing or differ. */
  verify(shapes: InterfaceShape[]): Promise<VerifyProblem[]>;
  /** The interface disappeared: drop its cache entry, delete its IFB on the next call. */
  forget(iface: string): void;
  /** Deletes IFBs whose interface no longer exists; returns how many. */
  sweepOrphanIfbs(): Promise<number>;
  /** Packets the root qdisc of each named interface dropped since it was made (one `tc -s` read); absent: no root qdisc. */
  rootDrops(ifaces: string[]): Promise<Map<string, number>>;
}

// ---------------------------------------------------------------------------------------------
// Constants of the tree. Handles and classids are hexadecimal to tc: `default 10` is class 1:10.

const QDISC_HANDLE = '1:';
const PARENT_CLASS = '1:1';
const LEAF_CLASS = '1:10';
const DEFAULT_MINOR_HEX = '10';
const FILTER_PRIO = 1;
const FILTER_HANDLE = '800::800';
const IFB_TXQUEUELEN = 1000; // ifb's own default is 32, and HTB's leaf pfifo takes its limit from it
const IFNAMSIZ = 15;
const IFACE_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,14}$/;
const DEFAULT_IFB_PREFIX = 'hkb';

export const MIN_RATE_BPS = 8; // tc works in bytes per second: anything below 1 byte/s is zero
/** HTB keeps a bucket as a u32 count of 64 ns ticks (~275 s); stay far below it. */
export const MAX_BURST_SECONDS = 60;
export const MAX_BURST_BYTES = 1024 * 1024 * 1024;
const BURST_WINDOW_S = 0.01;
const MIN_BURST_BYTES = 64 * 1024; // one GSO/GRO super-packet; veth and IFB pass them whole
const MAX_DEFAULT_BURST_BYTES = 256 * 1024 * 1024;
const MTU_BYTES = 1600;

// Errors that mean "already as wanted" for the line that produced them.
const ABSENT = /Cannot find device|Cannot delete qdisc with handle of zero|Cannot find specified qdisc|Invalid handle|No such file or directory|No such device/;
const EXISTS = /File exists/;
/** A root qdisc already there (a re-prepared IFB keeps the one it has; apply classifies it). */
const ROOT_TAKEN = /File exists|Exclusivity flag on/;

// ---------------------------------------------------------------------------------------------
// Pure helpers (exported for the unit tests)

/** The IFB device of an interface: prefix + ifindex, stable across agent restarts. Pure. */
export function ifbName(ifindex: number, prefix: string = DEFAULT_IFB_PREFIX): string {
  return `${prefix}${ifindex}`;
}

/** What the kernel is given for one direction, after defaults. */
export interface HtbParams {
  rateBps: number;
  ceilBps: number;
  burstBytes: number;
  cburstBytes: number;
  quantum: number;
}

/**
 * The burst used when none is given, for a rate in bit/s. Pure.
 * 10 ms of the rate: at several Gbit/s the tc default (rate/HZ + MTU, about 1.6 KB with
 * high-resolution timers) lets HTB reach only ~65% of 5 Gbit/s on a veth, 10 ms reaches ~95%.
 * At least 64 KiB so one GSO super-packet fits without driving the bucket into debt, but never
 * more than one second of the rate (a 64 KiB bucket at 8 kbit/s would be a minute of line rate).
 */
export function defaultBurstBytes(rateBps: number): number {
  const bytesPerSec = rateBps / 8;
  const b = Math.max(Math.round(bytesPerSec * BURST_WINDOW_S), MIN_BURST_BYTES);
  return Math.min(b, Math.max(Math.round(bytesPerSec), MTU_BYTES), MAX_DEFAULT_BURST_BYTES);
}

/**
 * HTB's DRR quantum in bytes: rate/10 (tc's r2q default) kept inside [MTU, 200000]. Setting it
 * explicitly is what silences "quantum of class is big" above ~16 Mbit/s. Pure.
 */
export function quantumFor(rateBps: number): number {
  return Math.min(200_000, Math.max(MTU_BYTES, Math.round(rateBps / 8 / 10)));
}

/**
 * Validates a Shape and fills its defaults. Pure; throws a RangeError naming the bad field.
 * Rates are rounded to whole bits per second.
 */
export function normalizeShape(s: Shape): HtbParams {
  const rate = Math.round(s.rateBps);
  if (!Number.isFinite(s.rateBps) || rate < MIN_RATE_BPS) throw new RangeError(`rateBps must be at least ${MIN_RATE_BPS}, got ${s.rateBps}`);
  const ceil = s.ceilBps === undefined ? rate : Math.round(s.ceilBps);
  if (!Number.isFinite(ceil) || ceil < rate) throw new RangeError(`ceilBps must be a number not below rateBps (${rate}), got ${s.ceilBps}`);
  let burst: number;
  let cburst: number;
  if (s.burstBytes === undefined) {
    burst = defaultBurstBytes(rate);
    cburst = defaultBurstBytes(ceil);
  } else {
    burst = cburst = Math.round(s.burstBytes);
    if (!Number.isFinite(s.burstBytes) || burst < 1 || burst > MAX_BURST_BYTES) {
      throw new RangeError(`burstBytes must be between 1 and ${MAX_BURST_BYTES}, got ${s.burstBytes}`);
    }
    if ((burst * 8) / rate > MAX_BURST_SECONDS) {
      throw new RangeError(`burstBytes ${burst} is more than ${MAX_BURST_SECONDS} s at ${rate} bit/s`);
    }
  }
  return { rateBps: rate, ceilBps: ceil, burstBytes: burst, cburstBytes: cburst, quantum: quantumFor(ceil) };
}

function sameParams(a: HtbParams | null | undefined, b: HtbParams | null | undefined): boolean {
  if (!a || !b) return !a && !b;
  return a.rateBps === b.rateBps && a.ceilBps === b.ceilBps && a.burstBytes === b.burstBytes && a.cburstBytes === b.cburstBytes && a.quantum === b.quantum;
}

/** The two class lines of one shaped device. Pure. */
export function classLines(dev: string, p: HtbParams): string[] {
  return [
    `class replace dev ${dev} parent ${QDISC_HANDLE} classid ${PARENT_CLASS} htb rate ${p.ceilBps}bit ceil ${p.ceilBps}bit burst ${p.cburstBytes} cburst ${p.cburstBytes} quantum ${p.quantum}`,
    `class replace dev ${dev} parent ${PARENT_CLASS} classid ${LEAF_CLASS} htb rate ${p.rateBps}bit ceil ${p.ceilBps}bit burst ${p.burstBytes} cburst ${p.cburstBytes} quantum ${p.quantum}`,
  ];
}

/**
 * What is on a device now, as far as planning needs it:
 * root: `ours` = htb 1: with default 1:10; `none` = the kernel's default (handle 0:), which
 * `replace` swaps out; `other` = anything else, deleted first when we need the root.
 */
export interface DevState {
  root: 'ours' | 'none' | 'other';
  ingress: boolean;
  ifb: 'absent' | 'down' | 'up';
  ifbRoot: 'ours' | 'none' | 'other';
}

export const EMPTY_STATE: DevState = { root: 'none', ingress: false, ifb: 'absent', ifbRoot: 'none' };

export interface BatchLine {
  cmd: string;
  dir: 'down' | 'up';
  /** An error matching this leaves the line counted as done (e.g. deleting what is not there). */
  tolerate?: RegExp;
}

export interface InterfacePlan {
  /** IFB creation and `up`, before the tc lines that redirect to it. */
  ipPre: BatchLine[];
  tc: BatchLine[];
  /** IFBs to delete, after the tc lines that stopped redirecting to them. */
  deleteLinks: string[];
}

export interface PlanInput {
  iface: string;
  ifb: string;
  from: DevState;
  /** What this library applied last, when `from` comes from its cache: equal directions are skipped. */
  prev?: { down: HtbParams | null; up: HtbParams | null };
  to: { down: HtbParams | null; up: HtbParams | null };
  /** Keep the IFB when the up direction goes away (apply); only remove() deletes it. */
  keepIfb?: boolean;
}

function rootLines(dev: string, root: DevState['root'], dir: 'down' | 'up'): BatchLine[] {
  const add = `root handle ${QDISC_HANDLE} htb default ${DEFAULT_MINOR_HEX}`;
  // HTB has no change operation: `replace` on an existing htb 1: fails, so it is only sent when
  // the root is the kernel's default; someone else's root is deleted first.
  if (root === 'other') return [{ cmd: `qdisc del dev ${dev} root`, dir, tolerate: ABSENT }, { cmd: `qdisc add dev ${dev} ${add}`, dir }];
  if (root === 'none') return [{ cmd: `qdisc replace dev ${dev} ${add}`, dir }];
  return [];
}

/**
 * The batch lines that move one interface from `from` to `to`. Pure; runs inside apply/remove.
 * Returns empty lists when nothing needs doing.
 */
export function planInterface(p: PlanInput): InterfacePlan {
  const { iface, ifb, from, prev, to } = p;
  const plan: InterfacePlan = { ipPre: [], tc: [], deleteLinks: [] };
  if (to.down) {
    plan.tc.push(...rootLines(iface, from.root, 'down'));
    if (from.root !== 'ours' || !prev || !sameParams(prev.down, to.down)) {
      for (const cmd of classLines(iface, to.down)) plan.tc.push({ cmd, dir: 'down' });
    }
  } else if (from.root === 'ours') {
    plan.tc.push({ cmd: `qdisc del dev ${iface} root`, dir: 'down', tolerate: ABSENT });
  }
  if (to.up) {
    if (from.ifb === 'absent') plan.ipPre.push({ cmd: `link add name ${ifb} txqueuelen ${IFB_TXQUEUELEN} type ifb`, dir: 'up', tolerate: EXISTS });
    if (from.ifb !== 'up') plan.ipPre.push({ cmd: `link set dev ${ifb} up`, dir: 'up' });
    // The IFB is shaped before traffic is redirected to it, so there is no unshaped moment.
    const ifbRoot = from.ifb === 'absent' ? 'none' : from.ifbRoot;
    plan.tc.push(...rootLines(ifb, ifbRoot, 'up'));
    if (ifbRoot !== 'ours' || !prev || !sameParams(prev.up, to.up)) {
      for (const cmd of classLines(ifb, to.up)) plan.tc.push({ cmd, dir: 'up' });
    }
    if (!from.ingress) plan.tc.push({ cmd: `qdisc replace dev ${iface} handle ffff: ingress`, dir: 'up' });
    // With a handle, `filter replace` is idempotent; without one it would add a second filter.
    if (!from.ingress || !prev || !prev.up) {
      plan.tc.push({
        cmd: `filter replace dev ${iface} parent ffff: protocol all prio ${FILTER_PRIO} handle ${FILTER_HANDLE} u32 match u32 0 0 action mirred egress redirect dev ${ifb}`,
        dir: 'up',
      });
    }
  } else {
    if (from.ingress) plan.tc.push({ cmd: `qdisc del dev ${iface} ingress`, dir: 'up', tolerate: ABSENT });
    if (from.ifb !== 'absent' && !p.keepIfb) plan.deleteLinks.push(ifb);
  }
  return plan;
}

const GROUP_OWNER = '\0group';

/**
 * ip batch lines deleting `names` at once: each is moved into `group`, then the group is deleted
 * (one RCU grace period for all instead of one per link). Pure; the last line is the group delete.
 * A group number is random per call, so no other link is expected in it.
 */
export function linkDeleteLines(names: string[], group: number): BatchLine[] {
  if (names.length === 0) return [];
  return [
    ...names.map((n) => ({ cmd: `link set dev ${n} group ${group}`, dir: 'up' as const, tolerate: ABSENT })),
    { cmd: `link del group ${group}`, dir: 'up', tolerate: ABSENT },
  ];
}

/** The state the cache vouches for after a successful apply of `applied`. Pure. */
export function stateFromApplied(applied: { down: HtbParams | null; up: HtbParams | null }): DevState {
  return applied.up
    ? { root: applied.down ? 'ours' : 'none', ingress: true, ifb: 'up', ifbRoot: 'ours' }
    : { root: applied.down ? 'ours' : 'none', ingress: false, ifb: 'absent', ifbRoot: 'none' };
}

/**
 * Parses the stderr of `tc -force -batch -` / `ip -force -batch -`. Pure. Returns the 1-based
 * batch line number of every failed command with the error text printed before its
 * `Command failed -:N` line (warnings of earlier, successful lines may be included).
 */
export function parseBatchErrors(stderr: string): Map<number, string> {
  const out = new Map<number, string>();
  let pending: string[] = [];
  for (const raw of stderr.split('\n')) {
    const line = raw.trim();
    if (line === '') continue;
    const m = /^Command failed (?:.*):(\d+)$/.exec(line);
    if (m?.[1] !== undefined) {
      out.set(Number(m[1]), pending.join('; ') || 'command failed');
      pending = [];
    } else {
      pending.push(line);
    }
  }
  return out;
}

export interface QdiscEntry {
  kind: string;
  handle: string;
  dev: string;
  root: boolean;
  parent?: string;
  /** HTB's default class minor, when kind is htb. */
  defaultMinor?: number;
}

export interface DevQdiscs {
  root?: QdiscEntry;
  /** The ingress-hook qdisc (ingress or clsact). */
  ingress?: QdiscEntry;
}

/** Parses `tc -j qdisc show` (all devices). Pure; returns root and ingress qdisc per device. */
export function parseQdiscJson(text: string): Map<string, DevQdiscs> {
  const out = new Map<string, DevQdiscs>();
  const data: unknown = JSON.parse(text.trim() === '' ? '[]' : text);
  if (!Array.isArray(data)) throw new Error('tc -j qdisc show: not a JSON array');
  for (const raw of data as Record<string, unknown>[]) {
    if (typeof raw !== 'object' || raw === null) continue;
    const dev = raw['dev'];
    const kind = raw['kind'];
    if (typeof dev !== 'string' || typeof kind !== 'string') continue;
    const opts = raw['options'] as Record<string, unknown> | undefined;
    const def = opts?.['default'];
    const entry: QdiscEntry = {
      kind,
      handle: typeof raw['handle'] === 'string' ? raw['handle'] : '',
      dev,
      root: raw['root'] === true,
      ...(typeof raw['parent'] === 'string' ? { parent: raw['parent'] } : {}),
      ...(def !== undefined ? { defaultMinor: typeof def === 'number' ? def : Number.parseInt(String(def), 16) } : {}),
    };
    const slot = out.get(dev) ?? {};
    if (entry.root) slot.root = entry;
    else if (entry.kind === 'ingress' || entry.kind === 'clsact') slot.ingress = entry;
    out.set(dev, slot);
  }
  return out;
}

/**
 * Parses `tc -s -j qdisc show` (all devices). Pure; returns each device's root qdisc drop count.
 * HTB counts a packet its leaf refused at the root too, so the root's count is the device's.
 */
export function parseQdiscDrops(text: string): Map<string, number> {
  const out = new Map<string, number>();
  const data: unknown = JSON.parse(text.trim() === '' ? '[]' : text);
  if (!Array.isArray(data)) throw new Error('tc -s -j qdisc show: not a JSON array');
  for (const raw of data as Record<string, unknown>[]) {
    if (typeof raw !== 'object' || raw === null || raw['root'] !== true || typeof raw['dev'] !== 'string') continue;
    const drops = raw['drops'];
    if (typeof drops === 'number' && Number.isSafeInteger(drops)) out.set(raw['dev'], drops);
  }
  return out;
}

/** Classifies a device's root qdisc for planning. Pure. */
export function classifyRoot(q: QdiscEntry | undefined): DevState['root'] {
  if (!q || q.handle === '0:') return 'none';
  if (q.kind === 'htb' && q.handle === QDISC_HANDLE && q.defaultMinor === Number.parseInt(DEFAULT_MINOR_HEX, 16)) return 'ours';
  return 'other';
}

export interface LinkEntry {
  ifindex: number;
  ifname: string;
  up: boolean;
  kind?: string;
}

/** Parses `ip -j [-d] link show`. Pure; returns links by name. */
export function parseLinkJson(text: string): Map<string, LinkEntry> {
  const out = new Map<string, LinkEntry>();
  const data: unknown = JSON.parse(text.trim() === '' ? '[]' : text);
  if (!Array.isArray(data)) throw new Error('ip -j link show: not a JSON array');
  for (const raw of data as Record<string, unknown>[]) {
    if (typeof raw !== 'object' || raw === null) continue;
    const ifindex = raw['ifindex'];
    const ifname = raw['ifname'];
    if (typeof ifindex !== 'number' || typeof ifname !== 'string') continue;
    const flags = Array.isArray(raw['flags']) ? (raw['flags'] as unknown[]) : [];
    const info = raw['linkinfo'] as Record<string, unknown> | undefined;
    const kind = info?.['info_kind'];
    out.set(ifname, { ifindex, ifname, up: flags.includes('UP'), ...(typeof kind === 'string' ? { kind } : {}) });
  }
  return out;
}

export interface HtbClass {
  classid: string;
  /** `root` for a class attached to the qdisc itself. */
  parent: string;
  rateBps: number;
  ceilBps: number;
  burstBytes: number;
  cburstBytes: number;
}

const RATE_UNITS: Record<string, number> = { '': 1, K: 1e3, M: 1e6, G: 1e9, T: 1e12, Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, Ti: 1024 ** 4 };
const SIZE_UNITS: Record<string, number> = { b: 1, Kb: 1024, Mb: 1024 ** 2, Gb: 1024 ** 3 };

/** Parses tc's printed rate (`10Mbit`, `999Kbit`, `1Gibit`) into bit/s; NaN if unreadable. Pure. */
export function parseTcRate(s: string): number {
  const m = /^([0-9.]+)(|K|M|G|T|Ki|Mi|Gi|Ti)bit$/.exec(s);
  if (!m?.[1] || m[2] === undefined) return Number.NaN;
  return Number(m[1]) * (RATE_UNITS[m[2]] ?? Number.NaN);
}

/** Parses tc's printed size (`1600b`, `64Kb`, `12Mb`, `2.92969e+06Kb`, `100Kb/1`) into bytes. Pure. */
export function parseTcSize(s: string): number {
  const m = /^([0-9.e+]+)(b|Kb|Mb|Gb)(?:\/\d+)?$/.exec(s);
  if (!m?.[1] || !m[2]) return Number.NaN;
  return Number(m[1]) * (SIZE_UNITS[m[2]] ?? Number.NaN);
}

/**
 * Parses the output of `tc class show dev X` for HTB classes. Pure. Accepts the text form
 * (iproute2 6.1 prints text for classes even with -j) and the JSON form of later releases, where
 * rates are bytes per second and sizes bytes.
 */
export function parseHtbClasses(text: string): HtbClass[] {
  const out: HtbClass[] = [];
  const trimmed = text.trim();
  if (trimmed.startsWith('[')) {
    for (const raw of JSON.parse(trimmed) as Record<string, unknown>[]) {
      if (raw['class'] !== 'htb' || typeof raw['handle'] !== 'string') continue;
      out.push({
        classid: raw['handle'],
        parent: raw['root'] === true ? 'root' : String(raw['parent'] ?? ''),
        rateBps: Number(raw['rate']) * 8,
        ceilBps: Number(raw['ceil']) * 8,
        burstBytes: Number(raw['burst']),
        cburstBytes: Number(raw['cburst']),
      });
    }
    return out;
  }
  for (const line of trimmed.split('\n')) {
    const t = line.trim().split(/\s+/);
    if (t[0] !== 'class' || t[1] !== 'htb' || t[2] === undefined) continue;
    const val = (key: string): string => {
      const i = t.indexOf(key);
      return i >= 0 ? (t[i + 1] ?? '') : '';
    };
    out.push({
      classid: t[2],
      parent: t.includes('root') ? 'root' : val('parent'),
      rateBps: parseTcRate(val('rate')),
      ceilBps: parseTcRate(val('ceil')),
      burstBytes: parseTcSize(val('burst')),
      cburstBytes: parseTcSize(val('cburst')),
    });
  }
  return out;
}

/**
 * The device a `mirred ... redirect` sends to, from `tc [-j] filter show dev X parent ffff:`
 * (JSON, or the text form as a fallback); null when there is no such filter. Pure.
 */
export function parseRedirectTarget(text: string): string | null {
  const t = text.trim();
  if (t.startsWith('[')) {
    for (const f of JSON.parse(t) as Record<string, unknown>[]) {
      const opts = f['options'] as Record<string, unknown> | undefined;
      const actions = Array.isArray(opts?.['actions']) ? (opts['actions'] as Record<string, unknown>[]) : [];
      for (const a of actions) {
        if (a['kind'] === 'mirred' && a['mirred_action'] === 'redirect' && typeof a['to_dev'] === 'string') return a['to_dev'];
      }
    }
    return null;
  }
  const m = /mirred \(Egress Redirect to device ([^)\s]+)\)/.exec(t);
  return m?.[1] ?? null;
}

function near(actual: number, want: number, rel: number, abs: number): boolean {
  return Number.isFinite(actual) && Math.abs(actual - want) <= want * rel + abs;
}

/**
 * Compares the classes read from a device with what apply would have set. Pure.
 * Returns null when they match, else a short description. tc prints rates with ~3 significant
 * digits and bursts re-derived from 64 ns ticks, hence the tolerances.
 */
export function compareClasses(classes: HtbClass[], want: HtbParams): string | null {
  const parent = classes.find((c) => c.classid === PARENT_CLASS);
  const leaf = classes.find((c) => c.classid === LEAF_CLASS);
  if (!parent || !leaf) return `class ${parent ? LEAF_CLASS : PARENT_CLASS} missing`;
  if (leaf.parent !== PARENT_CLASS) return `class ${LEAF_CLASS} has parent ${leaf.parent}`;
  const rates: [string, number, number][] = [
    [`${PARENT_CLASS} rate`, parent.rateBps, want.ceilBps],
    [`${PARENT_CLASS} ceil`, parent.ceilBps, want.ceilBps],
    [`${LEAF_CLASS} rate`, leaf.rateBps, want.rateBps],
    [`${LEAF_CLASS} ceil`, leaf.ceilBps, want.ceilBps],
  ];
  for (const [name, got, exp] of rates) if (!near(got, exp, 0.01, 8)) return `${name} is ${got} bit/s, want ${exp}`;
  const sizes: [string, number, number][] = [
    [`${LEAF_CLASS} burst`, leaf.burstBytes, want.burstBytes],
    [`${LEAF_CLASS} cburst`, leaf.cburstBytes, want.cburstBytes],
  ];
  for (const [name, got, exp] of sizes) if (!near(got, exp, 0.1, 2048)) return `${name} is ${got} bytes, want ${exp}`;
  return null;
}

const READ_SEPARATOR = 'filter show dev lo parent ffff:';

export interface ReadCommand {
  kind: 'class' | 'filter';
}

/**
 * Splits the stdout of a `tc -j -force -batch -` of reads in which every command was preceded by
 * the separator `filter show dev lo parent ffff:` (always one `[...]` line, usually `[]`; every
 * netns has lo, and unlike `qdisc show dev lo`, which dumps every qdisc of the namespace and
 * made 3,000 reads take 10 s at 2,000 devices, it costs the kernel one device). Pure.
 * Returns one text per read, '' for a failed read.
 *
 * tc prints nothing about which device an output belongs to, so the layout is reconstructed:
 * in -j mode the separator and every filter listing print exactly one `[...]` line; a failed
 * command (its batch line is in `failedLines`, from parseBatchErrors) prints nothing; class
 * listings are text (`class htb ...` lines, possibly none) in iproute2 6.1 and one `[...]` line
 * in later releases, which the count of `[` lines tells apart.
 */
export function splitReadOutput(stdout: string, reads: ReadCommand[], failedLines: ReadonlySet<number>): string[] {
  const lines = stdout.split('\n').filter((l) => l.trim() !== '');
  const isJson = (l: string | undefined): boolean => l !== undefined && l.startsWith('[');
  const ok = (i: number): boolean => !failedLines.has(2 * i + 2);
  const sepOk = reads.filter((_, i) => !failedLines.has(2 * i + 1)).length;
  const filtersOk = reads.filter((r, i) => r.kind === 'filter' && ok(i)).length;
  const classesOk = reads.filter((r, i) => r.kind === 'class' && ok(i)).length;
  const classJson = classesOk > 0 && lines.filter(isJson).length === sepOk + filtersOk + classesOk;
  const out: string[] = [];
  let pos = 0;
  reads.forEach((r, i) => {
    if (!failedLines.has(2 * i + 1) && isJson(lines[pos])) pos++;
    if (!ok(i)) {
      out.push('');
    } else if (r.kind === 'filter' || classJson) {
      out.push(isJson(lines[pos]) ? (lines[pos++] as string) : '');
    } else {
      const own: string[] = [];
      while (pos < lines.length && !isJson(lines[pos])) own.push(lines[pos++] as string);
      out.push(own.join('\n'));
    }
  });
  return out;
}

// ---------------------------------------------------------------------------------------------
// Processes

/**
 * The real Runner: execFile with an argv array (no shell), `input` written to stdin. Built once by
 * createTrafficControl; exported so tests can wrap it (count processes) and still run the real thing.
 */
export function createExecFileRunner(timeoutMs: number = 30_000): Runner {
  return (file, args, input) =>
    new Promise<RunResult>((resolve, reject) => {
      const child = execFile(file, [...args], { maxBuffer: 256 * 1024 * 1024, timeout: timeoutMs, encoding: 'utf8' }, (err, stdout, stderr) => {
        if (err && typeof (err as NodeJS.ErrnoException).code === 'string') return reject(err); // ENOENT, EACCES
        if (err && err.killed) return reject(new Error(`${file} timed out after ${timeoutMs} ms`));
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        resolve({ code, stdout, stderr });
      });
      // A process that dies before reading all its input makes the write fail with EPIPE; the
      // exit status already tells that story.
      child.stdin?.on('error', () => {});
      child.stdin?.end(input ?? '');
    });
}

interface OwnedLine extends BatchLine {
  owner: string;
}

interface CacheEntry {
  ifindex: number;
  down: HtbParams | null;
  up: HtbParams | null;
}

interface Desired {
  iface: string;
  ifindex: number;
  down: HtbParams | null;
  up: HtbParams | null;
}

interface Snapshot {
  links: Map<string, LinkEntry>;
  qdiscs: Map<string, DevQdiscs>;
}

/**
 * Builds the traffic-control client. Runs once per daemon; holds the cache of applied rules,
 * so there must be one instance per process (or per network namespace). Calls are serialized.
 */
export function createTrafficControl(opts: TrafficControlOptions = {}): TrafficControl {
  const tcPath = opts.tcPath ?? 'tc';
  const ipPath = opts.ipPath ?? 'ip';
  const prefix = opts.ifbPrefix ?? DEFAULT_IFB_PREFIX;
  if (!/^[a-z][a-z0-9_-]{0,4}$/.test(prefix)) throw new RangeError(`ifbPrefix must be 1-5 lowercase characters, got ${JSON.stringify(prefix)}`);
  const run = opts.runner ?? createExecFileRunner(opts.timeoutMs ?? 30_000);
  const ns = opts.netns ? ['-n', opts.netns] : [];
  const log = opts.logger;
  const cache = new Map<string, CacheEntry>();
  /** Interfaces that may own an IFB (up rules applied or attempted), kept when the cache entry is dropped. */
  const ifbOwners = new Map<string, number>();
  // Interfaces whose IFB prepare() created, by ifindex; a new ifindex under the same name prepares again.
  const prepared = new Map<string, number>();
  /** IFBs of forgotten interfaces, deleted by the next call that runs an ip batch. */
  const orphanIfbs = new Set<string>();
  let queue: Promise<unknown> = Promise.resolve();

  function serial<T>(fn: () => Promise<T>): Promise<T> {
    const p = queue.then(fn, fn);
    queue = p.catch(() => undefined);
    return p;
  }

  const ifbOf = (ifindex: number): string => ifbName(ifindex, prefix);

  async function readSnapshot(): Promise<Snapshot> {
    const [links, qdiscs] = await Promise.all([run(ipPath, [...ns, '-j', 'link', 'show']), run(tcPath, [...ns, '-j', 'qdisc', 'show'])]);
    if (links.code !== 0) throw new Error(`ip link show failed: ${links.stderr.trim()}`);
    if (qdiscs.code !== 0) throw new Error(`tc qdisc show failed: ${qdiscs.stderr.trim()}`);
    return { links: parseLinkJson(links.stdout), qdiscs: parseQdiscJson(qdiscs.stdout) };
  }

  function stateFromSnapshot(snap: Snapshot, iface: string, ifindex: number): DevState {
    const q = snap.qdiscs.get(iface);
    const ifb = snap.links.get(ifbOf(ifindex));
    return {
      root: classifyRoot(q?.root),
      ingress: q?.ingress?.kind === 'ingress',
      ifb: ifb ? (ifb.up ? 'up' : 'down') : 'absent',
      ifbRoot: classifyRoot(snap.qdiscs.get(ifbOf(ifindex))?.root),
    };
  }

  /**
   * Runs one batch of lines for many owners. Returns the error of every owner that had a line fail
   * (tolerated errors excluded). A batch that failed without naming a line (crash, timeout) is
   * retried one owner at a time so the failure lands on the right interface.
   */
  async function runBatch(file: string, lines: OwnedLine[], label: string): Promise<Map<string, string>> {
    const failures = new Map<string, string>();
    if (lines.length === 0) return failures;
    const started = performance.now();
    let res: RunResult;
    try {
      res = await run(file, [...ns, '-force', '-batch', '-'], lines.map((l) => l.cmd).join('\n') + '\n');
    } catch (err) {
      // Not started, or timed out: retrying interface by interface would only repeat that.
      const msg = err instanceof Error ? err.message : String(err);
      for (const l of lines) failures.set(l.owner, msg);
      return failures;
    }
    const errors = parseBatchErrors(res.stderr);
    log?.debug?.({ lines: lines.length, failed: errors.size, ms: Math.round(performance.now() - started) }, `${label} batch`);
    if (res.code !== 0 && errors.size === 0) {
      const owners = [...new Set(lines.map((l) => l.owner))];
      if (owners.length === 1) {
        failures.set(owners[0] as string, res.stderr.trim() || `${label} exited with ${res.code}`);
        return failures;
      }
      log?.warn({ code: res.code, stderr: res.stderr.trim().slice(0, 500) }, `${label} batch failed without naming a line; retrying per interface`);
      for (const owner of owners) {
        const sub = await runBatch(file, lines.filter((l) => l.owner === owner), label);
        for (const [o, e] of sub) failures.set(o, e);
      }
      return failures;
    }
    for (const [n, msg] of errors) {
      const line = lines[n - 1];
      if (!line || line.tolerate?.test(msg)) continue;
      if (!failures.has(line.owner)) failures.set(line.owner, `${line.cmd}: ${msg}`);
    }
    return failures;
  }

  /**
   * Deletes links in one ip batch. Each `ip link del` waits for an RCU grace period (measured
   * ~23 ms, 4.5 s for 200 IFBs), so the links are first moved into a random group and the group
   * is deleted by one netlink request (64 ms for 200). Returns the failures per owner.
   */
  async function deleteLinks(deletions: { name: string; owner: string }[]): Promise<Map<string, string>> {
    if (deletions.length === 0) return new Map();
    const group = 0x10000000 + Math.floor(Math.random() * 0x6fffffff);
    const lines: OwnedLine[] = linkDeleteLines(deletions.map((d) => d.name), group).map((l, i) => ({
      ...l,
      owner: deletions[i]?.owner ?? GROUP_OWNER,
    }));
    const failures = await runBatch(ipPath, lines, 'ip');
    const groupError = failures.get(GROUP_OWNER);
    failures.delete(GROUP_OWNER);
    if (groupError !== undefined) for (const d of deletions) if (!failures.has(d.owner)) failures.set(d.owner, groupError);
    return failures;
  }

  /**
   * The common path of apply and remove: desired states in, kernel changed, cache updated.
   * `invalid` are interfaces that failed validation before reaching here.
   */
  async function converge(wanted: Desired[], invalid: { iface: string; error: string }[], keepIfb: boolean): Promise<ApplyResult> {
    const result: ApplyResult = { applied: 0, unchanged: 0, failed: [...invalid] };
    const changed: Desired[] = [];
    for (const d of wanted) {
      const c = cache.get(d.iface);
      if (c && c.ifindex === d.ifindex && sameParams(c.down, d.down) && sameParams(c.up, d.up)) result.unchanged++;
      else changed.push(d);
    }
    if (changed.length === 0 && orphanIfbs.size === 0) return result;
    for (const d of changed) {
      // Same name, new interface (a container restarted faster than forget() was called).
      const owner = ifbOwners.get(d.iface);
      if (owner !== undefined && owner !== d.ifindex) orphanIfbs.add(ifbOf(owner));
    }

    const needSnapshot = changed.filter((d) => cache.get(d.iface)?.ifindex !== d.ifindex);
    let snap: Snapshot | undefined;
    const failures = new Map<string, string>();
    if (needSnapshot.length > 0) {
      try {
        snap = await readSnapshot();
      } catch (err) {
        const msg = err instanceof Error ? err.message : String(err);
        for (const d of needSnapshot) failures.set(d.iface, msg);
      }
    }

    const ipPre: OwnedLine[] = [];
    const tc: OwnedLine[] = [];
    const deletions: { name: string; owner: string }[] = [];
    const planned: Desired[] = [];
    for (const d of changed) {
      const c = cache.get(d.iface);
      const ifb = ifbOf(d.ifindex);
      orphanIfbs.delete(ifb);
      let from: DevState;
      let prev: PlanInput['prev'];
      if (c && c.ifindex === d.ifindex) {
        from = stateFromApplied(c);
        prev = { down: c.down, up: c.up };
      } else {
        if (!snap) continue; // the kernel could not be read: already failed
        const s = snap;
        const link = s.links.get(d.iface);
        const wantsRules = d.down !== null || d.up !== null;
        if (!link || link.ifindex !== d.ifindex) {
          // The interface is gone (or its name now belongs to another device): its own rules went
          // with it, only its IFB may be left.
          if (wantsRules) {
            failures.set(d.iface, link ? `interface ${d.iface} has ifindex ${link.ifindex}, not ${d.ifindex}` : `no such interface: ${d.iface}`);
            continue;
          }
          if (s.links.has(ifb)) deletions.push({ name: ifb, owner: d.iface });
          planned.push(d);
          continue;
        }
        from = stateFromSnapshot(s, d.iface, d.ifindex);
      }
      const plan = planInterface({ iface: d.iface, ifb, from, ...(prev ? { prev } : {}), to: { down: d.down, up: d.up }, keepIfb });
      for (const l of plan.ipPre) ipPre.push({ ...l, owner: d.iface });
      for (const l of plan.tc) tc.push({ ...l, owner: d.iface });
      for (const name of plan.deleteLinks) deletions.push({ name, owner: d.iface });
      planned.push(d);
    }
    for (const name of orphanIfbs) deletions.push({ name, owner: `\0${name}` });

    const preFailures = await runBatch(ipPath, ipPre, 'ip');
    for (const [o, e] of preFailures) failures.set(o, e);
    // Without its IFB an interface's up lines would only redirect its traffic into nothing; its
    // down lines still go ahead.
    const tcFailures = await runBatch(tcPath, tc.filter((l) => !(l.dir === 'up' && preFailures.has(l.owner))), 'tc');
    for (const [o, e] of tcFailures) if (!failures.has(o)) failures.set(o, e);
    const postFailures = await deleteLinks(deletions);
    for (const [o, e] of postFailures) {
      if (o.startsWith('\0')) log?.warn({ ifb: o.slice(1), error: e }, 'deleting the IFB of a forgotten interface failed');
      else if (!failures.has(o)) failures.set(o, e);
    }
    orphanIfbs.clear();

    for (const d of changed) {
      if (d.up) ifbOwners.set(d.iface, d.ifindex);
    }
    for (const d of planned) {
      const err = failures.get(d.iface);
      if (err === undefined) {
        cache.set(d.iface, { ifindex: d.ifindex, down: d.down, up: d.up });
        if (!d.up && ifbOwners.get(d.iface) === d.ifindex) ifbOwners.delete(d.iface);
        result.applied++;
      } else {
        // Unknown half-applied state: the next call reads the kernel again.
        cache.delete(d.iface);
      }
    }
    for (const [iface, error] of failures) result.failed.push({ iface, error });
    return result;
  }

  function normalizeAll(shapes: InterfaceShape[]): { wanted: Desired[]; invalid: { iface: string; error: string }[] } {
    const byIface = new Map<string, Desired>();
    const invalid = new Map<string, string>();
    for (const s of shapes) {
      try {
        // Batch lines are split by tc's own parser, which knows quotes and `#` comments.
        if (!IFACE_NAME.test(s.iface)) throw new RangeError(`bad interface name ${JSON.stringify(s.iface)}`);
        if (!Number.isSafeInteger(s.ifindex) || s.ifindex <= 0) throw new RangeError(`bad ifindex ${s.ifindex}`);
        if (ifbOf(s.ifindex).length > IFNAMSIZ) throw new RangeError(`ifindex ${s.ifindex} too large for an IFB name`);
        byIface.set(s.iface, {
          iface: s.iface,
          ifindex: s.ifindex,
          down: s.down ? normalizeShape(s.down) : null,
          up: s.up ? normalizeShape(s.up) : null,
        });
        invalid.delete(s.iface);
      } catch (err) {
        byIface.delete(s.iface);
        invalid.set(s.iface, err instanceof Error ? err.message : String(err));
      }
    }
    return { wanted: [...byIface.values()], invalid: [...invalid].map(([iface, error]) => ({ iface, error })) };
  }

  /**
   * Runs when the desired shaping changes (node agent: every enforce phase; daemon: on discovery
   * and quota changes). Makes the kernel state of each named interface equal to its shape; other
   * interfaces are not touched. Interfaces equal to the cache cost no process; a failure on one
   * interface never stops the others. Returns counts and the failed interfaces with tc's message.
   */
  function apply(shapes: InterfaceShape[]): Promise<ApplyResult> {
    return serial(() => {
      const { wanted, invalid } = normalizeAll(shapes);
      // An interface keeps its IFB while it lives: a throttle that comes back later then only
      // touches HTB classes. remove() and the orphan sweep delete IFBs.
      return converge(wanted, invalid, true);
    });
  }

  /**
   * Runs when an interface must lose its limits (speeds set to 0, server removed, cleanup).
   * Deletes the root and ingress qdiscs and the IFB; what is already absent counts as removed.
   * Returns counts and failures like apply.
   */
  function remove(ifaces: InterfaceRef[]): Promise<ApplyResult> {
    return serial(() => {
      // Read the kernel for these: a kept or prepared IFB is not in the cache's picture.
      for (const r of ifaces) {
        prepared.delete(r.iface);
        cache.delete(r.iface);
      }
      const { wanted, invalid } = normalizeAll(ifaces.map((r) => ({ iface: r.iface, ifindex: r.ifindex, down: null, up: null })));
      return converge(wanted, invalid, false);
    });
  }

  /**
   * Runs when discovery finds new interfaces: creates their IFB devices, gives each its (empty) HTB
   * root and brings it up, and puts an (empty) ingress qdisc on the interface, before any limit
   * needs them. IFBs and qdisc attachments are the slow part of a first apply (the kernel
   * serializes them), so doing it as containers appear keeps limits pushes and throttles to HTB
   * classes and one redirect filter. Returns counts and failures like apply.
   */
  function prepare(refs: InterfaceRef[]): Promise<ApplyResult> {
    return serial(async () => {
      const fresh = refs.filter((r) => prepared.get(r.iface) !== r.ifindex);
      const failures = new Map<string, string>();
      // One batch per step, each for the interfaces that have not failed an earlier step.
      const lines = (cmd: (ifb: string) => string, tolerate?: RegExp): OwnedLine[] =>
        fresh.filter((r) => !failures.has(r.iface)).map((r) => ({ cmd: cmd(ifbOf(r.ifindex)), dir: 'up' as const, owner: r.iface, ...(tolerate ? { tolerate } : {}) }));
      const merge = (m: Map<string, string>): void => {
        for (const [o, e] of m) if (!failures.has(o)) failures.set(o, e);
      };
      merge(await runBatch(ipPath, lines((ifb) => `link add name ${ifb} txqueuelen ${IFB_TXQUEUELEN} type ifb`, EXISTS), 'ip'));
      // The IFB's HTB root goes on while the device is still down: a root qdisc on a running device
      // waits for an RCU grace period, which made it the slowest line of a first limits push. No
      // traffic reaches an IFB until a redirect filter points at it, so an empty root changes nothing.
      merge(await runBatch(tcPath, lines((ifb) => `qdisc add dev ${ifb} root handle ${QDISC_HANDLE} htb default ${DEFAULT_MINOR_HEX}`, ROOT_TAKEN), 'tc'));
      merge(await runBatch(ipPath, lines((ifb) => `link set dev ${ifb} up`), 'ip'));
      // The interface's ingress qdisc too: attaching one to a running device waits for the
      // kernel's RCU machinery and was the slowest line left in a first limits push. Without a
      // filter it passes every packet untouched; an apply without an upload cap removes it.
      merge(
        await runBatch(
          tcPath,
          fresh.filter((r) => !failures.has(r.iface)).map((r) => ({ cmd: `qdisc replace dev ${r.iface} handle ffff: ingress`, dir: 'up' as const, owner: r.iface })),
          'tc',
        ),
      );
      for (const r of fresh) {
        if (!failures.has(r.iface)) prepared.set(r.iface, r.ifindex);
        // The kernel now holds state no cache entry describes (after a remove(), say): the next
        // apply reads it.
        cache.delete(r.iface);
      }
      return {
        applied: fresh.length - failures.size,
        unchanged: refs.length - fresh.length,
        failed: [...failures].map(([iface, error]) => ({ iface, error })),
      };
    });
  }

  /**
   * Runs from a health job. Reads the real state, bypassing the cache (`ip -j link show`,
   * `tc -j qdisc show`, and one `tc -j -batch` of class/filter reads), and returns the shapes whose
   * rules are missing or differ, each with a `problem`; an interface that no longer exists is
   * returned too. Their cache entries are dropped so that `apply(result)` repairs them.
   */
  function verify(shapes: InterfaceShape[]): Promise<VerifyProblem[]> {
    return serial(async () => {
      const problems: VerifyProblem[] = [];
      const { wanted, invalid } = normalizeAll(shapes);
      const byIface = new Map(shapes.map((s) => [s.iface, s]));
      for (const i of invalid) problems.push({ ...(byIface.get(i.iface) as InterfaceShape), problem: `invalid: ${i.error}` });
      if (wanted.length === 0) return problems;
      const snap = await readSnapshot();
      // One read command per (interface, what); each preceded by a separator, see splitReadOutput.
      const reads: { iface: string; what: 'down' | 'filter' | 'ifb'; cmd: string }[] = [];
      const early = new Map<string, string>();
      for (const d of wanted) {
        const link = snap.links.get(d.iface);
        const st = stateFromSnapshot(snap, d.iface, d.ifindex);
        const ifb = ifbOf(d.ifindex);
        let problem: string | null = null;
        if (!link) problem = 'interface does not exist';
        else if (link.ifindex !== d.ifindex) problem = `interface has ifindex ${link.ifindex}, not ${d.ifindex}`;
        else if (d.down && st.root !== 'ours') problem = 'down: root qdisc missing or not ours';
        else if (!d.down && st.root === 'ours') problem = 'down: unwanted root qdisc';
        else if (d.up && !st.ingress) problem = 'up: ingress qdisc missing';
        else if (d.up && st.ifb !== 'up') problem = `up: IFB ${ifb} ${st.ifb === 'absent' ? 'missing' : 'down'}`;
        else if (d.up && st.ifbRoot !== 'ours') problem = `up: root qdisc of ${ifb} missing or not ours`;
        else if (!d.up && st.ingress) problem = 'up: unwanted ingress qdisc';
        else if (!d.up && st.ifb !== 'absent') problem = `up: unwanted IFB ${ifb}`;
        if (problem) {
          early.set(d.iface, problem);
          continue;
        }
        if (d.down) reads.push({ iface: d.iface, what: 'down', cmd: `class show dev ${d.iface}` });
        if (d.up) {
          reads.push({ iface: d.iface, what: 'filter', cmd: `filter show dev ${d.iface} parent ffff:` });
          reads.push({ iface: d.iface, what: 'ifb', cmd: `class show dev ${ifb}` });
        }
      }
      const found = new Map<string, string>(early);
      if (reads.length > 0) {
        const input = reads.map((r) => `${READ_SEPARATOR}\n${r.cmd}\n`).join('');
        const res = await run(tcPath, [...ns, '-j', '-force', '-batch', '-'], input);
        const sections = splitReadOutput(
          res.stdout,
          reads.map((r) => ({ kind: r.what === 'filter' ? 'filter' : 'class' })),
          new Set(parseBatchErrors(res.stderr).keys()),
        );
        const want = new Map(wanted.map((d) => [d.iface, d]));
        reads.forEach((r, i) => {
          if (found.has(r.iface)) return;
          const d = want.get(r.iface) as Desired;
          const text = sections[i] ?? '';
          let problem: string | null = null;
          if (r.what === 'filter') {
            const target = parseRedirectTarget(text);
            if (target !== ifbOf(d.ifindex)) problem = target ? `up: redirect goes to ${target}` : 'up: redirect filter missing';
          } else {
            const diff = compareClasses(parseHtbClasses(text), (r.what === 'down' ? d.down : d.up) as HtbParams);
            if (diff) problem = `${r.what === 'down' ? 'down' : 'up'}: ${diff}`;
          }
          if (problem) found.set(r.iface, problem);
        });
      }
      for (const d of wanted) {
        const problem = found.get(d.iface);
        if (problem === undefined) continue;
        cache.delete(d.iface);
        problems.push({ ...(byIface.get(d.iface) as InterfaceShape), problem });
      }
      return problems;
    });
  }

  /**
   * Runs when an interface disappeared (container stopped): drops its cache entry. Its qdiscs went
   * with the interface; its IFB, if it had one, is deleted by the next apply/remove/sweep.
   */
  function forget(iface: string): void {
    const c = cache.get(iface);
    const owner = ifbOwners.get(iface);
    const made = prepared.get(iface);
    cache.delete(iface);
    ifbOwners.delete(iface);
    prepared.delete(iface);
    if (c?.up) orphanIfbs.add(ifbOf(c.ifindex));
    if (owner !== undefined) orphanIfbs.add(ifbOf(owner));
    if (made !== undefined) orphanIfbs.add(ifbOf(made));
  }

  /**
   * Runs at daemon start and from cleanup jobs: deletes IFB devices named `<prefix><N>` whose
   * interface N no longer exists (left behind by a crash or a restart that lost the cache).
   * Returns how many were deleted.
   */
  function sweepOrphanIfbs(): Promise<number> {
    return serial(async () => {
      const res = await run(ipPath, [...ns, '-d', '-j', 'link', 'show']);
      if (res.code !== 0) throw new Error(`ip link show failed: ${res.stderr.trim()}`);
      const links = parseLinkJson(res.stdout);
      const liveIndexes = new Set<number>();
      for (const l of links.values()) if (l.kind !== 'ifb') liveIndexes.add(l.ifindex);
      const re = new RegExp(`^${prefix}(\\d+)$`);
      const doomed = new Set(orphanIfbs);
      for (const l of links.values()) {
        const m = re.exec(l.ifname);
        if (l.kind === 'ifb' && m?.[1] !== undefined && !liveIndexes.has(Number(m[1]))) doomed.add(l.ifname);
      }
      orphanIfbs.clear();
      const names = [...doomed].filter((n) => links.has(n));
      const failed = await deleteLinks(names.map((name) => ({ name, owner: name })));
      for (const [ifb, error] of failed) log?.warn({ ifb, error }, 'deleting an orphaned IFB failed');
      return names.length - failed.size;
    });
  }

  /** Runs once per meter cycle while some interface is under an attack mitigation; read-only, so past the queue. */
  async function rootDrops(ifaces: string[]): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    if (ifaces.length === 0) return out;
    const res = await run(tcPath, [...ns, '-s', '-j', 'qdisc', 'show']);
    if (res.code !== 0) throw new Error(`tc -s qdisc show failed: ${res.stderr.trim()}`);
    const all = parseQdiscDrops(res.stdout);
    for (const iface of ifaces) {
      const n = all.get(iface);
      if (n !== undefined) out.set(iface, n);
    }
    return out;
  }

  return { apply, remove, prepare, verify, forget, sweepOrphanIfbs, rootDrops };
}

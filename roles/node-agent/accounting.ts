/**
 * The pure heart of the node agent's cycle (DESIGN: meter -> account -> store -> enforce ->
 * outbox). Given a server's previous state, its new counter reading, the time, the quota time
 * zone and its limits, it returns the next state, the enforcement events to queue and the usage
 * delta for the hourly history. No I/O: every rule of spec/1 §3 is table-tested here.
 */
import { periodKey, PERIODS, type Period } from '../../src/lib/calendar.ts';
import { GIB } from '../../src/lib/units.ts';

export type Direction = 'rx' | 'tx';
export const DIRECTIONS: readonly Direction[] = ['rx', 'tx'];
export type Combo = `${Direction}_${Period}`;
export const COMBOS: readonly Combo[] = DIRECTIONS.flatMap((d) => PERIODS.map((p) => `${d}_${p}` as Combo));
/** Each combo with its direction and period, split once (the cycle walks them for every server). */
const COMBO_PARTS: readonly { combo: Combo; dir: Direction; period: Period }[] = COMBOS.map((combo) => {
  const [dir, period] = combo.split('_') as [Direction, Period];
  return { combo, dir, period };
});
export type ExceedAction = 'throttle' | 'suspend' | 'none';
export type EventType = 'quota_exceeded' | 'throttled' | 'restored' | 'speed_applied' | 'suspended';

/** One server's effective limits (spec/1 §2.5 server limits entry, every field present). */
export interface Limits {
  uuid: string;
  enabled: boolean;
  rx_speed_mbps: number;
  tx_speed_mbps: number;
  rx_quota_day_gb: number;
  rx_quota_week_gb: number;
  rx_quota_month_gb: number;
  tx_quota_day_gb: number;
  tx_quota_week_gb: number;
  tx_quota_month_gb: number;
  exceed_action: ExceedAction;
  throttle_rx_mbps: number;
  throttle_tx_mbps: number;
  /** SMART attack detection on (granted by an admin and enabled by the owner, spec/3 §4.3). */
  smart: boolean;
}

/** A quota combo that was reached in period `key`; `cleared` = an admin unthrottled it for that period. */
export interface ExceededCombo {
  key: string;
  cleared: boolean;
}

/**
 * Where a suspend action stands: `pending` until the panel has answered the suspend call,
 * `answered` afterwards (then the 1 Mbps throttle applies); back to `none` when no combo is active.
 */
export type SuspendState = 'none' | 'pending' | 'answered';

export interface ServerState {
  uuid: string;
  /** Last raw counters of the host veth and its ifindex; null before the first reading. */
  rxRaw: number | null;
  txRaw: number | null;
  ifindex: number | null;
  lastSampleAt: number | null;
  rxTotal: number;
  txTotal: number;
  rxRate: number;
  txRate: number;
  usage: Partial<Record<Combo, { key: string; bytes: number }>>;
  exceeded: Partial<Record<Combo, ExceededCombo>>;
  suspend: SuspendState;
  /** A throttle was active after the last cycle; its end emits `restored`. */
  throttled: boolean;
  /** The quota time zone the period keys were taken in (absent in state saved before it was kept). */
  tz?: string;
}

export interface Reading {
  ifindex: number;
  /** Bytes into the server (host veth tx_bytes) and out of it (host veth rx_bytes). */
  rxBytes: number;
  txBytes: number;
}

export interface AgentEvent {
  server_uuid: string;
  type: EventType;
  period: Period | null;
  direction: Direction | null;
  message: string;
  occurred_at: string;
}

export interface AccountResult {
  state: ServerState;
  events: AgentEvent[];
  /** Bytes to add to the current hour's history bucket. */
  delta: { rx: number; tx: number };
}

/** A server the agent has never measured. */
export function newServerState(uuid: string): ServerState {
  return { uuid, rxRaw: null, txRaw: null, ifindex: null, lastSampleAt: null, rxTotal: 0, txTotal: 0, rxRate: 0, txRate: 0, usage: {}, exceeded: {}, suspend: 'none', throttled: false };
}

/** The counter delta since the last reading; a counter that went backwards or a new veth is a reset, never negative use. */
export function counterDelta(prevRaw: number | null, prevIfindex: number | null, reading: number, ifindex: number): number {
  if (prevRaw === null) return 0; // first sight: history before the agent saw the server is not its usage
  if (prevIfindex !== ifindex || reading < prevRaw) return reading;
  return reading - prevRaw;
}

const QUOTA_FIELD: Record<Combo, `${Direction}_quota_${Period}_gb`> = {
  rx_day: 'rx_quota_day_gb',
  rx_week: 'rx_quota_week_gb',
  rx_month: 'rx_quota_month_gb',
  tx_day: 'tx_quota_day_gb',
  tx_week: 'tx_quota_week_gb',
  tx_month: 'tx_quota_month_gb',
};

function quotaBytes(limits: Limits, combo: Combo): number {
  return limits[QUOTA_FIELD[combo]] * GIB;
}

/** Combos that restrict the server now (reached in the current period and not cleared by an admin). */
export function activeCombos(state: ServerState): Combo[] {
  return COMBOS.filter((c) => state.exceeded[c] && !state.exceeded[c]?.cleared);
}

/** True when some combo restricts the server now (activeCombos without the list). */
function hasActiveCombo(state: ServerState): boolean {
  for (const c of COMBOS) if (state.exceeded[c] && !state.exceeded[c]?.cleared) return true;
  return false;
}

/** Combos listed in the stats record's `exceeded` (cleared ones are omitted until their period resets). */
export const exceededList = activeCombos;

/**
 * True when a throttle is active: action throttle with an active combo, or action suspend once
 * the panel has answered the suspend call.
 */
export function isThrottled(state: ServerState, limits: Limits | undefined): boolean {
  if (!limits || !limits.enabled || !hasActiveCombo(state)) return false;
  if (limits.exceed_action === 'throttle') return true;
  return limits.exceed_action === 'suspend' && state.suspend === 'answered';
}

/** The speed caps (Mbit/s, 0 = none) the server's veth should carry now. */
export function desiredSpeeds(state: ServerState, limits: Limits | undefined): { rxMbps: number; txMbps: number } {
  if (!limits || !limits.enabled) return { rxMbps: 0, txMbps: 0 };
  if (isThrottled(state, limits)) {
    if (limits.exceed_action === 'suspend') return { rxMbps: 1, txMbps: 1 };
    return { rxMbps: limits.throttle_rx_mbps, txMbps: limits.throttle_tx_mbps };
  }
  return { rxMbps: limits.rx_speed_mbps, txMbps: limits.tx_speed_mbps };
}

function event(uuid: string, type: EventType, combo: Combo | null, message: string, now: number): AgentEvent {
  const [direction, period] = combo ? (combo.split('_') as [Direction, Period]) : [null, null];
  return { server_uuid: uuid, type, period, direction, message, occurred_at: new Date(now).toISOString() };
}

function gib(bytes: number): string {
  return `${(bytes / GIB).toFixed(2)} GiB`;
}

/** The period keys of an instant in a zone; every server of a cycle asks for the same ones. */
let lastKeys: { now: number; tz: string; keys: Record<Period, string> } | null = null;

function periodKeys(now: number, tz: string): Record<Period, string> {
  if (lastKeys?.now !== now || lastKeys.tz !== tz) {
    lastKeys = { now, tz, keys: { day: periodKey(now, 'day', tz), week: periodKey(now, 'week', tz), month: periodKey(now, 'month', tz) } };
  }
  return lastKeys.keys;
}

/**
 * One cycle for one server. Runs every poll interval for every known server (reading null when
 * its container is not running). Returns the next state and the events the transition caused.
 */
export function accountServer(prev: ServerState, reading: Reading | null, now: number, tz: string, limits: Limits | undefined): AccountResult {
  const state: ServerState = { ...prev, usage: { ...prev.usage }, exceeded: { ...prev.exceeded } };
  const events: AgentEvent[] = [];
  let rx = 0;
  let tx = 0;

  if (reading) {
    rx = counterDelta(prev.rxRaw, prev.ifindex, reading.rxBytes, reading.ifindex);
    tx = counterDelta(prev.txRaw, prev.ifindex, reading.txBytes, reading.ifindex);
    const seconds = prev.lastSampleAt === null ? 0 : (now - prev.lastSampleAt) / 1000;
    state.rxRate = seconds > 0 ? Math.round(rx / seconds) : 0;
    state.txRate = seconds > 0 ? Math.round(tx / seconds) : 0;
    state.rxRaw = reading.rxBytes;
    state.txRaw = reading.txBytes;
    state.ifindex = reading.ifindex;
    state.lastSampleAt = now;
  } else {
    state.rxRate = 0;
    state.txRate = 0;
  }
  state.rxTotal += rx;
  state.txTotal += tx;

  // Calendar rollover: counters of a finished period restart at 0; its exceeded flags and admin
  // overrides drop. A new quota time zone (PUT /limits) is no boundary: the period in progress
  // keeps its count and flags under the new zone's key, and the new zone's next boundary resets
  // them (else a zone switch would be a way around a quota).
  const keys = periodKeys(now, tz);
  const zoneSwitched = prev.tz !== undefined && prev.tz !== tz;
  state.tz = tz;
  let rolled: Combo | null = null;
  for (const { combo, dir, period } of COMBO_PARTS) {
    const key = keys[period];
    const used = state.usage[combo];
    const add = dir === 'rx' ? rx : tx;
    // An entry is replaced only when it changes (entries are shared with the previous state).
    if (!used || used.key !== key) state.usage[combo] = { key, bytes: (zoneSwitched && used ? used.bytes : 0) + add };
    else if (add !== 0) state.usage[combo] = { key, bytes: used.bytes + add };
    const flag = state.exceeded[combo];
    if (flag && flag.key !== key) {
      if (zoneSwitched) {
        state.exceeded[combo] = { ...flag, key };
        continue;
      }
      delete state.exceeded[combo];
      if (!flag.cleared) rolled ??= combo;
    }
  }

  if (!limits || !limits.enabled) {
    // Out of the limits set, or stats only: nothing is enforced and no flag is kept.
    state.exceeded = {};
  } else {
    for (const { combo, period } of COMBO_PARTS) {
      const quota = quotaBytes(limits, combo);
      const used = state.usage[combo]?.bytes ?? 0;
      const reached = quota > 0 && used >= quota;
      if (reached && !state.exceeded[combo]) {
        state.exceeded[combo] = { key: keys[period], cleared: false };
        events.push(event(state.uuid, 'quota_exceeded', combo, `${combo} quota of ${gib(quota)} reached (${gib(used)} used)`, now));
      } else if (!reached && state.exceeded[combo]) {
        // The quota was raised above the use or removed (0): the combo no longer restricts.
        delete state.exceeded[combo];
      }
    }
  }
  // The suspend call follows the action in force, not the one of the cycle that reached the
  // quota: an action switched to suspend while a combo is active suspends the server (else the
  // switch from throttle would lift every restriction), and one switched away from suspend drops
  // a call still pending (the panel would suspend a server its admin meant only to throttle). An
  // answered call stays answered: the panel did suspend the server.
  if (!hasActiveCombo(state)) state.suspend = 'none';
  else if (limits?.exceed_action === 'suspend') {
    if (state.suspend === 'none') state.suspend = 'pending';
  } else if (state.suspend === 'pending') state.suspend = 'none';

  state.throttled = isThrottled(state, limits);
  if (state.throttled && !prev.throttled) {
    const speeds = desiredSpeeds(state, limits);
    const combo = activeCombos(state)[0] ?? null;
    events.push(event(state.uuid, 'throttled', combo, `throttled to ${speeds.rxMbps} Mbit/s in, ${speeds.txMbps} Mbit/s out`, now));
  } else if (!state.throttled && prev.throttled) {
    const why = rolled ? `${rolled.split('_')[1]} period reset` : !limits ? 'server removed from the limits set' : !limits.enabled ? 'enforcement disabled for this server' : 'limits changed';
    events.push(event(state.uuid, 'restored', rolled, `${why}: normal speeds restored`, now));
  }
  return { state, events, delta: { rx, tx } };
}

/**
 * Admin unthrottle (POST /servers/{uuid}/unthrottle): clears every active combo for the rest of
 * its period. Returns the next state and whether anything was cleared.
 */
export function unthrottle(prev: ServerState): { state: ServerState; cleared: Combo[] } {
  const cleared = activeCombos(prev);
  const exceeded = { ...prev.exceeded };
  for (const c of cleared) exceeded[c] = { key: (exceeded[c] as ExceededCombo).key, cleared: true };
  return { state: { ...prev, exceeded, suspend: 'none', throttled: false }, cleared };
}

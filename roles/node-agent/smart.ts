/**
 * SMART attack detection (spec/3 §6.3; docs/node-agent.md "SMART attack detection"), run in the
 * meter cycle on the counters it already read: per server, the inbound packet and bit rates
 * against a baseline that learns only from calm traffic (an exponentially weighted average with a
 * long time constant, never below an absolute floor, so an idle server does not alarm on a small
 * burst), levels L1-L3 at rising multiples of it, and a mitigation (an inbound cap that tightens
 * with the level) lifted only after a quiet hold-down, so a pulsing attack does not flap.
 * No I/O: the agent gives it readings and a clock, and stores the states and events.
 */
import type { SmartEvent } from '../../src/contracts/types.ts';

export type SmartLevel = 1 | 2 | 3;
export type SmartEventType = SmartEvent['type'];
export type SmartMetrics = SmartEvent['metrics'];
export type SmartMitigation = SmartEvent['mitigation'];

/** The detector's settings in base units, from the agent config's `smart` section. */
export interface SmartSettings {
  /** Time constant of the baseline's average (how long it takes to follow a new normal). */
  baselineTauMs: number;
  floorPps: number;
  floorBps: number;
  /** Ratio to baseline at which L1, L2 and L3 start; rising. */
  multipliers: readonly [number, number, number];
  /** Cap inbound traffic while an attack lasts; false: alert only. */
  mitigate: boolean;
  /** The cap of each level as a multiple of the learned baseline bit rate; falling. */
  capFactors: readonly [number, number, number];
  minCapBps: number;
  /** Calm this long after the last hot sample before the attack counts as over. */
  holdDownMs: number;
}

/** One reading of a server's host veth: what was sent to the container, and what its cap dropped. */
export interface SmartReading {
  at: number;
  ifindex: number;
  bytes: number;
  packets: number;
  /** Packets the root qdisc of the veth dropped so far (0 while no rules are on it). */
  drops: number;
}

/** An attack in progress on one server. */
export interface Incident {
  id: number;
  level: SmartLevel;
  startedAt: number;
  /** The last sample at level 1 or above: the hold-down runs from here. */
  lastHotAt: number;
  peakPps: number;
  peakBps: number;
  /** The inbound cap in force (bit/s), null when not mitigating. */
  capBps: number | null;
  /** An apply failure of the current cap was reported: said once per cap, not every cycle. */
  applyFailed: boolean;
}

export interface SmartState {
  uuid: string;
  basePps: number;
  baseBps: number;
  /** False until a calm sample was learned: the first one becomes the baseline. */
  learned: boolean;
  last: SmartReading | null;
  incident: Incident | null;
}

/** An event before the store numbers it. */
export type SmartEventDraft = Omit<SmartEvent, 'id'>;

export function newSmartState(uuid: string): SmartState {
  return { uuid, basePps: 0, baseBps: 0, learned: false, last: null, incident: null };
}

/** The inbound cap of a level: a multiple of the learned bit rate, never below the minimum. Pure. */
export function capFor(level: SmartLevel, st: SmartState, s: SmartSettings): number {
  return Math.max(s.minCapBps, Math.round((s.capFactors[level - 1] as number) * st.baseBps));
}

/** The level of a ratio to baseline: 0 below L1. Pure. */
export function levelOf(ratio: number, s: SmartSettings): 0 | SmartLevel {
  return ratio >= s.multipliers[2] ? 3 : ratio >= s.multipliers[1] ? 2 : ratio >= s.multipliers[0] ? 1 : 0;
}

const iso = (ms: number): string => new Date(ms).toISOString();
const round = (n: number): number => Math.round(n * 100) / 100;

/** Words for a rate, for the event messages. */
export function describeRates(pps: number, bps: number): string {
  const mbit = bps / 1e6;
  return `${Math.round(pps).toLocaleString('en-US')} packets/s, ${mbit >= 10 ? Math.round(mbit) : mbit.toFixed(1)} Mbit/s`;
}

function mitigationOf(inc: Incident | null): SmartMitigation {
  return inc?.capBps != null ? { action: 'rate_cap', cap_mbps: round(inc.capBps / 1e6) } : { action: 'none', cap_mbps: null };
}

interface Sample {
  pps: number;
  bps: number;
  ratio: number;
  refPps: number;
  refBps: number;
}

function draft(st: SmartState, inc: Incident, type: SmartEventType, at: number, sample: Sample, message: string, ended: boolean): SmartEventDraft {
  return {
    server_uuid: st.uuid,
    type,
    incident: inc.id,
    level: inc.level,
    occurred_at: iso(at),
    started_at: iso(inc.startedAt),
    ended_at: ended ? iso(at) : null,
    metrics: {
      pps: round(sample.pps),
      bps: Math.round(sample.bps),
      peak_pps: round(inc.peakPps),
      peak_bps: Math.round(inc.peakBps),
      baseline_pps: round(sample.refPps),
      baseline_bps: Math.round(sample.refBps),
      ratio: round(sample.ratio),
    },
    mitigation: ended ? { action: 'none', cap_mbps: null } : mitigationOf(inc),
    message,
  };
}

export interface SmartStepResult {
  state: SmartState;
  events: SmartEventDraft[];
}

const NO_EVENTS: SmartEventDraft[] = [];

/**
 * Runs once per server per meter cycle. `reading` is null when the server has no running veth;
 * `enabled` is the server's SMART flag from the panel (granted and turned on); `nextIncident`
 * numbers a new incident. Updates `st` in place (the hot path of every server of every cycle
 * allocates nothing while calm) and returns it with the events of this cycle, oldest first.
 *
 * Rates are since the last reading, counting what a cap dropped as arrived (an attack that a cap
 * holds down is still an attack), dropped packets taken at the average size of those delivered;
 * there is no rate for the first reading, a new veth or counters that went backwards (a reset).
 */
export function smartStep(st: SmartState, reading: SmartReading | null, now: number, enabled: boolean, s: SmartSettings, nextIncident: () => number): SmartStepResult {
  const last = st.last;
  let measured = false;
  let pps = 0;
  let bps = 0;
  let dtMs = 0;
  if (reading !== null && last !== null && last.ifindex === reading.ifindex && reading.at > last.at && reading.bytes >= last.bytes && reading.packets >= last.packets) {
    measured = true;
    dtMs = reading.at - last.at;
    const packets = reading.packets - last.packets;
    // A qdisc made again (rules removed and re-applied) counts from zero.
    const dropped = reading.drops >= last.drops ? reading.drops - last.drops : reading.drops;
    const bytes = reading.bytes - last.bytes;
    const avg = packets > 0 ? bytes / packets : 0;
    pps = ((packets + dropped) * 1000) / dtMs;
    bps = ((bytes + dropped * avg) * 8000) / dtMs;
  }
  if (reading === null) st.last = null;
  else if (last === null) st.last = { ...reading };
  else {
    last.at = reading.at;
    last.ifindex = reading.ifindex;
    last.bytes = reading.bytes;
    last.packets = reading.packets;
    last.drops = reading.drops;
  }
  const refPps = st.basePps > s.floorPps ? st.basePps : s.floorPps;
  const refBps = st.baseBps > s.floorBps ? st.baseBps : s.floorBps;
  const ratio = Math.max(pps / refPps, bps / refBps);
  const level = measured ? levelOf(ratio, s) : 0;
  const inc = st.incident;

  if (inc === null && level === 0) {
    // Calm: learn (only from calm samples, and never in the cycle an attack ended in).
    if (measured && enabled) {
      const alpha = 1 - Math.exp(-dtMs / s.baselineTauMs);
      st.basePps = st.learned ? st.basePps + alpha * (pps - st.basePps) : pps;
      st.baseBps = st.learned ? st.baseBps + alpha * (bps - st.baseBps) : bps;
      st.learned = true;
    }
    return { state: st, events: NO_EVENTS };
  }
  const events: SmartEventDraft[] = [];
  const sample: Sample = { pps, bps, ratio, refPps, refBps };
  const end = (current: Incident, why: string): void => {
    const lasted = Math.max(1, Math.round((now - current.startedAt) / 1000));
    if (current.capBps !== null) events.push(draft(st, current, 'mitigation_ended', now, sample, `Inbound cap lifted: ${why}`, true));
    events.push(draft(st, current, 'attack_ended', now, sample, `Attack over after ${lasted} s (${why}); it peaked at ${describeRates(current.peakPps, current.peakBps)}, level ${current.level}`, true));
    st.incident = null;
  };
  if (!enabled) {
    if (inc) end(inc, 'SMART was turned off for the server');
    return { state: st, events };
  }
  if (inc) {
    inc.peakPps = Math.max(inc.peakPps, pps);
    inc.peakBps = Math.max(inc.peakBps, bps);
    if (level > 0) inc.lastHotAt = now;
    if (level > inc.level) {
      inc.level = level as SmartLevel;
      if (s.mitigate) {
        inc.capBps = Math.min(inc.capBps ?? Infinity, capFor(inc.level, st, s));
        inc.applyFailed = false;
      }
      events.push(draft(st, inc, 'attack_escalated', now, sample, `Attack escalated to level ${inc.level}: ${describeRates(pps, bps)}, ${round(ratio)}x the baseline${inc.capBps !== null ? `; inbound cap tightened to ${round(inc.capBps / 1e6)} Mbit/s` : ''}`, false));
    } else if (level === 0 && now - inc.lastHotAt >= s.holdDownMs) {
      end(inc, `calm for ${Math.round(s.holdDownMs / 1000)} s`);
    }
    return { state: st, events };
  }
  const lv = level as SmartLevel;
  const started: Incident = { id: nextIncident(), level: lv, startedAt: now, lastHotAt: now, peakPps: pps, peakBps: bps, capBps: s.mitigate ? capFor(lv, st, s) : null, applyFailed: false };
  st.incident = started;
  events.push(draft(st, started, 'attack_detected', now, sample, `Attack detected at level ${lv}: ${describeRates(pps, bps)}, ${round(ratio)}x the baseline of ${describeRates(refPps, refBps)}`, false));
  if (started.capBps !== null) events.push(draft(st, started, 'mitigation_started', now, sample, `Inbound traffic capped at ${round(started.capBps / 1e6)} Mbit/s until the attack has been calm for ${Math.round(s.holdDownMs / 1000)} s`, false));
  return { state: st, events };
}

/** The apply_failed event of a server whose cap tc refused (noted in `st`); null when already said for this cap. */
export function applyFailure(st: SmartState, now: number, error: string, s: SmartSettings): SmartEventDraft | null {
  const inc = st.incident;
  if (!inc || inc.capBps === null || inc.applyFailed) return null;
  const refPps = Math.max(st.basePps, s.floorPps);
  const refBps = Math.max(st.baseBps, s.floorBps);
  const sample: Sample = { pps: inc.peakPps, bps: inc.peakBps, ratio: Math.max(inc.peakPps / refPps, inc.peakBps / refBps), refPps, refBps };
  inc.applyFailed = true;
  return draft(st, inc, 'apply_failed', now, sample, `Applying the inbound cap of ${round(inc.capBps / 1e6)} Mbit/s failed: ${error}; retried every cycle`, false);
}

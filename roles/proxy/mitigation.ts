/**
 * Automatic tightening under floods (spec/3 §2.5 `auto_mitigation`, §3 "proxy site", §6.1): each
 * site's requests are counted per wall-clock second; a second with more than `threshold_rps`
 * requests starts (or renews) a mitigation of `duration_secs`, during which the site's rate limits
 * (per IP and per site) are multiplied by `factor`. Entering and leaving publish a `mitigation`
 * event. The meters live in the shared table (every worker counts into the same second), so a
 * reload keeps a running mitigation; the main thread ends them when their time is up.
 */
import { SharedTable } from './shared-table.ts';
import { ALLOW, type AllowVerdict } from './verdict.ts';
import { wallNow } from './read-clock.ts';

export interface MitigationSettings {
  enabled: boolean;
  threshold_rps: number;
  duration_secs: number;
  factor: number;
}

/** A site entered or left mitigation. */
export interface MitigationEvent {
  kind: 'mitigation';
  /** RFC 3339. */
  time: string;
  site: string;
  state: 'enter' | 'exit';
  threshold_rps: number;
  factor: number;
  /** Enter: requests counted in the second that crossed the threshold; exit: the busiest second. */
  rps: number;
  /** When the mitigation started (RFC 3339). */
  since: string;
  /** Enter: when it ends unless renewed; exit: when it ended. */
  until: string;
}

/** One site's meter and state, shared by every generation that serves the site. */
export interface SiteMitigation {
  /** The rate-limit multiplier now: `factor` while mitigating, else 1. */
  readonly factor: number;
  /** Counts one request (the first check of the site's pipeline). */
  hit(now?: number): void;
}

export interface Mitigation {
  /**
   * The site's state with this generation's settings; runs when a generation is compiled.
   * Disabling auto_mitigation ends a running mitigation at once.
   */
  forSite(siteId: string, settings: Readonly<MitigationSettings>): SiteMitigation;
  /** Sites mitigating now (admin API, tests). */
  active(): { site: string; since: number; until: number }[];
  /** Ends mitigations whose time is up; runs every second on the main thread, and from tests. */
  tick(now?: number): void;
  /** Stops the timer (shutdown). */
  close(): void;
}

const TICK_MS = 1000;

// The site's entry in the shared table: values second, count, hot second, since (0 = not
// mitigating), until, peak.
const SECOND = 1;
const COUNT = 2;
const HOT = 3;
const SINCE = 4;
const UNTIL = 5;
const PEAK = 6;

/** Creates the per-site states in `table`; runs once per thread at start. */
export function createMitigation(
  onChange: (event: MitigationEvent) => void,
  opts: {
    table?: SharedTable;
    /** Whether this thread ends mitigations whose time is up (the main thread); default true. */
    ticks?: boolean;
  } = {},
): Mitigation {
  const table = opts.table ?? SharedTable.create();
  const sites = new Map<string, SiteState>();
  const timer = opts.ticks === false ? undefined : setInterval(() => tick(), TICK_MS);
  timer?.unref();

  function publish(s: SiteState, state: 'enter' | 'exit', rps: number, since: number, until: number): void {
    const { threshold_rps, factor } = s.settings;
    onChange({ kind: 'mitigation', time: new Date().toISOString(), site: s.id, state, threshold_rps, factor, rps, since: new Date(since).toISOString(), until: new Date(until).toISOString() });
  }

  /** The site's entry (under the lock); -1 only when the table is full. */
  const entry = (s: SiteState): number => table.find(s.key, 0, true);

  /** Ends the site's mitigation if it runs and `due` says so; publishes outside the lock. */
  function endIf(s: SiteState, now: number, due: (until: number) => boolean): void {
    table.lock();
    const at = entry(s);
    const v = table.values;
    let ended: { since: number; until: number; rps: number } | undefined;
    if (at !== -1 && (v[at + SINCE] as number) > 0 && due(v[at + UNTIL] as number)) {
      ended = { since: v[at + SINCE] as number, until: Math.min(now, v[at + UNTIL] as number), rps: Math.max(v[at + PEAK] as number, v[at + COUNT] as number) };
      v[at + SINCE] = 0;
    }
    table.unlock();
    if (ended) publish(s, 'exit', ended.rps, ended.since, ended.until);
  }

  class SiteState implements SiteMitigation {
    readonly id: string;
    readonly key: string;
    settings: Readonly<MitigationSettings>;
    /** When this thread's last hit ran (epoch ms), and whether the site was mitigating then. */
    private seenAt = 0;
    private seenRunning = false;

    constructor(id: string, settings: Readonly<MitigationSettings>) {
      this.id = id;
      this.key = `m\0${id}`;
      this.settings = settings;
    }

    get factor(): number {
      // The meter's hit at the same time (the same socket read or millisecond: the same request,
      // nearly always) read the state.
      if (wallNow() === this.seenAt) return this.seenRunning ? this.settings.factor : 1;
      table.lock();
      const at = entry(this);
      const running = at !== -1 && (table.values[at + SINCE] as number) > 0;
      table.unlock();
      return running ? this.settings.factor : 1;
    }

    hit(now = wallNow()): void {
      const sec = Math.floor(now / 1000);
      table.lock();
      const at = entry(this);
      if (at === -1) {
        table.unlock();
        return;
      }
      const v = table.values;
      const running = (v[at + SINCE] as number) > 0;
      if (v[at + SECOND] !== sec) {
        if (running && (v[at + COUNT] as number) > (v[at + PEAK] as number)) v[at + PEAK] = v[at + COUNT] as number;
        v[at + SECOND] = sec;
        v[at + COUNT] = 0;
      }
      const count = (v[at + COUNT] as number) + 1;
      v[at + COUNT] = count;
      let entered = false;
      // Renewal happens once per second: the first request over the threshold in a second.
      if (count > this.settings.threshold_rps && v[at + HOT] !== sec) {
        v[at + HOT] = sec;
        v[at + UNTIL] = now + this.settings.duration_secs * 1000;
        if (!running) {
          v[at + SINCE] = now;
          v[at + PEAK] = count;
          entered = true;
        }
      }
      const until = v[at + UNTIL] as number;
      table.unlock();
      this.seenAt = now;
      this.seenRunning = running || entered;
      if (entered) publish(this, 'enter', count, now, until);
    }
  }

  function tick(now = Date.now()): void {
    for (const s of sites.values()) endIf(s, now, (until) => now >= until);
  }

  return {
    forSite(siteId, settings) {
      let s = sites.get(siteId);
      if (!s) sites.set(siteId, (s = new SiteState(siteId, settings)));
      s.settings = settings;
      if (!settings.enabled) endIf(s, Date.now(), () => true);
      return s;
    },
    active() {
      const out: { site: string; since: number; until: number }[] = [];
      table.lock();
      for (const s of sites.values()) {
        const at = entry(s);
        if (at !== -1 && (table.values[at + SINCE] as number) > 0) out.push({ site: s.id, since: table.values[at + SINCE] as number, until: table.values[at + UNTIL] as number });
      }
      table.unlock();
      return out;
    },
    tick,
    close() {
      clearInterval(timer);
    },
  };
}

/**
 * The first check of a site's pipeline: counts the request towards the site's RPS and always
 * allows. Undefined when auto_mitigation is off.
 */
export function createMitigationMeter(state: SiteMitigation, enabled: boolean): (() => AllowVerdict) | undefined {
  if (!enabled) return undefined;
  return function meterSiteRate() {
    state.hit();
    return ALLOW;
  };
}

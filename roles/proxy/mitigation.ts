/**
 * Automatic tightening under floods (spec/3 §2.5 `auto_mitigation`, §3 "proxy site", §6.1): each
 * site's requests are counted per wall-clock second; a second with more than `threshold_rps`
 * requests starts (or renews) a mitigation of `duration_secs`, during which the site's rate limits
 * (per IP and per site) are multiplied by `factor`. Entering and leaving publish a `mitigation`
 * event. The state lives in the pipeline services, so a reload keeps a running mitigation.
 */
import { ALLOW, type AllowVerdict } from './verdict.ts';

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
  /** Ends mitigations whose time is up; runs every second while any is running, and from tests. */
  tick(now?: number): void;
  /** Stops the timer (shutdown). */
  close(): void;
}

const TICK_MS = 1000;

class SiteState implements SiteMitigation {
  factor = 1;
  second = 0;
  count = 0;
  // The second in which the threshold was last crossed (renewal happens once per second).
  hotSecond = -1;
  since = 0;
  until = 0;
  peak = 0;
  readonly id: string;
  settings: Readonly<MitigationSettings>;
  private readonly onHot: (s: SiteState, now: number) => void;

  constructor(id: string, settings: Readonly<MitigationSettings>, onHot: (s: SiteState, now: number) => void) {
    this.id = id;
    this.settings = settings;
    this.onHot = onHot;
  }

  hit(now = Date.now()): void {
    const sec = Math.floor(now / 1000);
    if (sec !== this.second) {
      if (this.factor !== 1 && this.count > this.peak) this.peak = this.count;
      this.second = sec;
      this.count = 0;
    }
    if (++this.count > this.settings.threshold_rps && this.hotSecond !== sec) {
      this.hotSecond = sec;
      this.onHot(this, now);
    }
  }
}

/** Creates the per-site states; runs once at start. `onChange` gets every enter and exit. */
export function createMitigation(onChange: (event: MitigationEvent) => void): Mitigation {
  const sites = new Map<string, SiteState>();
  const running = new Set<SiteState>();
  let timer: NodeJS.Timeout | undefined;

  function publish(s: SiteState, state: 'enter' | 'exit', rps: number, until: number): void {
    const { threshold_rps, factor } = s.settings;
    onChange({ kind: 'mitigation', time: new Date().toISOString(), site: s.id, state, threshold_rps, factor, rps, since: new Date(s.since).toISOString(), until: new Date(until).toISOString() });
  }

  function exit(s: SiteState, now: number): void {
    running.delete(s);
    s.factor = 1;
    publish(s, 'exit', Math.max(s.peak, s.count), Math.min(now, s.until));
    if (running.size === 0 && timer) {
      clearInterval(timer);
      timer = undefined;
    }
  }

  function tick(now = Date.now()): void {
    for (const s of running) if (now >= s.until) exit(s, now);
  }

  function onHot(s: SiteState, now: number): void {
    s.until = now + s.settings.duration_secs * 1000;
    if (running.has(s)) return;
    running.add(s);
    s.factor = s.settings.factor;
    s.since = now;
    s.peak = s.count;
    publish(s, 'enter', s.count, s.until);
    if (!timer) {
      timer = setInterval(tick, TICK_MS);
      timer.unref();
    }
  }

  return {
    forSite(siteId, settings) {
      let s = sites.get(siteId);
      if (!s) sites.set(siteId, (s = new SiteState(siteId, settings, onHot)));
      s.settings = settings;
      if (running.has(s)) {
        if (!settings.enabled) exit(s, Date.now());
        else s.factor = settings.factor;
      }
      return s;
    },
    active: () => [...running].map((s) => ({ site: s.id, since: s.since, until: s.until })),
    tick,
    close() {
      clearInterval(timer);
      timer = undefined;
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

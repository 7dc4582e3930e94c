/**
 * Quota calendar periods in an IANA time zone (spec/1 §2.2 rule 7): day = midnight, week =
 * Monday 00:00, month = the 1st at 00:00, all local to the zone and correct across DST changes.
 * Used by the node agent's accounting and history and by the container daemon's daily quotas.
 */

import { readZoneFile, type OffsetAt } from './zoneinfo.ts';

export type Period = 'day' | 'week' | 'month';
export const PERIODS: readonly Period[] = ['day', 'week', 'month'];

interface LocalParts {
  year: number;
  month: number; // 1-12
  day: number;
  hour: number;
  minute: number;
  second: number;
  weekday: number; // 0 = Monday ... 6 = Sunday
}

/** Offsets from Intl, for a zone the host's tz database lacks (or a host without one). */
function intlOffsets(tz: string): OffsetAt {
  const f = new Intl.DateTimeFormat('en-US', {
    timeZone: tz,
    hourCycle: 'h23',
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
    hour: 'numeric',
    minute: 'numeric',
    second: 'numeric',
  });
  return (ms) => {
    const out: Record<string, string> = {};
    for (const p of f.formatToParts(ms)) out[p.type] = p.value;
    const asUtc = Date.UTC(Number(out['year']), Number(out['month']) - 1, Number(out['day']), Number(out['hour']), Number(out['minute']), Number(out['second']));
    return asUtc - Math.floor(ms / 1000) * 1000;
  };
}

const ZONE_CACHE_MAX = 1000;
/** A zone is read again after this long, so a tzdata update applies without a restart. */
const ZONE_RELOAD_MS = 24 * 3_600_000;
const zones = new Map<string, { offsets: OffsetAt; loadedAt: number }>();
const utc: OffsetAt = () => 0;

/** The offsets of zone `tz`: the host's tz database first, Intl when it lacks the zone. Throws for an unknown zone. */
function zone(tz: string): OffsetAt {
  const now = Date.now();
  let z = zones.get(tz);
  if (!z || now - z.loadedAt >= ZONE_RELOAD_MS) {
    z = { offsets: tz === 'UTC' ? utc : (readZoneFile(tz) ?? intlOffsets(tz)), loadedAt: now };
    if (zones.size >= ZONE_CACHE_MAX) zones.clear();
    zones.set(tz, z);
  }
  return z.offsets;
}

/** ICU's canonical zone names: a cheap first check that creates no formatter. */
let canonicalZones: Set<string> | undefined;

/**
 * True for a name of an IANA time zone (Europe/Berlin, UTC, aliases such as Asia/Kolkata). ICU
 * also takes a bare offset (`+02:00`), which is no zone: it never follows daylight saving time.
 */
export function isTimeZone(name: string): boolean {
  if (name === '' || /^[+-]/.test(name)) return false;
  canonicalZones ??= new Set(Intl.supportedValuesOf('timeZone'));
  if (name === 'UTC' || canonicalZones.has(name) || zones.has(name) || readZoneFile(name)) return true;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

/**
 * A valid zone name in ICU's letter case (`utc` -> `UTC`, `europe/berlin` -> `Europe/Berlin`), so
 * one zone has one spelling wherever names are compared; aliases (`US/Pacific`) stay as written.
 */
export function zoneNameCase(name: string): string {
  try {
    const resolved = new Intl.DateTimeFormat('en-US', { timeZone: name }).resolvedOptions().timeZone;
    return resolved.toLowerCase() === name.toLowerCase() ? resolved : name;
  } catch {
    return name;
  }
}

/** Offset of `tz` from UTC at instant `ms`, in milliseconds (positive east of Greenwich). */
function offsetAt(ms: number, tz: string): number {
  return zone(tz)(ms);
}

/** The wall-clock fields of `ms` in zone `tz`. */
export function localParts(ms: number, tz: string): LocalParts {
  const d = new Date(ms + offsetAt(ms, tz));
  return {
    year: d.getUTCFullYear(),
    month: d.getUTCMonth() + 1,
    day: d.getUTCDate(),
    hour: d.getUTCHours(),
    minute: d.getUTCMinutes(),
    second: d.getUTCSeconds(),
    weekday: (d.getUTCDay() + 6) % 7,
  };
}

/**
 * The instant of local midnight starting calendar date y-m-d in `tz`. Where midnight does not
 * exist (a DST jump at 00:00), the first instant of that day.
 */
export function localMidnight(year: number, month: number, day: number, tz: string): number {
  const wall = Date.UTC(year, month - 1, day);
  let guess = wall - offsetAt(wall, tz);
  const second = wall - offsetAt(guess, tz);
  if (second !== guess) guess = Math.min(guess, second);
  // A skipped midnight: the guess falls on the previous day; move to the first instant of the day.
  const p = localParts(guess, tz);
  if (Date.UTC(p.year, p.month - 1, p.day) < wall) guess += 3_600_000 - ((p.minute * 60 + p.second) * 1000);
  return guess;
}

/** Start of the calendar period containing instant `ms` in `tz`. */
export function periodStart(ms: number, period: Period, tz: string): number {
  const p = localParts(ms, tz);
  if (period === 'day') return localMidnight(p.year, p.month, p.day, tz);
  if (period === 'month') return localMidnight(p.year, p.month, 1, tz);
  const monday = new Date(Date.UTC(p.year, p.month - 1, p.day - p.weekday));
  return localMidnight(monday.getUTCFullYear(), monday.getUTCMonth() + 1, monday.getUTCDate(), tz);
}

/** Start of the period after the one containing `ms`: the next reset boundary. */
export function nextPeriodStart(ms: number, period: Period, tz: string): number {
  const p = localParts(periodStart(ms, period, tz), tz);
  const next =
    period === 'day'
      ? new Date(Date.UTC(p.year, p.month - 1, p.day + 1))
      : period === 'week'
        ? new Date(Date.UTC(p.year, p.month - 1, p.day + 7))
        : new Date(Date.UTC(p.year, p.month, 1));
  return localMidnight(next.getUTCFullYear(), next.getUTCMonth() + 1, next.getUTCDate(), tz);
}

/** The last period computed per zone and kind: every server of a cycle asks for the same one. */
const lastPeriod = new Map<string, { start: number; end: number; key: string }>();

/**
 * A stable key of the period containing `ms` (`2026-11-23`, `W2026-11-23` for the week starting
 * that Monday, `2026-11`): counters store it and reset when it changes. Called for every server
 * on every cycle, so the last answer per zone is kept and reused while `ms` stays inside it.
 */
export function periodKey(ms: number, period: Period, tz: string): string {
  const cacheKey = `${tz}\0${period}`;
  const hit = lastPeriod.get(cacheKey);
  if (hit && ms >= hit.start && ms < hit.end) return hit.key;
  const start = periodStart(ms, period, tz);
  const p = localParts(start, tz);
  const date = `${p.year}-${String(p.month).padStart(2, '0')}-${String(p.day).padStart(2, '0')}`;
  const key = period === 'day' ? date : period === 'week' ? `W${date}` : date.slice(0, 7);
  lastPeriod.set(cacheKey, { start, end: nextPeriodStart(start, period, tz), key });
  return key;
}

/**
 * UTC offsets of IANA time zones read from the host's time-zone database (TZif files, RFC 8536,
 * under `TZDIR` or /usr/share/zoneinfo), with the JavaScript runtime's Intl as the fallback for a
 * host without one. Why not Intl alone: creating one Intl.DateTimeFormat maps about 6 MiB of ICU
 * locale data into the process for good (docs/decisions.md "The executable's memory"); the
 * host's database is also the one its package manager keeps current.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The offset from UTC in effect at an instant, in milliseconds (positive east of Greenwich). */
export type OffsetAt = (ms: number) => number;

/** Zone names looked up as files: `Area/Location` style, no dot segments, no hidden files. */
const ZONE_FILE_NAME = /^[A-Z][A-Za-z0-9_+-]*(?:\/[A-Za-z0-9_+-]+){0,2}$/;
/** Database files that are not zones an operator means: the posix/ and right/ copies, Factory, SystemV. */
const NOT_A_ZONE = /^(?:posix|right)\/|^(?:Factory|SystemV\/.*)$/;
const DAY_S = 86_400;

// ---------------------------------------------------------------------------------------------
// POSIX TZ strings (the TZif footer): rules for instants after the file's last transition.

/** `[+-]hh[:mm[:ss]]` in seconds, or null. */
function parseClock(s: string): number | null {
  const m = /^([+-]?)(\d{1,3})(?::(\d{1,2}))?(?::(\d{1,2}))?$/.exec(s);
  if (!m) return null;
  const v = Number(m[2]) * 3600 + Number(m[3] ?? 0) * 60 + Number(m[4] ?? 0);
  return m[1] === '-' ? -v : v;
}

/** Day of year (0-based, leap days counted) of a rule date in `year`, or null for a malformed one. */
type RuleDate = (year: number) => number;

function parseRuleDate(s: string): RuleDate | null {
  let m = /^J(\d{1,3})$/.exec(s);
  if (m) {
    // Julian day 1-365, February 29 never counted.
    const n = Number(m[1]);
    if (n < 1 || n > 365) return null;
    return (year) => n - 1 + (n >= 60 && isLeap(year) ? 1 : 0);
  }
  m = /^(\d{1,3})$/.exec(s);
  if (m) {
    const n = Number(m[1]);
    if (n > 365) return null;
    return () => n;
  }
  m = /^M(\d{1,2})\.(\d)\.(\d)$/.exec(s);
  if (!m) return null;
  const [month, week, weekday] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (month < 1 || month > 12 || week < 1 || week > 5 || weekday > 6) return null;
  return (year) => {
    // Day `weekday` (0 = Sunday) of week `week` of the month, week 5 meaning the last one.
    const first = Date.UTC(year, month - 1, 1);
    const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
    let day = 1 + ((weekday - new Date(first).getUTCDay() + 7) % 7) + (week - 1) * 7;
    while (day > daysInMonth) day -= 7;
    return (first - Date.UTC(year, 0, 1)) / 86_400_000 + day - 1;
  };
}

function isLeap(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}

/** One rule boundary: a date and a local wall-clock time (seconds, may be negative or past 24 h). */
function parseRuleBoundary(s: string): { date: RuleDate; time: number } | null {
  const slash = s.indexOf('/');
  const date = parseRuleDate(slash < 0 ? s : s.slice(0, slash));
  const time = slash < 0 ? 7200 : parseClock(s.slice(slash + 1));
  return date && time !== null ? { date, time } : null;
}

/**
 * A POSIX TZ string as TZif footers write it (`CET-1CEST,M3.5.0,M10.5.0/3`, `<+0330>-3:30`),
 * or null when it is not one. Offsets in the string count west of Greenwich.
 */
export function parsePosixTz(tz: string): OffsetAt | null {
  const m = /^(<[^>]*>|[A-Za-z]{3,})([^,<A-Za-z]+)(?:(<[^>]*>|[A-Za-z]{3,})([^,<A-Za-z]*)(?:,([^,]+),([^,]+))?)?$/.exec(tz);
  if (!m) return null;
  const stdWest = parseClock(m[2] ?? '');
  if (stdWest === null) return null;
  const std = 0 - stdWest * 1000; // never -0
  if (m[3] === undefined) return () => std;
  const dstWest = m[4] ? parseClock(m[4]) : stdWest - 3600;
  // POSIX leaves a missing rule to the implementation; tzcode uses the US rules.
  const start = parseRuleBoundary(m[5] ?? 'M3.2.0');
  const end = parseRuleBoundary(m[6] ?? 'M11.1.0');
  if (dstWest === null || !start || !end) return null;
  const dst = 0 - dstWest * 1000;
  const instant = (b: { date: RuleDate; time: number }, year: number, offset: number): number =>
    Date.UTC(year, 0, 1) + (b.date(year) * DAY_S + b.time) * 1000 - offset;
  return (ms) => {
    const year = new Date(ms + std).getUTCFullYear();
    // DST starts at a wall-clock time in standard time and ends at one in daylight time.
    const s = instant(start, year, std);
    const e = instant(end, year, dst);
    const inDst = s < e ? ms >= s && ms < e : ms < e || ms >= s;
    return inDst ? dst : std;
  };
}

// ---------------------------------------------------------------------------------------------
// TZif files

/** A TZif file's offsets, or null when the bytes are not one (or count leap seconds: right/ zones). */
export function parseTzif(buf: Buffer): OffsetAt | null {
  const header = (at: number): number[] | null => {
    if (buf.length < at + 44 || buf.toString('latin1', at, at + 4) !== 'TZif') return null;
    return [0, 1, 2, 3, 4, 5].map((i) => buf.readUInt32BE(at + 20 + i * 4));
  };
  const v1 = header(0);
  if (!v1) return null;
  const [isut1, isstd1, leap1, time1, type1, char1] = v1 as [number, number, number, number, number, number];
  const v1Size = time1 * 5 + type1 * 6 + char1 + leap1 * 8 + isstd1 + isut1;
  // Version 2 and later repeat the data with 64-bit times and add the footer.
  const wide = (buf[4] ?? 0) >= 0x32;
  const at = wide ? 44 + v1Size : 0;
  const counts = wide ? header(at) : v1;
  if (!counts) return null;
  const [isut, isstd, leap, timecnt, typecnt, charcnt] = counts as [number, number, number, number, number, number];
  if (leap > 0 || typecnt === 0) return null;
  const timeSize = wide ? 8 : 4;
  let p = at + 44;
  const dataEnd = p + timecnt * (timeSize + 1) + typecnt * 6 + charcnt + leap * (timeSize + 4) + isstd + isut;
  if (buf.length < dataEnd) return null;
  const times = new Float64Array(timecnt);
  for (let i = 0; i < timecnt; i++, p += timeSize) times[i] = (wide ? Number(buf.readBigInt64BE(p)) : buf.readInt32BE(p)) * 1000;
  const typeOf = buf.subarray(p, p + timecnt);
  p += timecnt;
  const typeOffsets: number[] = [];
  for (let i = 0; i < typecnt; i++) typeOffsets.push(buf.readInt32BE(p + i * 6) * 1000);
  const offsets = new Float64Array(timecnt);
  for (let i = 0; i < timecnt; i++) {
    const t = typeOffsets[typeOf[i] ?? 0];
    if (t === undefined) return null;
    offsets[i] = t;
  }
  let rule: OffsetAt | null = null;
  if (wide && buf[dataEnd] === 0x0a) {
    const close = buf.indexOf(0x0a, dataEnd + 1);
    const footer = close < 0 ? '' : buf.toString('latin1', dataEnd + 1, close);
    if (footer !== '') {
      rule = parsePosixTz(footer);
      if (!rule) return null;
    }
  }
  // RFC 8536: before the first transition time type 0 applies; after the last, the footer.
  const before = typeOffsets[0] as number;
  const n = timecnt;
  return (ms) => {
    if (n === 0 || ms < (times[0] as number)) return n === 0 && rule ? rule(ms) : before;
    if (rule && ms >= (times[n - 1] as number)) return rule(ms);
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if ((times[mid] as number) <= ms) lo = mid;
      else hi = mid - 1;
    }
    return offsets[lo] as number;
  };
}

/** The zone `name` from the host's database, or null when it has no such zone (or no database). */
export function readZoneFile(name: string): OffsetAt | null {
  if (!ZONE_FILE_NAME.test(name) || NOT_A_ZONE.test(name)) return null;
  let buf: Buffer;
  try {
    buf = readFileSync(join(process.env['TZDIR'] || '/usr/share/zoneinfo', name));
  } catch {
    return null;
  }
  return parseTzif(buf);
}

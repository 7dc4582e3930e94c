/**
 * Cross-field checks shared by the roles' configs. Each takes the (possibly schema-invalid)
 * config, reads a field by JSON pointer, and appends a problem when the value is present, of
 * the expected type and still wrong; type problems are the schema's to report.
 */
import { isIP } from 'node:net';
import { isAbsolute } from 'node:path';
import type { ConfigProblem } from './config-loader.ts';
import { isTimeZone } from '../lib/calendar.ts';
import { MAX_TIMER_MS, parseDuration } from '../lib/units.ts';

/** Reads a value by JSON pointer (`/a/b/0`); undefined when any step is missing. */
export function at(obj: unknown, pointer: string): unknown {
  let cur: unknown = obj;
  for (const key of pointer.split('/').slice(1)) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string, unknown>)[key];
  }
  return cur;
}

const TOO_LONG = `must be at most 24d (${MAX_TIMER_MS}ms, about 24.8 days): a longer wait does not fit a timer and would make the job run every millisecond`;

/**
 * Durations that the daemons wait with a timer: at most MAX_TIMER_MS (a longer one would fire
 * every millisecond). `0s` passes here; checkPositiveDurations refuses it where it means "never".
 */
export function checkTimerDurations(config: unknown, pointers: readonly string[], problems: ConfigProblem[]): void {
  for (const path of pointers) {
    const ms = parseDuration(at(config, path));
    if (ms !== undefined && ms > MAX_TIMER_MS) problems.push({ path, message: `${TOO_LONG} (got ${JSON.stringify(at(config, path))})` });
  }
}

/** Durations that must be above zero (`0s` is valid syntax but means "never") and fit a timer. */
export function checkPositiveDurations(config: unknown, pointers: readonly string[], problems: ConfigProblem[]): void {
  for (const path of pointers) {
    const ms = parseDuration(at(config, path));
    if (ms === 0) problems.push({ path, message: 'must be a positive duration' });
  }
  checkTimerDurations(config, pointers, problems);
}

export function checkTimeZone(config: unknown, path: string, problems: ConfigProblem[]): void {
  const tz = at(config, path);
  if (typeof tz === 'string' && !isTimeZone(tz)) {
    problems.push({ path, message: `unknown time zone ${JSON.stringify(tz)}: use an IANA name such as UTC or Europe/Berlin` });
  }
}

/** An absolute http(s) URL with a host; returns the reason it is not, or undefined. */
export function httpUrlProblem(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'must be an absolute http or https URL';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'must use http or https';
  if (!url.hostname) return 'must name a host';
  return undefined;
}

export function checkHttpUrl(config: unknown, path: string, problems: ConfigProblem[]): void {
  const v = at(config, path);
  // An unset ${VAR} stays literal and is reported as a warning by the loader.
  if (typeof v !== 'string' || v === '' || v.includes('${')) return;
  const why = httpUrlProblem(v);
  if (why) problems.push({ path, message: `${why} (got ${JSON.stringify(v)})` });
}

/**
 * Files and directories of a daemon must be absolute: a relative one depends on the directory the
 * process starts in (/ under systemd, somewhere else for a CLI command run by hand), so the
 * service and a command reading the same config would use different files. Empty values (a
 * feature turned off) are left alone.
 */
export function checkAbsolutePaths(config: unknown, pointers: readonly string[], problems: ConfigProblem[]): void {
  for (const path of pointers) {
    const v = at(config, path);
    if (typeof v === 'string' && v !== '' && v !== ':memory:' && !v.includes('${') && !isAbsolute(v)) {
      problems.push({ path, message: `must be an absolute path (got ${JSON.stringify(v)}; relative to what? the service starts in /, a command wherever it is run)` });
    }
  }
}

/** Splits `ip:port` / `[v6]:port`; undefined when it is not a valid listen address. */
export function parseListen(value: string): { host: string; port: number } | undefined {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([0-9.]+|localhost)):([0-9]{1,5})$/.exec(value);
  if (!m) return undefined;
  const host = (m[1] ?? m[2]) as string;
  const port = Number(m[3]);
  if (port < 1 || port > 65535) return undefined;
  if (host !== 'localhost' && isIP(host) === 0) return undefined;
  return { host, port };
}

export function checkListen(config: unknown, path: string, problems: ConfigProblem[]): void {
  const v = at(config, path);
  if (typeof v === 'string' && !parseListen(v)) {
    problems.push({ path, message: `must be ip:port with a port 1-65535 (got ${JSON.stringify(v)})` });
  }
}

/** IP or CIDR (`10.0.0.0/8`, `2001:db8::/32`, a plain IP = /32 or /128). */
export function isIpOrCidr(value: string): boolean {
  const [addr, bits, extra] = value.split('/');
  if (extra !== undefined || addr === undefined) return false;
  const family = isIP(addr);
  if (family === 0) return false;
  if (bits === undefined) return true;
  if (!/^[0-9]{1,3}$/.test(bits)) return false;
  return Number(bits) <= (family === 4 ? 32 : 128);
}

export function checkCidrList(config: unknown, path: string, problems: ConfigProblem[]): void {
  const list = at(config, path);
  if (!Array.isArray(list)) return;
  list.forEach((v, i) => {
    if (typeof v === 'string' && !isIpOrCidr(v)) {
      problems.push({ path: `${path}/${i}`, message: `must be an IP address or CIDR (got ${JSON.stringify(v)})` });
    }
  });
}

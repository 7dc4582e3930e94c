/**
 * Durations and sizes as written in config files. Parsed once when a config is loaded; the
 * daemons then work with plain milliseconds and bytes.
 */

const DURATION = /^([0-9]+)(ms|s|m|h|d)$/;
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * The longest wait a Node.js timer can hold (2^31-1 ms, about 24.8 days): setTimeout and
 * setInterval turn anything longer into 1 ms, so a config duration above it would run its job
 * every millisecond. The config checks refuse such values.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** A delay a timer holds as given: at most MAX_TIMER_MS (callers re-arm for what is left). */
export function timerDelay(ms: number): number {
  return Math.min(Math.max(ms, 0), MAX_TIMER_MS);
}

/** Parses `5s`, `1m`, `1h`, `250ms`, `2d` into milliseconds; returns undefined for anything else. */
export function parseDuration(text: unknown): number | undefined {
  if (typeof text !== 'string') return undefined;
  const m = DURATION.exec(text.trim());
  if (!m) return undefined;
  const unit = UNIT_MS[m[2] as string];
  return unit === undefined ? undefined : Number(m[1]) * unit;
}

/** Like parseDuration, for values the schema already validated: throws on a bad value. */
export function durationMs(text: string): number {
  const ms = parseDuration(text);
  if (ms === undefined) throw new Error(`not a duration: ${JSON.stringify(text)}`);
  return ms;
}

/** Formats milliseconds back to the shortest exact config form (`90s`, `2m`, `1500ms`). */
export function formatDuration(ms: number): string {
  for (const unit of ['d', 'h', 'm', 's'] as const) {
    const size = UNIT_MS[unit] as number;
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

export const KIB = 1024;
export const MIB = 1024 * KIB;
export const GIB = 1024 * MIB;

/** Megabits per second (the spec's `*_mbps`) to bytes per second. */
export function mbpsToBytesPerSec(mbps: number): number {
  return Math.round((mbps * 1_000_000) / 8);
}

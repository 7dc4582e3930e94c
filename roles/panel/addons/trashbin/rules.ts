/**
 * The trash bin's pure rules: which quota and retention apply to a server (spec/2 §2.4), the names
 * a restore tries when the original path is taken (§3.1), which paths belong to the trash folder,
 * and what counts as a truthy `permanent` flag. No I/O; table-tested.
 */
import type { TrashSettings } from './settings.ts';

/** The trash folder at the volume root; an entry lives at `.trash/{id}`. */
export const TRASH_DIR = '.trash';
/** The `root` of a delete that removes trash entries by id. */
export const TRASH_ROOT = '/.trash';
/** A trash id as text: the name of an item in the trash folder, and a `/.trash` delete's file. */
export const TRASH_ID = /^[1-9]\d{0,15}$/;

/** An override's values (server or egg); null inherits. */
export interface OverrideValues {
  max_bytes: number | null;
  retention_hours: number | null;
}

export interface Effective {
  /** 0 = unlimited. */
  capBytes: number;
  /** At least 1. */
  retentionHours: number;
}

/**
 * The values in force for one server: the server override, then the egg override, then the global
 * setting; the first non-null value wins, and 0 bytes is a real value (unlimited) that does not
 * inherit. Retention is clamped to at least one hour.
 */
export function effectiveValues(settings: Pick<TrashSettings, 'default_max_bytes_per_server' | 'retention_hours'>, server?: OverrideValues, egg?: OverrideValues): Effective {
  const capBytes = server?.max_bytes ?? egg?.max_bytes ?? settings.default_max_bytes_per_server;
  const retention = server?.retention_hours ?? egg?.retention_hours ?? settings.retention_hours;
  return { capBytes, retentionHours: Math.max(1, retention) };
}

/** Linux's limit on one name, in bytes. */
const MAX_NAME_BYTES = 255;

/**
 * The path a restore tries on its `attempt`-th try: the original, then `name (restored)`,
 * `name (restored 2)`, ... A name too long to take the suffix loses characters from its end.
 */
export function restoredName(path: string, attempt: number): string {
  if (attempt === 0) return path;
  const suffix = attempt === 1 ? ' (restored)' : ` (restored ${attempt})`;
  const slash = path.lastIndexOf('/');
  const chars = [...path.slice(slash + 1)];
  let bytes = Buffer.byteLength(chars.join('')) + suffix.length;
  while (bytes > MAX_NAME_BYTES) bytes -= Buffer.byteLength(chars.pop() ?? '');
  return `${path.slice(0, slash + 1)}${chars.join('')}${suffix}`;
}

/** Whether a volume-relative normalised path (`a/b`) is the trash folder or inside it. */
export function isTrashPath(path: string): boolean {
  return path === TRASH_DIR || path.startsWith(`${TRASH_DIR}/`);
}

/** Laravel's `$request->boolean()`: true, 1, and the strings "1", "true", "on", "yes" (any case). */
export function truthy(v: unknown): boolean {
  if (v === true || v === 1) return true;
  return typeof v === 'string' && ['1', 'true', 'on', 'yes'].includes(v.trim().toLowerCase());
}

/**
 * Shared pieces of the record services: timestamps, 0/1 booleans, and the not-found error every
 * lookup uses (one code, so the APIs answer 404 the same way for every resource).
 */
import { AppError } from '../../../src/core/app-error.ts';
import type { Repository, Row, Value } from '../store/repository.ts';
import type { FieldProblem } from './validation.ts';

export function now(): string {
  return new Date().toISOString();
}

/** Columns stamped on insert. */
export function created(): { created_at: string; updated_at: string } {
  const t = now();
  return { created_at: t, updated_at: t };
}

export function notFound(what: string): AppError {
  return new AppError('ERR_NOT_FOUND', `the requested ${what} was not found`, { status: 404 });
}

/** Returns the row or throws ERR_NOT_FOUND naming `what`. */
export function found<T>(row: T | undefined, what: string): T {
  if (row === undefined) throw notFound(what);
  return row;
}

/** Booleans of an input as 0/1 columns, other values unchanged. */
export function toColumns(input: Record<string, unknown>): Record<string, string | number | null> {
  return Object.fromEntries(Object.entries(input).map(([k, v]) => [k, typeof v === 'boolean' ? (v ? 1 : 0) : (v as string | number | null)]));
}

/**
 * The problem of a unique `field` whose `value` another row of `repo` than `selfId` has (none
 * for an absent or null value). Checked before the write: its unique index would name only the
 * first taken field, as `invalid`.
 */
export async function takenProblems<T extends Row>(repo: Repository<T>, field: string, value: Value | undefined, selfId?: number): Promise<FieldProblem[]> {
  if (value === undefined || value === null) return [];
  const other = await repo.findBy({ [field]: value });
  return other !== undefined && other['id'] !== selfId ? [{ field, rule: 'unique', detail: `the ${field} has already been taken` }] : [];
}

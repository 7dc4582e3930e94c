/**
 * Cron expressions (five fields, cron-parser) evaluated in an IANA time zone. Used by the
 * container daemon's scheduler and by config checks.
 */
import { CronExpressionParser } from 'cron-parser';

/** Why `expr` is not a valid cron expression, or undefined when it is. */
export function cronProblem(expr: string): string | undefined {
  if (expr.trim().split(/\s+/).length !== 5) return 'must have five fields (minute hour day month weekday)';
  try {
    CronExpressionParser.parse(expr);
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

/** The next time `expr` fires strictly after `from`, in time zone `tz`. */
export function nextCronTime(expr: string, tz: string, from: Date): Date {
  return CronExpressionParser.parse(expr, { tz, currentDate: from }).next().toDate();
}

/**
 * `RUST_LOG` overrides `log_level` (spec/3 §2.1 keeps the name of the original implementation).
 * Accepted forms are those of env_logger that make sense for one program: a bare level (`debug`),
 * or directives with a target (`osproxy=debug,hyper=info`), where the `osproxy` directive wins and
 * otherwise the bare level. `off` silences the log.
 */
import type { LogLevel } from '../../src/core/logger.ts';

const LEVELS: ReadonlySet<string> = new Set(['error', 'warn', 'info', 'debug', 'trace']);

export type ProxyLogLevel = LogLevel | 'silent';

/** The level RUST_LOG asks for, or undefined when it is unset or names no usable level. */
export function levelFromRustLog(value: string | undefined): ProxyLogLevel | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  let bare: string | undefined;
  let ours: string | undefined;
  for (const directive of value.split(',')) {
    const d = directive.trim().toLowerCase().split('/')[0] ?? '';
    const eq = d.indexOf('=');
    if (eq === -1) {
      if (LEVELS.has(d) || d === 'off') bare = d;
      continue;
    }
    const target = d.slice(0, eq);
    const level = d.slice(eq + 1);
    if ((target === 'osproxy' || target === 'hostkit') && (LEVELS.has(level) || level === 'off')) ours = level;
  }
  const chosen = ours ?? bare;
  if (chosen === undefined) return undefined;
  return chosen === 'off' ? 'silent' : (chosen as LogLevel);
}

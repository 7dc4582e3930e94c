/**
 * The one error type of hostkit. `code` is machine readable (an `ERR_*` code on the wire, or a
 * config/CLI code), `status` is the HTTP status an API maps it to (each API maps in one place),
 * `cause` keeps the underlying error for logs without leaking it to clients.
 */
export class AppError extends Error {
  readonly code: string;
  readonly status: number;

  constructor(code: string, message: string, opts: { status?: number; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'AppError';
    this.code = code;
    this.status = opts.status ?? 500;
  }
}

/** True when `err` is an AppError, optionally with the given code. */
export function isAppError(err: unknown, code?: string): err is AppError {
  return err instanceof AppError && (code === undefined || err.code === code);
}

/** A short message for any thrown value, for logs and one-line CLI errors. */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}

/**
 * The daemons' logger: pino writing to stdout and/or a rotating file, configured by the `logging`
 * keys the node agent and the container daemon share (spec/1 §2.10, spec/3 §2.8).
 *
 * No pino transports: they run in worker threads that load files by path, which breaks inside the
 * single executable. Destinations are in-process streams joined by `pino.multistream`. Secrets are
 * redacted before a line is serialized, so no destination ever sees them.
 */
import pino, { type DestinationStream, type Logger } from 'pino';
import { createRotatingFile, type RotatingFile } from '../lib/rotating-file.ts';

export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error';
export type LogFormat = 'json' | 'text';

export interface LoggerOptions {
  /** The program name, written as `name` in JSON lines. */
  name: string;
  level?: LogLevel;
  /** Also log to stdout. Default true. */
  console?: boolean;
  /** Log file path; empty = no file. Default ''. */
  file?: string;
  max_size_mb?: number;
  max_age_days?: number;
  max_backups?: number;
  compress?: boolean;
  format?: LogFormat;
  /** Extra secret field names (matched at any depth, ignoring case) on top of SECRET_KEYS. */
  redactKeys?: readonly string[];
  /** Tests: rotate at this many bytes instead of max_size_mb. */
  maxBytes?: number;
  /** Tests: receives console output instead of stdout. */
  stdout?: { write(chunk: string): unknown };
  /** Tests: where file errors are reported (default stderr). */
  onFileError?: (err: Error) => void;
}

/** A pino logger that can also be closed: drains every destination and background rotation work. */
export type AppLogger = Logger & {
  /** Flushes and closes the destinations; awaited by graceful shutdown. Later lines are dropped. */
  close(): Promise<void>;
};

export const LOGGER_DEFAULTS = {
  level: 'info',
  console: true,
  file: '',
  max_size_mb: 100,
  max_age_days: 30,
  max_backups: 10,
  compress: true,
  format: 'json',
} as const satisfies Omit<Required<LoggerOptions>, 'name' | 'redactKeys' | 'maxBytes' | 'stdout' | 'onFileError'>;

/**
 * Field names (any depth, any letter case) whose values are replaced by "[redacted]". A walk over
 * the logged object rather than pino's `redact` paths: their cost grows with each wildcard level
 * (measured 10 µs a line at one level, 60 µs at three), the walk adds about 2 µs and has no depth
 * gaps.
 */
export const SECRET_KEYS: readonly string[] = [
  'token',
  'password',
  'secret',
  'authorization',
  'webhook_url',
  'cookie',
  'set-cookie',
  'api_key',
  'x-api-key',
  'access_token',
  'refresh_token',
];
const DEFAULT_SECRETS: ReadonlySet<string> = new Set(SECRET_KEYS);
const CENSOR = '[redacted]';
// Deeper structures are written as they are; the bound also stops reference cycles.
const MAX_REDACT_DEPTH = 10;

/**
 * Returns `value` with every secret field replaced; runs on each logged object, child binding and
 * serialized error. Copies only the objects on the way to a secret (the caller's object is never
 * changed) and descends only into plain objects and arrays: class instances (Error, Map, Buffer)
 * are left to their serializers.
 */
export function redactSecrets(value: unknown, secret: ReadonlySet<string> = DEFAULT_SECRETS, depth = 0): unknown {
  if (value === null || typeof value !== 'object' || depth > MAX_REDACT_DEPTH) return value;
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      const r = redactSecrets(item, secret, depth + 1);
      if (r !== item) (copy ??= value.slice())[i] = r;
    }
    return copy ?? value;
  }
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return value;
  const obj = value as Record<string, unknown>;
  let copy: Record<string, unknown> | undefined;
  for (const key of Object.keys(obj)) {
    const v = obj[key];
    const r = secret.has(key.toLowerCase()) ? (v === undefined || v === null ? v : CENSOR) : redactSecrets(v, secret, depth + 1);
    if (r !== v) (copy ??= { ...obj })[key] = r;
  }
  return copy ?? obj;
}

// pino's numbers, for the text renderer when a line carries one.
const LEVEL_NAMES: Record<number, string> = { 10: 'trace', 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'fatal' };
// Fields every line has that the text form shows in fixed places or leaves out as constant noise.
const TEXT_SKIP = new Set(['time', 'level', 'msg', 'pid', 'hostname', 'name']);

/**
 * Renders one pino JSON line as `2026-11-23T07:01:02.123Z INFO  message key=value key2="quoted"`
 * (with the trailing newline); called for every line when format is text. It reads the serialized
 * line rather than pino's raw object because only the serialized one is redacted. Nested objects
 * flatten to dotted keys; a line that is not JSON passes through unchanged.
 */
export function formatTextLine(line: string): string {
  let rec: Record<string, unknown>;
  try {
    rec = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line.endsWith('\n') ? line : `${line}\n`;
  }
  const time = typeof rec['time'] === 'number' ? new Date(rec['time']).toISOString() : String(rec['time'] ?? '');
  const lvl = rec['level'];
  const label = (typeof lvl === 'number' ? (LEVEL_NAMES[lvl] ?? String(lvl)) : String(lvl ?? '')).toUpperCase();
  let out = `${time} ${label.padEnd(5)}`;
  if (rec['msg'] !== undefined) out += ` ${oneLine(String(rec['msg']))}`;
  const pairs: string[] = [];
  for (const [k, v] of Object.entries(rec)) if (!TEXT_SKIP.has(k)) flatten(k, v, pairs);
  if (pairs.length > 0) out += ` ${pairs.join(' ')}`;
  return `${out}\n`;
}

function flatten(key: string, value: unknown, out: string[]): void {
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const entries = Object.entries(value);
    if (entries.length === 0) out.push(`${key}={}`);
    for (const [k, v] of entries) flatten(`${key}.${k}`, v, out);
    return;
  }
  out.push(`${key}=${textValue(value)}`);
}

function textValue(value: unknown): string {
  if (Array.isArray(value)) return textValue(JSON.stringify(value));
  if (typeof value === 'string') return /^[^\s"=\\\p{C}]+$/u.test(value) ? value : JSON.stringify(value);
  return String(value);
}

// A message with a newline would split one record over two lines in the text form.
function oneLine(msg: string): string {
  return msg.replace(/\r?\n/g, '\\n');
}

type FlushableStream = DestinationStream & { flushSync?: () => void; end?: () => void };

function textStream(target: FlushableStream): FlushableStream {
  return {
    write(line: string) {
      target.write(formatTextLine(line));
    },
    flushSync() {
      target.flushSync?.();
    },
    end() {
      target.end?.();
    },
  };
}

/**
 * Builds the process logger from the `logging` config section; runs once at daemon start (and
 * again on a reload that changes logging, after which the old one is closed). Returns a pino
 * logger with `close()`; `flush()` writes everything buffered synchronously.
 */
export function createLogger(opts: LoggerOptions): AppLogger {
  const o = { ...LOGGER_DEFAULTS, ...stripUndefined(opts) };
  const secrets = new Set([...SECRET_KEYS, ...(opts.redactKeys ?? [])].map((k) => k.toLowerCase()));
  const streams: pino.StreamEntry[] = [];
  let file: RotatingFile | undefined;

  const wrap = (s: FlushableStream): FlushableStream => (o.format === 'text' ? textStream(s) : s);
  if (o.console) {
    let out: FlushableStream;
    if (opts.stdout) {
      const target = opts.stdout;
      out = { write: (s: string) => void target.write(s) };
    } else {
      const dest = pino.destination({ dest: 1, sync: true });
      // pino already silences EPIPE; any other stdout failure must not take the daemon down either.
      dest.on('error', () => undefined);
      out = dest;
    }
    streams.push({ level: 'trace', stream: wrap(out) });
  }
  if (o.file !== '') {
    file = createRotatingFile({
      path: o.file,
      maxSizeMb: o.max_size_mb,
      ...(opts.maxBytes !== undefined ? { maxBytes: opts.maxBytes } : {}),
      maxAgeDays: o.max_age_days,
      maxBackups: o.max_backups,
      compress: o.compress,
      ...(opts.onFileError ? { onError: opts.onFileError } : {}),
    });
    streams.push({ level: 'trace', stream: wrap(file) });
  }

  // Every destination takes every level; the logger's own level filters, so `logger.level = 'debug'`
  // at runtime reaches all of them.
  const multi = pino.multistream(streams) as ReturnType<typeof pino.multistream> & { flush?: (cb: (err?: Error) => void) => void };
  // Without `flush` on the stream, pino's `logger.flush(cb)` would call back without writing.
  multi.flush = (cb) => {
    multi.flushSync();
    cb();
  };

  const logger = pino(
    {
      name: o.name,
      level: o.level,
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: {
        level: (label) => ({ level: label }),
        log: (obj) => redactSecrets(obj, secrets) as Record<string, unknown>,
      },
      // Errors are class instances the walk skips; their serialized form keeps their own
      // properties (a client error's request headers, say), so it is walked as a plain object.
      serializers: {
        // A string (or any non-object) logged as `err` stays as it is.
        err: (err: unknown) => (err !== null && typeof err === 'object' ? redactSecrets({ ...pino.stdSerializers.err(err as Error) }, secrets) : err),
      },
    },
    multi,
  ) as AppLogger;

  // pino serializes child bindings once, past `formatters.log`; every descendant inherits this
  // `child` through its prototype chain, so grandchildren are covered too.
  const pinoChild = logger.child;
  function child(this: Logger, bindings: pino.Bindings, options?: pino.ChildLoggerOptions): unknown {
    return Reflect.apply(pinoChild, this, [redactSecrets(bindings, secrets), options]);
  }
  logger.child = child as Logger['child'];

  let closing: Promise<void> | undefined;
  logger.close = () => {
    closing ??= (async () => {
      multi.flushSync();
      await file?.close();
    })();
    return closing;
  };
  return logger;
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/**
 * What the daemons' local CLIs share: finding the admin socket from a config file that may be
 * half broken, and printing tables, byte counts and rates for people.
 */
import { readFileSync } from 'node:fs';
import { isMap, parseDocument } from 'yaml';
import { AppError } from '../core/app-error.ts';
import { GIB, KIB, MIB } from './units.ts';

/**
 * `general.socket_path` of the config file, read leniently (status must work while the file has
 * problems), else `fallback`. A missing file is fine only at the default path (a host without a
 * config file runs with the default socket); a missing file the operator named is a typo, and
 * asking the default socket instead would answer for another daemon or not at all. Runs once per
 * CLI command.
 */
export function socketPathFromConfig(configPath: string, defaultConfigPath: string, fallback: string): string {
  let text: string;
  try {
    text = readFileSync(configPath, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' && configPath === defaultConfigPath) return fallback;
    if (code === 'ENOENT') throw new AppError('ERR_CONFIG', `no config file at ${configPath} (leave --config out to use the default socket ${fallback})`);
    throw new AppError('ERR_CONFIG', `cannot read ${configPath} (${code === 'EISDIR' ? 'it is a directory' : code === 'EACCES' ? 'permission denied' : String(code)}), so its general.socket_path is unknown`);
  }
  // Read as far as the YAML goes: a mistake elsewhere in the file must not hide the socket path.
  const doc = parseDocument(text, { prettyErrors: false });
  const socket = doc.getIn(['general', 'socket_path']);
  if (typeof socket === 'string' && socket !== '') return socket;
  if (doc.errors.length > 0) {
    throw new AppError('ERR_CONFIG', `${configPath} does not parse (${doc.errors[0]?.message.split('\n')[0] ?? 'YAML error'}), so its general.socket_path is unknown: fix it (check lists the problems)`);
  }
  // Written but unusable (empty, a number, a `general` that is no section): asking the default
  // socket instead would answer for another daemon or not at all.
  if (doc.contents !== null && !isMap(doc.contents)) throw new AppError('ERR_CONFIG', `${configPath} does not hold a mapping of keys, so its general.socket_path is unknown: fix it (check lists the problems)`);
  const general = doc.get('general');
  const unusable = general !== undefined && general !== null && !isMap(general) ? 'general is not a section' : doc.hasIn(['general', 'socket_path']) ? `general.socket_path is ${socket === '' || socket === null ? 'empty' : 'not a path'}` : undefined;
  if (unusable !== undefined) throw new AppError('ERR_CONFIG', `${unusable} in ${configPath}: set general.socket_path to the daemon's socket, or leave it out for the default ${fallback}`);
  return fallback;
}

/** `1.50 GiB`, `12.0 MiB`, `3.0 KiB`, `12 B`. */
export function formatBytes(n: number): string {
  if (n >= GIB) return `${(n / GIB).toFixed(2)} GiB`;
  if (n >= MIB) return `${(n / MIB).toFixed(1)} MiB`;
  if (n >= KIB) return `${(n / KIB).toFixed(1)} KiB`;
  return `${n} B`;
}

/** Bytes per second as `12.34 Mbit/s`. */
export function formatRate(bytesPerSec: number): string {
  return `${((bytesPerSec * 8) / 1_000_000).toFixed(2)} Mbit/s`;
}

/** Left-aligned columns, two spaces apart; the first row is the header. */
export function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return rows.map((r) => r.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ').trimEnd()).join('\n');
}

/** One line on stdout. */
export function printLine(text: string): void {
  process.stdout.write(`${text}\n`);
}

/**
 * The daemons' store helper over `node:sqlite`: opens a database with the `database` config keys
 * (spec/1 §2.10, spec/3 §2.8), applies numbered migrations, and wraps transactions.
 *
 * One process holds exactly one connection and it is the only writer (the spec's
 * `max_open_conns = 1`). `node:sqlite` is synchronous, so a transaction cannot interleave with
 * other JavaScript of the same process; other processes (the CLI, a backup, an operator's
 * `sqlite3`) may read at the same time in WAL mode, and wait up to the busy timeout for the lock
 * otherwise.
 */
import { closeSync, openSync, statSync } from 'node:fs';
import * as path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { errorMessage } from '../core/app-error.ts';
import { makeDirs } from './make-dirs.ts';

export type JournalMode = 'WAL' | 'DELETE' | 'TRUNCATE' | 'MEMORY' | 'OFF';
export type Synchronous = 'OFF' | 'NORMAL' | 'FULL' | 'EXTRA';

/**
 * One schema step. `up` runs inside a transaction the helper opens, so it must not contain
 * BEGIN/COMMIT, nor statements SQLite refuses inside one (VACUUM, `PRAGMA foreign_keys`,
 * `PRAGMA journal_mode`). Published migrations are never edited; a change is a new version.
 */
export interface Migration {
  version: number;
  name: string;
  up: string | ((db: DatabaseSync) => void);
}

export interface OpenDatabaseOptions {
  /** File path (its directory is created with mode 0750), or ':memory:' for tests. */
  path: string;
  /** Default WAL. */
  journal_mode?: JournalMode;
  /** Default NORMAL. */
  synchronous?: Synchronous;
  /** Page cache in KiB. Default 32000. */
  cache_size_kb?: number;
  /** Apply pending migrations; when false, pending ones make the open fail. Default true. */
  auto_migrate?: boolean;
  /** Strictly increasing, unique, positive integer versions. */
  migrations: readonly Migration[];
  /** How long a statement waits for another process's lock. Default 5000 ms. */
  busy_timeout_ms?: number;
}

export interface CheckpointResult {
  /** 1 when a reader kept the checkpoint from finishing (it is retried next time). */
  busy: number;
  /** Frames in the WAL, and how many reached the database file (-1 when not in WAL mode). */
  log: number;
  checkpointed: number;
}

export interface Database {
  /** The one connection; prepare statements once against it. */
  readonly db: DatabaseSync;
  /** The journal mode SQLite actually uses (lowercase, e.g. 'wal'); it may refuse WAL on some file systems. */
  readonly journalMode: string;
  /** Versions this open applied, in order (empty when the schema was current). */
  readonly applied: readonly number[];
  /**
   * Runs `fn` in a transaction and returns its result: BEGIN IMMEDIATE / COMMIT, ROLLBACK when it
   * throws (the error is rethrown). Called inside another transaction it uses a SAVEPOINT, so an
   * inner failure undoes only the inner writes. `fn` must be synchronous.
   */
  transaction<T>(fn: () => T): T;
  /** Moves the WAL into the database file and truncates it; cheap, for periodic housekeeping. */
  checkpoint(): CheckpointResult;
  /** Checkpoint, VACUUM, `PRAGMA optimize`, checkpoint again; for cleanup runs (compact_db). */
  compact(): void;
  /** Checkpoints, optimizes (both skipped while another process holds the lock) and closes; idempotent; runs at shutdown. */
  close(): void;
}

const JOURNAL_MODES: readonly JournalMode[] = ['WAL', 'DELETE', 'TRUNCATE', 'MEMORY', 'OFF'];
const SYNCHRONOUS: readonly Synchronous[] = ['OFF', 'NORMAL', 'FULL', 'EXTRA'];

/**
 * Checks that versions are positive integers, unique and strictly increasing in list order, and
 * that names are set; throws naming the first bad entry. Runs at every open (and can run in tests
 * of a role's migration list).
 */
export function validateMigrations(migrations: readonly Migration[]): void {
  let prev = 0;
  for (const [i, m] of migrations.entries()) {
    if (!Number.isSafeInteger(m.version) || m.version < 1) {
      throw new Error(`migration #${i} (${m.name}): version must be a positive integer, got ${m.version}`);
    }
    if (m.version <= prev) {
      throw new Error(
        `migration #${i} (${m.name}): version ${m.version} ${m.version === prev ? 'is used twice' : `comes after ${prev}`}; versions must be unique and strictly increasing`,
      );
    }
    if (m.name.trim() === '') throw new Error(`migration ${m.version}: name is empty`);
    prev = m.version;
  }
}

/**
 * Opens the database, sets the connection pragmas and brings the schema up to date; runs once at
 * daemon start. Returns the store handle. Throws (without changing the schema) when migrations are
 * invalid, when auto_migrate is false and some are pending, or when the database was written by a
 * newer version of the program.
 */
/** SQLite's result code for a file that is not a database. */
const SQLITE_NOTADB = 26;
/** SQLite's primary result codes for a lock another connection held past the busy timeout (the low byte of an extended code). */
const SQLITE_BUSY = 5;
const SQLITE_LOCKED = 6;

/**
 * True when `err`, or an error it wraps, is SQLite's "database is locked" (SQLITE_BUSY) or
 * "database table is locked" (SQLITE_LOCKED): another connection kept the lock past the busy
 * timeout. Callers turn it into busyMessage() rather than a generic failure.
 */
export function isDatabaseBusy(err: unknown): boolean {
  for (let e = err; e instanceof Error; e = e.cause) {
    const code = (e as { errcode?: unknown }).errcode;
    if (typeof code === 'number' && [SQLITE_BUSY, SQLITE_LOCKED].includes(code & 0xff)) return true;
  }
  return false;
}

/** What a busy database (isDatabaseBusy) is called: with the file for operators, without it for API clients. */
export function busyMessage(file?: string): string {
  return `the database ${file === undefined ? '' : `${file} `}is busy (locked by another process); retry`;
}

const kindOf = (p: string): 'dir' | 'file' | undefined => {
  try {
    return statSync(p).isDirectory() ? 'dir' : 'file';
  } catch {
    return undefined;
  }
};

/**
 * SQLite's own words for a file it cannot open ("file is not a database", "unable to open
 * database file") name no file: the error says which one and what is wrong with it. An error
 * that names the file already (a refused migration) stays as it is.
 */
function openError(file: string, err: unknown): unknown {
  const why = errorMessage(err);
  if (file === ':memory:' || why.includes(file)) return err;
  if (isDatabaseBusy(err)) return new Error(busyMessage(file), { cause: err });
  let problem = `cannot be opened: ${why}`;
  if ((err as { errcode?: unknown }).errcode === SQLITE_NOTADB) problem = `is not a SQLite database (${why}): name the database file, or a new path where one is created`;
  else if (kindOf(file) === 'dir') problem = `is a directory: name the database file (for example ${path.join(file, 'data.db')})`;
  else {
    for (let d = path.dirname(path.resolve(file)); d !== path.dirname(d); d = path.dirname(d)) {
      const kind = kindOf(d);
      if (kind === 'file') problem = `cannot be created: ${d} is a file, not a directory`;
      if (kind !== undefined) break;
    }
  }
  return new Error(`the database ${file} ${problem}`, { cause: err });
}

/**
 * Creates a missing database file with mode 0600 before SQLite opens it (SQLite would make it
 * 0644): the stores hold password and key hashes, counters and queued webhooks. SQLite gives its
 * -wal and -shm files the database file's mode. An existing file keeps its mode. Runs before
 * each open of a file path.
 */
function createPrivate(file: string): void {
  try {
    closeSync(openSync(file, 'wx', 0o600));
  } catch {
    // There already, or not creatable (a directory, a path through a file, no permission):
    // SQLite's open then fails or succeeds as before, and openError names the problem.
  }
}

export function openDatabase(opts: OpenDatabaseOptions): Database {
  const journal = opts.journal_mode ?? 'WAL';
  const sync = opts.synchronous ?? 'NORMAL';
  const cacheKb = opts.cache_size_kb ?? 32000;
  const busyMs = opts.busy_timeout_ms ?? 5000;
  // These go into PRAGMA text (pragmas take no bound parameters), so only known values pass.
  if (!JOURNAL_MODES.includes(journal)) throw new Error(`database.journal_mode: unknown mode ${String(journal)}`);
  if (!SYNCHRONOUS.includes(sync)) throw new Error(`database.synchronous: unknown value ${String(sync)}`);
  if (!Number.isSafeInteger(cacheKb) || cacheKb < 0) throw new Error(`database.cache_size_kb: must be a non-negative integer, got ${cacheKb}`);
  if (!Number.isSafeInteger(busyMs) || busyMs < 0) throw new Error(`busy timeout must be a non-negative integer, got ${busyMs}`);
  validateMigrations(opts.migrations);

  let db: DatabaseSync;
  try {
    if (opts.path !== ':memory:') {
      makeDirs(path.dirname(path.resolve(opts.path)), 0o750);
      createPrivate(opts.path);
    }
    db = new DatabaseSync(opts.path);
  } catch (err) {
    throw openError(opts.path, err);
  }
  try {
    db.exec(`PRAGMA busy_timeout = ${busyMs}`);
    db.exec('PRAGMA foreign_keys = ON');
    const mode = (db.prepare(`PRAGMA journal_mode = ${journal}`).get() as { journal_mode: string }).journal_mode;
    db.exec(`PRAGMA synchronous = ${sync}`);
    // The negative form means KiB rather than pages, so the figure does not depend on page size.
    db.exec(`PRAGMA cache_size = ${-cacheKb}`);
    const applied = migrate(db, opts.migrations, opts.auto_migrate ?? true, opts.path);
    return createHandle(db, mode, applied);
  } catch (err) {
    db.close();
    throw openError(opts.path, err);
  }
}

function migrate(db: DatabaseSync, migrations: readonly Migration[], autoMigrate: boolean, file: string): number[] {
  const hasTable = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").get() !== undefined;
  const done = new Set<number>();
  if (hasTable) {
    for (const row of db.prepare('SELECT version FROM schema_migrations').all()) done.add(Number(row['version']));
  }
  const known = migrations.at(-1)?.version ?? 0;
  // Every applied version must be one of ours, not only the highest: the panel numbers its core
  // (1-99) below its addons (100+), so a later release's core migration 4 sits below our 300.
  const knownVersions = new Set(migrations.map((m) => m.version));
  const unknown = [...done].filter((v) => !knownVersions.has(v)).sort((a, b) => a - b);
  if (unknown.length > 0) {
    throw new Error(
      `database schema has version${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}, written by a newer release than this program (which knows up to ${known}); refusing to open it with an older version`,
    );
  }
  const pending = migrations.filter((m) => !done.has(m.version));
  if (pending.length === 0) return [];
  if (!autoMigrate) {
    throw new Error(
      `database ${file} needs migrations ${pending.map((m) => m.version).join(', ')} and database.auto_migrate is false: set auto_migrate to true for one start (after a backup of the file) to apply them, then set it back`,
    );
  }

  db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)');
  const isDone = db.prepare('SELECT 1 FROM schema_migrations WHERE version = ?');
  const record = db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)');
  const applied: number[] = [];
  for (const m of pending) {
    db.exec('BEGIN IMMEDIATE');
    try {
      // Another process may have migrated between our read and our write lock.
      if (isDone.get(m.version) === undefined) {
        if (typeof m.up === 'string') db.exec(m.up);
        else m.up(db);
        record.run(m.version, m.name, new Date().toISOString());
        applied.push(m.version);
      }
      db.exec('COMMIT');
    } catch (err) {
      if (db.isTransaction) db.exec('ROLLBACK');
      throw new Error(`migration ${m.version} (${m.name}) failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
  }
  return applied;
}

function createHandle(db: DatabaseSync, journalMode: string, applied: number[]): Database {
  let savepoints = 0;
  let closed = false;

  function checkpoint(): CheckpointResult {
    const row = db.prepare('PRAGMA wal_checkpoint(TRUNCATE)').get() as Record<string, number>;
    return { busy: Number(row['busy']), log: Number(row['log']), checkpointed: Number(row['checkpointed']) };
  }

  function transaction<T>(fn: () => T): T {
    if (!db.isTransaction) {
      db.exec('BEGIN IMMEDIATE');
      try {
        const result = fn();
        assertSync(result);
        db.exec('COMMIT');
        return result;
      } catch (err) {
        // A failed COMMIT (e.g. a deferred constraint) may already have ended the transaction.
        if (db.isTransaction) db.exec('ROLLBACK');
        throw err;
      }
    }
    const name = `sp_${++savepoints}`;
    db.exec(`SAVEPOINT ${name}`);
    try {
      const result = fn();
      assertSync(result);
      db.exec(`RELEASE ${name}`);
      return result;
    } catch (err) {
      // ROLLBACK TO keeps the savepoint open; RELEASE removes it, leaving the outer transaction as it was before it.
      if (db.isTransaction) {
        db.exec(`ROLLBACK TO ${name}`);
        db.exec(`RELEASE ${name}`);
      }
      throw err;
    } finally {
      savepoints--;
    }
  }

  return {
    db,
    journalMode,
    applied,
    transaction,
    checkpoint,
    compact() {
      if (db.isTransaction) throw new Error('compact() cannot run inside a transaction');
      checkpoint();
      db.exec('VACUUM');
      db.exec('PRAGMA optimize');
      // In WAL mode VACUUM writes the whole database through the WAL; move it back and shrink it.
      checkpoint();
    },
    close() {
      if (closed) return;
      closed = true;
      try {
        if (db.isTransaction) db.exec('ROLLBACK');
        try {
          db.exec('PRAGMA optimize');
          checkpoint();
        } catch (err) {
          // Housekeeping only: while another process holds the lock it waits for a later close,
          // and the error that brought the caller here is not replaced by this one.
          if (!isDatabaseBusy(err)) throw err;
        }
      } finally {
        db.close();
      }
    },
  };
}

// A promise would let the transaction commit before the work inside it ran.
function assertSync(result: unknown): void {
  if (result !== null && typeof result === 'object' && typeof (result as { then?: unknown }).then === 'function') {
    throw new TypeError('transaction(fn): fn returned a promise; transactions must be synchronous');
  }
}

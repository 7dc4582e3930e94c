import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DatabaseSync } from 'node:sqlite';
import { busyMessage, isDatabaseBusy, openDatabase, validateMigrations, type Database, type Migration, type OpenDatabaseOptions } from './sqlite.ts';

let root: string;
let seq = 0;
before(() => {
  process.umask(0o022);
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'hostkit-sqlite-'));
});
after(() => fs.rmSync(root, { recursive: true, force: true }));

function dbPath(): string {
  return path.join(root, `t${++seq}`, 'state', 'app.db');
}

const BASE: readonly Migration[] = [
  { version: 1, name: 'items', up: 'CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)' },
  {
    version: 2,
    name: 'tags',
    up: (db) => {
      db.exec('CREATE TABLE tags (item_id INTEGER NOT NULL REFERENCES items(id), tag TEXT NOT NULL)');
      db.prepare('INSERT INTO items (name) VALUES (?)').run('seed');
    },
  },
];

function open(file: string, extra: Partial<OpenDatabaseOptions> = {}) {
  return openDatabase({ path: file, migrations: BASE, ...extra });
}

function count(store: Database, table: string): number {
  return Number((store.db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n);
}

describe('openDatabase', () => {
  it('creates the directory (0750) and sets WAL, synchronous, cache size, foreign keys', () => {
    const file = dbPath();
    const store = open(file, { synchronous: 'FULL', cache_size_kb: 2048 });
    try {
      assert.equal(fs.statSync(path.dirname(file)).mode & 0o777, 0o750);
      assert.equal(store.journalMode, 'wal');
      const pragma = (name: string) => Object.values(store.db.prepare(`PRAGMA ${name}`).get() ?? {})[0];
      assert.equal(pragma('journal_mode'), 'wal');
      assert.equal(pragma('synchronous'), 2); // FULL
      assert.equal(pragma('cache_size'), -2048);
      assert.equal(pragma('foreign_keys'), 1);
      assert.equal(pragma('busy_timeout'), 5000);
      assert.throws(() => store.db.prepare('INSERT INTO tags (item_id, tag) VALUES (999, ?)').run('x'), /FOREIGN KEY/);
    } finally {
      store.close();
    }
  });

  it('creates a new database file 0600, and its WAL too; an existing file keeps its mode', () => {
    const file = dbPath();
    const store = open(file);
    try {
      store.db.prepare("INSERT INTO items (name) VALUES ('x')").run();
      assert.equal(fs.statSync(file).mode & 0o777, 0o600);
      assert.equal(fs.statSync(`${file}-wal`).mode & 0o777, 0o600);
    } finally {
      store.close();
    }
    fs.chmodSync(file, 0o640);
    open(file).close();
    assert.equal(fs.statSync(file).mode & 0o777, 0o640);
  });

  it('applies migrations once, in order, and records them', () => {
    const file = dbPath();
    const first = open(file);
    assert.deepEqual(first.applied, [1, 2]);
    const rows = first.db.prepare('SELECT version, name, applied_at FROM schema_migrations ORDER BY version').all();
    assert.deepEqual(rows.map((r) => [r['version'], r['name']]), [[1, 'items'], [2, 'tags']]);
    for (const r of rows) assert.match(String(r['applied_at']), /^\d{4}-\d\d-\d\dT/);
    first.close();

    const again = open(file);
    assert.deepEqual(again.applied, []);
    assert.equal(count(again, 'items'), 1, 'the data migration ran once');
    again.close();

    const more = open(file, { migrations: [...BASE, { version: 5, name: 'extra', up: 'ALTER TABLE items ADD COLUMN note TEXT' }] });
    assert.deepEqual(more.applied, [5]);
    more.close();
  });

  it('rolls a failing migration back and leaves its version unrecorded', () => {
    const file = dbPath();
    open(file).close();
    const bad: Migration = { version: 3, name: 'broken', up: "CREATE TABLE half (x); INSERT INTO items (name) VALUES ('partial'); SELECT * FROM no_such_table" };
    assert.throws(() => open(file, { migrations: [...BASE, bad] }), /migration 3 \(broken\) failed: .*no_such_table/);
    const store = open(file);
    try {
      assert.equal(store.db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'half'").get(), undefined);
      assert.equal(count(store, 'items'), 1);
      assert.deepEqual(store.db.prepare('SELECT version FROM schema_migrations ORDER BY version').all().map((r) => r['version']), [1, 2]);
    } finally {
      store.close();
    }
  });

  it('refuses to migrate when auto_migrate is false, naming the pending versions', () => {
    const file = dbPath();
    assert.throws(() => open(file, { auto_migrate: false }), /needs migrations 1, 2 and database\.auto_migrate is false: set auto_migrate to true for one start/);
    // Nothing was created: the schema stays untouched.
    const probe = open(file, { migrations: [] });
    assert.equal(probe.db.prepare("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table'").get()?.['n'], 0);
    probe.close();
    open(file).close();
    const current = open(file, { auto_migrate: false });
    assert.deepEqual(current.applied, []);
    current.close();
    assert.throws(() => open(file, { auto_migrate: false, migrations: [...BASE, { version: 3, name: 'x', up: 'SELECT 1' }] }), /needs migrations 3 and/);
  });

  it('refuses a database migrated by a newer program', () => {
    const file = dbPath();
    open(file).close();
    assert.throws(() => open(file, { migrations: BASE.slice(0, 1) }), /schema has version 2, written by a newer release than this program \(which knows up to 1\)/);
  });

  it('refuses a database with a newer version below its own highest (core below addon numbers)', () => {
    const file = dbPath();
    const addon: Migration = { version: 100, name: 'addon', up: 'CREATE TABLE addon (id INTEGER PRIMARY KEY)' };
    open(file, { migrations: [...BASE, addon] }).close();
    const older = [BASE[0] as Migration, addon];
    assert.throws(() => open(file, { migrations: older }), /schema has version 2, written by a newer release than this program \(which knows up to 100\)/);
  });

  it('rejects duplicate or decreasing migration versions', () => {
    const m = (version: number, name = `m${version}`): Migration => ({ version, name, up: 'SELECT 1' });
    assert.throws(() => validateMigrations([m(1), m(1)]), /version 1 is used twice/);
    assert.throws(() => validateMigrations([m(2), m(1)]), /version 1 comes after 2/);
    assert.throws(() => validateMigrations([m(0)]), /positive integer/);
    assert.throws(() => validateMigrations([m(1.5)]), /positive integer/);
    assert.throws(() => validateMigrations([m(1, ' ')]), /name is empty/);
    assert.doesNotThrow(() => validateMigrations([m(1), m(2), m(10)]));
    assert.throws(() => open(dbPath(), { migrations: [m(1), m(1)] }), /used twice/);
  });
});

describe('transaction', () => {
  it('commits, and rolls everything back when fn throws', () => {
    const store = open(dbPath());
    try {
      const id = store.transaction(() => Number(store.db.prepare("INSERT INTO items (name) VALUES ('a')").run().lastInsertRowid));
      assert.ok(id > 0);
      assert.throws(
        () =>
          store.transaction(() => {
            store.db.prepare("INSERT INTO items (name) VALUES ('b')").run();
            throw new Error('abort');
          }),
        /abort/,
      );
      assert.equal(store.db.isTransaction, false);
      assert.deepEqual(store.db.prepare('SELECT name FROM items ORDER BY id').all().map((r) => r['name']), ['seed', 'a']);
    } finally {
      store.close();
    }
  });

  it('nested: an inner failure rolls back only the savepoint, the outer writes commit', () => {
    const store = open(dbPath());
    try {
      store.transaction(() => {
        store.db.prepare("INSERT INTO items (name) VALUES ('outer')").run();
        assert.throws(() =>
          store.transaction(() => {
            store.db.prepare("INSERT INTO items (name) VALUES ('inner')").run();
            store.db.prepare("INSERT INTO items (name) VALUES ('inner')").run(); // UNIQUE violation
          }),
        );
        store.transaction(() => store.db.prepare("INSERT INTO items (name) VALUES ('inner-ok')").run());
        store.db.prepare("INSERT INTO items (name) VALUES ('outer-after')").run();
      });
      assert.deepEqual(store.db.prepare('SELECT name FROM items ORDER BY id').all().map((r) => r['name']), ['seed', 'outer', 'inner-ok', 'outer-after']);
    } finally {
      store.close();
    }
  });

  it('rejects an async fn and rolls back', () => {
    const store = open(dbPath());
    try {
      assert.throws(() => store.transaction(async () => store.db.prepare("INSERT INTO items (name) VALUES ('x')").run()), /must be synchronous/);
      assert.equal(store.db.isTransaction, false);
      assert.equal(count(store, 'items'), 1);
    } finally {
      store.close();
    }
  });
});

describe('maintenance', () => {
  it('checkpoint truncates the WAL; compact vacuums and keeps the data; close is idempotent', () => {
    const file = dbPath();
    const store = open(file);
    store.transaction(() => {
      const ins = store.db.prepare('INSERT INTO items (name) VALUES (?)');
      for (let i = 0; i < 2000; i++) ins.run(`item-${i}-${'x'.repeat(100)}`);
    });
    assert.ok(fs.statSync(`${file}-wal`).size > 0);
    assert.equal(store.checkpoint().busy, 0);
    assert.equal(fs.statSync(`${file}-wal`).size, 0);
    store.db.exec("DELETE FROM items WHERE name LIKE 'item-%'");
    store.checkpoint();
    const before = fs.statSync(file).size;
    store.compact();
    assert.ok(fs.statSync(file).size < before, 'VACUUM returned the free pages');
    assert.equal(fs.statSync(`${file}-wal`).size, 0);
    assert.equal(count(store, 'items'), 1);
    assert.throws(() => store.transaction(() => store.compact()), /inside a transaction/);
    store.close();
    store.close();
    assert.equal(store.db.isOpen, false);
  });

  it('another process reads committed data while this one holds a write transaction (WAL)', () => {
    const file = dbPath();
    const store = open(file);
    try {
      store.transaction(() => {
        const ins = store.db.prepare('INSERT INTO items (name) VALUES (?)');
        for (let i = 0; i < 9; i++) ins.run(`committed-${i}`);
      });
      const reader = `
        const { DatabaseSync } = require('node:sqlite');
        const db = new DatabaseSync(process.env.DB, { readOnly: true, timeout: 0 });
        const mode = db.prepare('PRAGMA journal_mode').get().journal_mode;
        const n = db.prepare('SELECT count(*) AS n FROM items').get().n;
        process.stdout.write(JSON.stringify({ mode, n }));`;
      const read = () => {
        const r = spawnSync(process.execPath, ['--no-warnings', '-e', reader], { env: { ...process.env, DB: file }, encoding: 'utf8', timeout: 20_000 });
        assert.equal(r.status, 0, r.stderr);
        return JSON.parse(r.stdout) as { mode: string; n: number };
      };
      // The write lock is held (and uncommitted rows are in the WAL) while the child reads; with
      // no busy timeout in the child, only WAL lets it read without waiting.
      store.transaction(() => {
        const ins = store.db.prepare('INSERT INTO items (name) VALUES (?)');
        for (let i = 0; i < 500; i++) ins.run(`pending-${i}`);
        assert.deepEqual(read(), { mode: 'wal', n: 10 });
      });
      assert.deepEqual(read(), { mode: 'wal', n: 510 });
    } finally {
      store.close();
    }
  });
});

describe('a database file that cannot be opened', () => {
  const open = (file: string): Database => openDatabase({ path: file, migrations: [{ version: 1, name: 'initial', up: 'CREATE TABLE t (x INTEGER)' }] });

  it('is named with what is wrong: not SQLite, a directory, or under a regular file', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hk-sqlite-open-'));
    try {
      const text = path.join(dir, 'notes.txt');
      fs.writeFileSync(text, 'not a database at all, just text long enough to be read as a header\n'.repeat(20));
      assert.throws(() => open(text), { message: `the database ${text} is not a SQLite database (file is not a database): name the database file, or a new path where one is created` });
      for (const under of [path.join(text, 'x.db'), path.join(text, 'sub', 'x.db')]) {
        assert.throws(() => open(under), { message: `the database ${under} cannot be created: ${text} is a file, not a directory` });
      }
      assert.throws(() => open(dir), { message: `the database ${dir} is a directory: name the database file (for example ${path.join(dir, 'data.db')})` });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('a database another process keeps locked', () => {
  /** Runs `fn` while a second connection holds the write lock of `file` (BEGIN IMMEDIATE). */
  const whileLocked = <T>(file: string, fn: () => T): T => {
    const holder = new DatabaseSync(file);
    holder.exec('BEGIN IMMEDIATE');
    try {
      return fn();
    } finally {
      holder.exec('ROLLBACK');
      holder.close();
    }
  };
  const thrown = (fn: () => unknown): unknown => {
    try {
      fn();
    } catch (err) {
      return err;
    }
    return assert.fail('expected a throw');
  };

  it('fails writes with an error isDatabaseBusy recognises, also when wrapped, and no other error', () => {
    const file = dbPath();
    const store = open(file, { busy_timeout_ms: 0 });
    try {
      const [write, begin] = whileLocked(file, () => [thrown(() => store.db.prepare('INSERT INTO items (name) VALUES (?)').run('x')), thrown(() => store.transaction(() => 1))]);
      assert.equal(isDatabaseBusy(write), true);
      assert.equal(isDatabaseBusy(begin), true);
      assert.equal(isDatabaseBusy(new Error('wrapped', { cause: write })), true);
      assert.equal(isDatabaseBusy(thrown(() => store.db.prepare('INSERT INTO items (name) VALUES (?)').run('seed'))), false, 'a UNIQUE violation is not busy');
      assert.equal(isDatabaseBusy(new Error('database is locked')), false, 'only SQLite result codes count, not words');
    } finally {
      store.close();
    }
  });

  it('closes without throwing: the optimize and checkpoint of close wait for a later close', () => {
    const file = dbPath();
    const store = open(file, { busy_timeout_ms: 0 });
    whileLocked(file, () => store.close());
    assert.equal(store.db.isOpen, false);
  });

  it('refuses an open that must migrate, naming the file and saying it is busy', () => {
    const file = dbPath();
    open(file).close();
    const more = [...BASE, { version: 3, name: 'notes', up: 'CREATE TABLE notes (x TEXT)' }];
    whileLocked(file, () => assert.throws(() => open(file, { migrations: more, busy_timeout_ms: 0 }), { message: busyMessage(file) }));
    assert.equal(busyMessage(file), `the database ${file} is busy (locked by another process); retry`);
  });
});

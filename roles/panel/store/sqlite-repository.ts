/**
 * The SQLite driver of Repository: one prepared-statement cache per table, column names checked
 * against the table's real columns (so a key from a request body can never become SQL).
 */
import type { DatabaseSync, SQLInputValue } from 'node:sqlite';
import { AppError } from '../../../src/core/app-error.ts';
import { DEFAULT_PER_PAGE, MAX_PER_PAGE, type Filter, type ListQuery, type Page, type Row } from './repository.ts';

/** A table's operations, synchronous as node:sqlite is: usable inside one transaction. */
export interface SqliteTable<T extends Row> {
  list(query?: ListQuery): Page<T>;
  all(filter?: Filter): T[];
  find(id: number): T | undefined;
  findBy(filter: Filter): T | undefined;
  insert(values: Partial<T>): T;
  update(id: number, values: Partial<T>): T | undefined;
  remove(id: number): boolean;
  removeWhere(filter: Filter): number;
}

/** Creates the operations of one table; runs at store open. */
export function createSqliteTable<T extends Row>(db: DatabaseSync, table: string): SqliteTable<T> {
  const columns = new Set((db.prepare(`PRAGMA table_info(${table})`).all() as { name: string }[]).map((c) => c.name));
  if (columns.size === 0) throw new Error(`table ${table} does not exist`);
  const statements = new Map<string, ReturnType<DatabaseSync['prepare']>>();
  const prepare = (sql: string): ReturnType<DatabaseSync['prepare']> => {
    let s = statements.get(sql);
    if (s === undefined) {
      s = db.prepare(sql);
      statements.set(sql, s);
    }
    return s;
  };
  const col = (name: string): string => {
    if (!columns.has(name)) throw new AppError('ERR_UNKNOWN_COLUMN', `${table} has no column ${name}`, { status: 400 });
    return `"${name}"`;
  };
  const where = (filter: Filter = {}): { sql: string; args: SQLInputValue[] } => {
    const parts: string[] = [];
    const args: SQLInputValue[] = [];
    for (const [k, v] of Object.entries(filter)) {
      if (v === null) parts.push(`${col(k)} IS NULL`);
      else if (typeof v === 'object') {
        // Any of the values (a page's related records in one query); an empty list matches nothing.
        parts.push(v.length > 0 ? `${col(k)} IN (${v.map(() => '?').join(', ')})` : '0');
        args.push(...v);
      } else {
        parts.push(`${col(k)} = ?`);
        args.push(v);
      }
    }
    return { sql: parts.length > 0 ? ` WHERE ${parts.join(' AND ')}` : '', args };
  };
  const find = (id: number): T | undefined => prepare(`SELECT * FROM ${table} WHERE id = ?`).get(id) as T | undefined;
  // A unique or foreign-key violation is the caller's input, not a server fault.
  const run = (sql: string, args: SQLInputValue[]): { lastInsertRowid: number | bigint; changes: number | bigint } => {
    try {
      return prepare(sql).run(...args);
    } catch (err) {
      const m = /(UNIQUE|FOREIGN KEY|CHECK) constraint failed(?:: \w+\.(\w+))?/.exec(err instanceof Error ? err.message : '');
      if (m === null) throw err;
      const field = m[2] ?? '';
      const detail = m[1] === 'UNIQUE' ? `the ${field} has already been taken` : m[1] === 'FOREIGN KEY' ? 'a referenced record does not exist or is still in use' : 'a value is not allowed';
      throw new AppError('ERR_VALIDATION', detail, { status: 422, cause: { field } });
    }
  };
  const writable = (values: Partial<T>): [string, SQLInputValue][] =>
    Object.entries(values).filter(([k, v]) => k !== 'id' && v !== undefined && (col(k), true)) as [string, SQLInputValue][];

  return {
    list(query: ListQuery = {}): Page<T> {
      const perPage = Math.min(Math.max(1, Math.trunc(query.perPage ?? DEFAULT_PER_PAGE)), MAX_PER_PAGE);
      const page = Math.max(1, Math.trunc(query.page ?? 1));
      const w = where(query.filter);
      let sql = w.sql;
      const args = [...w.args];
      if (query.search !== undefined && query.search.term !== '') {
        const like = query.search.columns.map((c) => `${col(c)} LIKE ? ESCAPE '\\'`).join(' OR ');
        sql += `${sql === '' ? ' WHERE' : ' AND'} (${like})`;
        const term = `%${query.search.term.replace(/[\\%_]/g, (m) => `\\${m}`)}%`;
        for (let i = 0; i < query.search.columns.length; i++) args.push(term);
      }
      const sort = query.sort ?? 'id';
      const desc = sort.startsWith('-');
      const order = `${col(desc ? sort.slice(1) : sort)} ${desc ? 'DESC' : 'ASC'}`;
      const total = (prepare(`SELECT COUNT(*) AS n FROM ${table}${sql}`).get(...args) as { n: number }).n;
      const items = prepare(`SELECT * FROM ${table}${sql} ORDER BY ${order} LIMIT ? OFFSET ?`).all(...args, perPage, (page - 1) * perPage) as T[];
      return { items, total, page, perPage };
    },
    all(filter) {
      const w = where(filter);
      return prepare(`SELECT * FROM ${table}${w.sql} ORDER BY id`).all(...w.args) as T[];
    },
    find,
    findBy(filter) {
      const w = where(filter);
      return prepare(`SELECT * FROM ${table}${w.sql} LIMIT 1`).get(...w.args) as T | undefined;
    },
    insert(values) {
      const entries = writable(values);
      const sql = entries.length === 0 ? `INSERT INTO ${table} DEFAULT VALUES` : `INSERT INTO ${table} (${entries.map(([k]) => col(k)).join(', ')}) VALUES (${entries.map(() => '?').join(', ')})`;
      const r = run(sql, entries.map(([, v]) => v));
      return find(Number(r.lastInsertRowid)) as T;
    },
    update(id, values) {
      const entries = writable(values);
      if (entries.length > 0) run(`UPDATE ${table} SET ${entries.map(([k]) => `${col(k)} = ?`).join(', ')} WHERE id = ?`, [...entries.map(([, v]) => v), id]);
      return find(id);
    },
    remove: (id) => Number(run(`DELETE FROM ${table} WHERE id = ?`, [id]).changes) > 0,
    removeWhere(filter) {
      const w = where(filter);
      return Number(run(`DELETE FROM ${table}${w.sql}`, w.args).changes);
    },
  };
}

/**
 * The record store behind the panel's services. Every repository method is asynchronous, so a
 * PostgreSQL driver can implement the same interfaces; the SQLite driver (the embedded default)
 * answers synchronously underneath. Multi-row changes that must be atomic are single repository
 * methods (a driver runs them in one transaction), never a transaction held across awaits.
 */
export type Value = string | number | null;
export type Row = Record<string, Value>;
/** Exact-match filters on columns, all of which must hold: null matches NULL, a list any of its values. */
export type Filter = Record<string, Value | readonly (string | number)[]>;

export interface ListQuery {
  filter?: Filter;
  /** Case-insensitive substring search over the given columns. */
  search?: { columns: readonly string[]; term: string };
  /** 1-based; default 1; callers keep it at most MAX_PAGE (the offset must stay an SQLite integer). */
  page?: number;
  /** Default 50, at most 100. */
  perPage?: number;
  /** A column name, `-name` for descending; default `id`. */
  sort?: string;
}

export interface Page<T> {
  items: T[];
  total: number;
  page: number;
  perPage: number;
}

export interface Repository<T extends Row> {
  /** One page of rows matching the query, with the total count. */
  list(query?: ListQuery): Promise<Page<T>>;
  /** Every row matching the filter (for small sets: a user's keys, a server's subusers). */
  all(filter?: Filter): Promise<T[]>;
  find(id: number): Promise<T | undefined>;
  findBy(filter: Filter): Promise<T | undefined>;
  /** Inserts and returns the stored row (with defaults and id). */
  insert(values: Partial<T>): Promise<T>;
  /** Updates the given columns; undefined when the row does not exist. */
  update(id: number, values: Partial<T>): Promise<T | undefined>;
  /** Deletes by id; false when it did not exist. */
  remove(id: number): Promise<boolean>;
  /** Deletes every row matching the filter; returns how many. */
  removeWhere(filter: Filter): Promise<number>;
}

export const MAX_PER_PAGE = 100;
export const DEFAULT_PER_PAGE = 50;
/** The highest page number the APIs accept and the admin pages clamp to: far past any real list. */
export const MAX_PAGE = 1_000_000;

/** The asynchronous face of a synchronous driver object: every method returns a promise. */
export type Async<T> = { [K in keyof T]: T[K] extends (...args: infer A) => infer R ? (...args: A) => Promise<Awaited<R>> : T[K] };

/** Wraps a synchronous driver object (SQLite) as its asynchronous interface; a throw becomes a rejection. */
export function promisify<T extends object>(sync: T): Async<T> {
  return Object.fromEntries(
    Object.entries(sync).map(([k, fn]) => [k, typeof fn === 'function' ? (...args: unknown[]) => new Promise((resolve) => resolve((fn as (...a: unknown[]) => unknown)(...args))) : fn]),
  ) as Async<T>;
}

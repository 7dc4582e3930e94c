/**
 * The panel store: one repository per core table plus the few atomic multi-row operations the
 * services need. `openPanelStore` is the SQLite driver (database.driver = sqlite, the file
 * `panel.sqlite` in data_dir); a PostgreSQL driver returns the same PanelStore.
 */
import { join } from 'node:path';
import { openDatabase, type Database, type Migration } from '../../../src/lib/sqlite.ts';
import { CORE_MIGRATIONS } from './migrations.ts';
import type {
  ActivityRow,
  AllocationRow,
  ApiKeyRow,
  DeletedNodeTokenRow,
  EggRow,
  LocationRow,
  NestRow,
  NodeRow,
  RecoveryTokenRow,
  ServerRow,
  SessionRow,
  SubuserRow,
  UserRow,
} from './records.ts';
import { promisify, type Repository } from './repository.ts';
import { createSqliteTable } from './sqlite-repository.ts';
import { AppError } from '../../../src/core/app-error.ts';

export interface PanelStore {
  users: Repository<UserRow>;
  recoveryTokens: Repository<RecoveryTokenRow>;
  sessions: Repository<SessionRow>;
  locations: Repository<LocationRow>;
  nodes: Repository<NodeRow>;
  deletedNodeTokens: Repository<DeletedNodeTokenRow>;
  allocations: Repository<AllocationRow>;
  nests: Repository<NestRow>;
  eggs: Repository<EggRow>;
  servers: Repository<ServerRow>;
  subusers: Repository<SubuserRow>;
  apiKeys: Repository<ApiKeyRow>;
  activity: Repository<ActivityRow>;
  /**
   * Inserts a server and assigns its allocation in one transaction; fails with ERR_VALIDATION when
   * the allocation is taken, belongs to another node or does not exist.
   */
  createServer(values: Omit<ServerRow, 'id'>): Promise<ServerRow>;
  /** Deletes a node and records its token's id and hash in deleted_node_tokens, in one transaction; false when it did not exist. */
  deleteNode(id: number, deletedAt: string): Promise<boolean>;
  /** Replaces a user's recovery codes (hashes) in one transaction. */
  replaceRecoveryTokens(userId: number, hashes: readonly string[], createdAt: string): Promise<void>;
  /** The SQLite driver's database, for addons' own SQLite repositories (a PostgreSQL driver has its own). */
  readonly sqlite: Database;
  close(): void;
}

export const DATABASE_FILE = 'panel.sqlite';

/** Opens (creating and migrating) the SQLite store in `dataDir`; runs once per process. */
export function openPanelStore(dataDir: string, extraMigrations: readonly Migration[] = []): PanelStore {
  const database = openDatabase({
    path: dataDir === ':memory:' ? ':memory:' : join(dataDir, DATABASE_FILE),
    migrations: [...CORE_MIGRATIONS, ...extraMigrations],
  });
  const { db } = database;
  const repo = <T extends Record<string, string | number | null>>(table: string): Repository<T> => promisify(createSqliteTable<T>(db, table));
  const serverTable = createSqliteTable<ServerRow>(db, 'servers');
  const recoveryTable = createSqliteTable<RecoveryTokenRow>(db, 'recovery_tokens');
  const nodeTable = createSqliteTable<NodeRow>(db, 'nodes');
  const deletedTokenTable = createSqliteTable<DeletedNodeTokenRow>(db, 'deleted_node_tokens');
  // A synchronous transaction as a promise: a thrown error becomes a rejection.
  const run = <R>(fn: () => R): Promise<R> => new Promise<R>((resolve) => resolve(database.transaction(fn)));
  return {
    users: repo<UserRow>('users'),
    recoveryTokens: promisify(recoveryTable),
    sessions: repo<SessionRow>('sessions'),
    locations: repo<LocationRow>('locations'),
    nodes: promisify(nodeTable),
    deletedNodeTokens: promisify(deletedTokenTable),
    allocations: repo<AllocationRow>('allocations'),
    nests: repo<NestRow>('nests'),
    eggs: repo<EggRow>('eggs'),
    servers: promisify(serverTable),
    subusers: repo<SubuserRow>('subusers'),
    apiKeys: repo<ApiKeyRow>('api_keys'),
    activity: repo<ActivityRow>('activity_logs'),
    createServer(values) {
      return run(() => {
        const server = serverTable.insert(values);
        if (values.allocation_id !== null) {
          const claimed = db.prepare('UPDATE allocations SET server_id = ? WHERE id = ? AND node_id = ? AND server_id IS NULL').run(server.id, values.allocation_id, values.node_id);
          if (Number(claimed.changes) !== 1) throw new AppError('ERR_VALIDATION', 'the allocation does not exist on this node or is already assigned', { status: 422, cause: { field: 'allocation_id' } });
        }
        return server;
      });
    },
    deleteNode(id, deletedAt) {
      return run(() => {
        const node = nodeTable.find(id);
        if (node === undefined) return false;
        deletedTokenTable.insert({ node_id: node.id, node_name: node.name, token_id: node.token_id, token_hash: node.token_hash, deleted_at: deletedAt });
        return nodeTable.remove(id);
      });
    },
    replaceRecoveryTokens(userId, hashes, createdAt) {
      return run(() => {
        recoveryTable.removeWhere({ user_id: userId });
        for (const token_hash of hashes) recoveryTable.insert({ user_id: userId, token_hash, created_at: createdAt });
      });
    },
    sqlite: database,
    close: () => database.close(),
  };
}

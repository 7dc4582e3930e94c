/**
 * Opens a panel for serve and for the CLI commands: loads the config (refusing on any problem),
 * prepares data_dir (mode 0750), loads or creates the app key, opens the store with the core's and
 * every addon's migrations, builds the PanelContext and attaches the addons. The caller closes it.
 */
import { AppError } from '../../src/core/app-error.ts';
import { createLogger, type AppLogger } from '../../src/core/logger.ts';
import { loadAppKey, appKeyPath } from './app-key.ts';
import { loadPanelConfig } from './config.ts';
import type { PanelContext } from './context.ts';
import { createMailer } from './mailer.ts';
import { createActivityLog } from './services/activity.ts';
import { createPermissionRegistry } from './services/permissions.ts';
import { allocationSpellingTwins } from './store/migrations.ts';
import { openPanelStore, type PanelStore } from './store/store.ts';
import type { RunningAddon } from './addons/addon.ts';
import { ADDONS } from './addons/index.ts';
import { makeDirs } from '../../src/lib/make-dirs.ts';
import { acquireLock, lockPathFor, logTakeover, type InstanceLock } from '../../src/lib/instance-lock.ts';
import { accessSync, chownSync, constants, existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { DATABASE_FILE } from './store/store.ts';

export interface OpenPanel {
  ctx: PanelContext;
  /** The attached addons (their routes go into the app; serve starts and stops them). */
  addons: RunningAddon[];
  logger: AppLogger;
  warnings: string[];
  /** True when this open generated the app key (first start). */
  appKeyCreated: boolean;
  /** Closes the store and releases the serve lock; the logger stays open (serve's shutdown closes it last). */
  release(): void;
  /** release(), then closes the logger. */
  close(): Promise<void>;
}

/**
 * One value some row holds encrypted with the app key (a node's pairing token, an enabled TOTP
 * secret), or undefined when none is stored yet.
 */
async function sampleSecret(store: PanelStore): Promise<string | undefined> {
  const node = (await store.nodes.list({ perPage: 1 })).items[0];
  return node?.token_encrypted ?? (await store.users.findBy({ use_totp: 1 }))?.totp_secret ?? undefined;
}

/**
 * Files root makes in a data_dir that belongs to the panel's user (a CLI command run as root
 * before the first start: the install steps' `user create`) are handed to that user, or the
 * service could not write its own database or read its key.
 */
function handOver(dataDir: string, files: string[]): void {
  if (process.getuid?.() !== 0) return;
  const owner = statSync(dataDir);
  if (owner.uid === 0) return;
  for (const f of files) {
    try {
      const st = statSync(f);
      if (st.uid === 0) chownSync(f, owner.uid, owner.gid);
    } catch {
      // not there (the WAL files come and go)
    }
  }
}

/** `serve` refuses a database or key it could not write or read, naming the file and its owner, instead of failing at the first write. */
function checkAccess(files: { path: string; mode: number }[]): void {
  for (const { path, mode } of files) {
    if (!existsSync(path)) continue;
    try {
      accessSync(path, mode);
    } catch {
      const st = statSync(path);
      throw new AppError(
        'ERR_DATA_ACCESS',
        `${path} cannot be ${mode === constants.R_OK ? 'read' : 'written'} by this user (uid ${String(process.getuid?.())}): it belongs to uid ${st.uid} with mode ${(st.mode & 0o777).toString(8)}; give it to the panel's user (chown) or run the panel as its owner`,
      );
    }
  }
}

/** `quiet` turns console logging off (CLI commands print their own lines); `serve` makes the open hold the single-instance lock and check file access. */
export async function openPanel(configPath: string, opts: { quiet?: boolean; serve?: boolean } = {}): Promise<OpenPanel> {
  const { config, warnings } = loadPanelConfig(configPath);
  const logger = createLogger({ name: 'panel', ...config.logging, ...(opts.quiet === true ? { console: false } : {}), redactKeys: ['password', 'token', 'totp_secret', 'secret_token', 'pairing_token'] });
  makeDirs(config.data_dir, 0o750);
  const dbFile = join(config.data_dir, DATABASE_FILE);
  const keyFile = appKeyPath(config.data_dir, config.app_key_file);
  let lock: InstanceLock | undefined;
  if (opts.serve === true) {
    // Two panels on one database would both run the purge, the health snapshots and the bulk queue.
    lock = acquireLock(lockPathFor(dbFile), 'panel');
    logTakeover(lock, logger);
    try {
      checkAccess([dbFile, `${dbFile}-wal`, `${dbFile}-shm`].map((path) => ({ path, mode: constants.R_OK | constants.W_OK })).concat([{ path: keyFile, mode: constants.R_OK }]));
    } catch (err) {
      lock.release();
      throw err;
    }
  }
  let store: PanelStore;
  try {
    store = openPanelStore(config.data_dir, ADDONS.flatMap((a) => a.migrations));
    // An upgrade's one-way step: the log says when it happened, for the operator who goes back.
    if (store.sqlite.applied.length > 0) logger.info({ file: dbFile, versions: store.sqlite.applied }, 'applied database migrations');
    if (opts.serve === true) {
      for (const twin of allocationSpellingTwins(store.sqlite.db)) {
        logger.warn(twin, 'two servers hold one endpoint stored in two spellings (left by migration 3): move one of them to another allocation');
      }
    }
  } catch (err) {
    lock?.release();
    throw err;
  }
  let loaded: ReturnType<typeof loadAppKey>;
  try {
    const sealed = await sampleSecret(store);
    loaded = loadAppKey(keyFile, sealed === undefined);
    // A key from another install (or a restore that mixed files up) is refused here rather than
    // at the first 2FA login or node push.
    if (sealed !== undefined && !loaded.key.opens(sealed)) throw new AppError('ERR_APP_KEY', `${keyFile} is not the key this database's secrets were encrypted with (pairing tokens, 2FA secrets): restore the matching key file from a backup`);
  } catch (err) {
    store.close();
    lock?.release();
    throw err;
  }
  handOver(config.data_dir, [dbFile, `${dbFile}-wal`, `${dbFile}-shm`, keyFile]);
  const { key, created } = loaded;
  const activity = createActivityLog(store, (err) => logger.error({ err }, 'could not write an activity log entry'));
  const ctx: PanelContext = { config, store, appKey: key, logger, activity, mailer: createMailer(config.mail), hooks: { serverSuspension: [], serverCreated: [], serverDeleted: [] }, permissions: createPermissionRegistry() };
  const addons = ADDONS.map((a) => a.attach(ctx, store));
  const release = (): void => {
    store.close();
    lock?.release();
  };
  return {
    ctx,
    addons,
    logger,
    warnings,
    appKeyCreated: created,
    release,
    async close() {
      release();
      await logger.close();
    },
  };
}

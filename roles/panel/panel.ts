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
import { openPanelStore, type PanelStore } from './store/store.ts';
import type { RunningAddon } from './addons/addon.ts';
import { ADDONS } from './addons/index.ts';
import { makeDirs } from '../../src/lib/make-dirs.ts';

export interface OpenPanel {
  ctx: PanelContext;
  /** The attached addons (their routes go into the app; serve starts and stops them). */
  addons: RunningAddon[];
  logger: AppLogger;
  warnings: string[];
  /** True when this open generated the app key (first start). */
  appKeyCreated: boolean;
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

/** `quiet` turns console logging off (CLI commands print their own lines). */
export async function openPanel(configPath: string, opts: { quiet?: boolean } = {}): Promise<OpenPanel> {
  const { config, warnings } = loadPanelConfig(configPath);
  const logger = createLogger({ name: 'panel', ...config.logging, ...(opts.quiet === true ? { console: false } : {}), redactKeys: ['password', 'token', 'totp_secret', 'secret_token', 'pairing_token'] });
  makeDirs(config.data_dir, 0o750);
  const store = openPanelStore(config.data_dir, ADDONS.flatMap((a) => a.migrations));
  let loaded: ReturnType<typeof loadAppKey>;
  try {
    const keyFile = appKeyPath(config.data_dir, config.app_key_file);
    const sealed = await sampleSecret(store);
    loaded = loadAppKey(keyFile, sealed === undefined);
    // A key from another install (or a restore that mixed files up) is refused here rather than
    // at the first 2FA login or node push.
    if (sealed !== undefined && !loaded.key.opens(sealed)) throw new AppError('ERR_APP_KEY', `${keyFile} is not the key this database's secrets were encrypted with (pairing tokens, 2FA secrets): restore the matching key file from a backup`);
  } catch (err) {
    store.close();
    throw err;
  }
  const { key, created } = loaded;
  const activity = createActivityLog(store, (err) => logger.error({ err }, 'could not write an activity log entry'));
  const ctx: PanelContext = { config, store, appKey: key, logger, activity, mailer: createMailer(config.mail), hooks: { serverSuspension: [], serverCreated: [], serverDeleted: [] }, permissions: createPermissionRegistry() };
  const addons = ADDONS.map((a) => a.attach(ctx, store));
  return {
    ctx,
    addons,
    logger,
    warnings,
    appKeyCreated: created,
    async close() {
      store.close();
      await logger.close();
    },
  };
}

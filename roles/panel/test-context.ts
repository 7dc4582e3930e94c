/**
 * A PanelContext over an in-memory store, for unit tests of services and routes (never used by
 * the running panel). Mail goes to an array instead of SMTP.
 */
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import type { PanelConfig } from '../../src/contracts/types.ts';
import { createAppKey } from './app-key.ts';
import type { PanelContext } from './context.ts';
import type { Mail } from './mailer.ts';
import { createActivityLog } from './services/activity.ts';
import { createPermissionRegistry } from './services/permissions.ts';
import { openPanelStore } from './store/store.ts';

/** A fresh context; `sent` collects mails; close the store when done. */
export function createTestContext(config: Partial<PanelConfig> = {}): PanelContext & { sent: Mail[] } {
  const store = openPanelStore(':memory:');
  const sent: Mail[] = [];
  const full = {
    listen: '127.0.0.1:8080',
    base_url: 'http://127.0.0.1:8080',
    data_dir: ':memory:',
    database: { driver: 'sqlite' },
    mail: { host: '127.0.0.1', port: 25, secure: false, username: '', password: '', from: 'hostkit@localhost' },
    app_key_file: 'app.key',
    volumes_dir: '/nonexistent',
    trusted_proxies: [],
    logging: { level: 'info', console: false, file: '', format: 'json' },
    ...config,
  } as PanelConfig;
  return {
    config: full,
    store,
    appKey: createAppKey(randomBytes(32)),
    logger: pino({ level: 'silent' }),
    activity: createActivityLog(store, (err) => {
      throw err;
    }),
    mailer: {
      send(mail) {
        sent.push(mail);
        return Promise.resolve();
      },
    },
    hooks: { serverSuspension: [], serverCreated: [], serverDeleted: [] },
    permissions: createPermissionRegistry(),
    sent,
  };
}

/**
 * A PanelContext over an in-memory store, for unit tests of services and routes (never used by
 * the running panel). Mail goes to an array instead of SMTP.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import pino from 'pino';
import type { PanelConfig } from '../../src/contracts/types.ts';
import { createAppKey } from './app-key.ts';
import type { PanelContext } from './context.ts';
import type { Mail } from './mailer.ts';
import { createActivityLog } from './services/activity.ts';
import { createPermissionRegistry } from './services/permissions.ts';
import type { NodeRow, ServerRow, UserRow } from './store/records.ts';
import { openPanelStore, type PanelStore } from './store/store.ts';

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

/** A user, a location, a node, a nest and an egg in `store`, and one server of the user on the node. */
export async function insertServerFixture(store: PanelStore): Promise<{ user: UserRow; node: NodeRow; server: ServerRow }> {
  const at = new Date().toISOString();
  const user = await store.users.insert({ uuid: randomUUID(), username: 'u', email: 'u@x', password: 'x', created_at: at, updated_at: at });
  const loc = await store.locations.insert({ short: 'l', created_at: at, updated_at: at });
  const node = await store.nodes.insert({ uuid: randomUUID(), name: 'n', location_id: loc.id, fqdn: 'x', token_id: 'x', token_hash: 'x', token_encrypted: 'x', created_at: at, updated_at: at });
  const nest = await store.nests.insert({ uuid: randomUUID(), name: 'ne', created_at: at, updated_at: at });
  const egg = await store.eggs.insert({ uuid: randomUUID(), nest_id: nest.id, name: 'e', docker_image: 'i', startup: 's', created_at: at, updated_at: at });
  const server = await store.createServer({
    uuid: randomUUID(), identifier: 'abcd1234', name: 's', description: '', owner_id: user.id, node_id: node.id, allocation_id: null, nest_id: nest.id, egg_id: egg.id,
    memory: 0, swap: 0, disk: 0, io: 500, cpu: 0, threads: null, oom_disabled: 1, databases: 0, allocations: 0, backups: 0, startup: '', image: '', suspended: 0, created_at: at, updated_at: at,
  });
  return { user, node, server };
}

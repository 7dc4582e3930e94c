/**
 * The operations suite addon (spec/2, operations parts), built on the panel's own records: settings,
 * tags (with the client API's read-only view), the naming pattern, templates with revisions,
 * multi-create, the allocation picker, search, the activity feed and audit log, bulk operations on
 * the in-process `ops` queue, and node health from allocation and memory records. The panel has no
 * server daemon, so power and reinstall items fail and nothing that needs CPU, memory or disk usage
 * (server health, analytics, upgrade recommendations) is built. Attached to every panel process;
 * only `panel serve` starts the health snapshots and resumes unfinished bulk jobs.
 */
import type { FastifyInstance } from 'fastify';
import { isAppError } from '../../../../src/core/app-error.ts';
import type { PanelContext } from '../../context.ts';
import { problemsOf } from '../../services/validation.ts';
import type { PanelStore } from '../../store/store.ts';
import { registerNavEntry, registerWebExtension, requireAdmin } from '../../web/index.ts';
import type { PanelAddon, RunningAddon } from '../addon.ts';
import { registerOpsAdmin } from './admin.ts';
import { registerOpsApplicationApi } from './app-api.ts';
import { createBulkRunner } from './bulk.ts';
import { createHandlers } from './handlers.ts';
import { OPS_MIGRATIONS } from './migrations.ts';
import { createOpsService, tagAttributes } from './service.ts';
import { createOpsStore } from './store.ts';

function attach(ctx: PanelContext, panelStore: PanelStore): RunningAddon {
  const store = createOpsStore(panelStore.sqlite);
  const service = createOpsService(ctx, store);
  const bulk = createBulkRunner(ctx, service);
  const handlers = createHandlers(service, bulk);

  // `ops_tag_ids` on any server create (admin, application API, multi-create) is checked before
  // the server is written; after it, the server gets those tags, or the default tags without it.
  (ctx.hooks.serverInput ??= []).push(async (input) => {
    if (input.ops_tag_ids === undefined) return [];
    try {
      await service.checkTagIds(input.ops_tag_ids, 'ops_tag_ids');
      return [];
    } catch (err) {
      if (!isAppError(err, 'ERR_VALIDATION')) throw err;
      return problemsOf(err);
    }
  });
  ctx.hooks.serverCreated.push(async (server, input) => {
    const ids = Array.isArray(input.ops_tag_ids) ? (input.ops_tag_ids as number[]) : (await store.tags()).filter((t) => t.is_default === 1).map((t) => t.id);
    if (ids.length > 0) await store.setServerTags(server.id, ids);
  });

  registerNavEntry({ section: 'Service Management', label: 'Operations', href: '/admin/ops', order: 260 });
  registerWebExtension('ops', async (web) => {
    await web.register(async (admin) => {
      admin.addHook('preHandler', requireAdmin(ctx));
      registerOpsAdmin(admin, ctx, service, bulk, handlers);
    });
  });

  return {
    async routes(app: FastifyInstance) {
      await app.register(async (api) => registerOpsApplicationApi(api, ctx, service, handlers), { prefix: '/api/application/ops' });
    },
    clientRoutes(api, kit) {
      api.get('/servers/:server/tags', async (req) => {
        const access = await kit.access(req);
        if ((await service.settings()).tags_visible_to_users !== true) return { visible: false, tags: [] };
        return { visible: true, tags: (await store.tagsOfServers([access.server.id])).map(tagAttributes) };
      });
    },
    start() {
      service.start();
      bulk.resume().catch((err: unknown) => ctx.logger.error({ err }, 'could not resume the unfinished bulk jobs'));
    },
    async stop() {
      await bulk.stop();
      await service.stop();
    },
  };
}

export const opsAddon: PanelAddon = { name: 'ops', migrations: OPS_MIGRATIONS, attach };

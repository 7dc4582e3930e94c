/**
 * The trash bin addon (spec/2, trash bin parts): file deletes through the client API move into
 * `/.trash/{id}` of the server's volume, with restore, delete from the trash, empty, quotas
 * (server, egg, global) and an hourly retention purge; the `trashbin.access` subuser permission;
 * the admin settings page. Attached to every panel process; only `panel serve` starts the purge.
 */
import type { PanelContext } from '../../context.ts';
import type { PanelStore } from '../../store/store.ts';
import { registerNavEntry, registerWebExtension, requireAdmin } from '../../web/index.ts';
import type { PanelAddon, RunningAddon } from '../addon.ts';
import { registerTrashAdminPages } from './admin-pages.ts';
import { attachFileHooks, registerTrashClientRoutes, TRASH_PERMISSION } from './client-api.ts';
import { TRASHBIN_MIGRATIONS } from './migrations.ts';
import { createTrashService } from './service.ts';
import { createTrashStore } from './store.ts';

function attach(ctx: PanelContext, panelStore: PanelStore): RunningAddon {
  const store = createTrashStore(panelStore.sqlite);
  const service = createTrashService(ctx, store);
  ctx.permissions.add(TRASH_PERMISSION);
  attachFileHooks(ctx, service);
  registerNavEntry({ section: 'Service Management', label: 'Trash Bin', href: '/admin/trashbin', order: 250 });
  registerWebExtension('trashbin', async (web) => {
    await web.register(async (admin) => {
      admin.addHook('preHandler', requireAdmin(ctx));
      registerTrashAdminPages(admin, ctx, store, service);
    });
  });
  return {
    clientRoutes: (api, kit) => registerTrashClientRoutes(api, kit, service),
    start: () => service.start(),
    stop: () => service.stop(),
  };
}

export const trashbinAddon: PanelAddon = { name: 'trashbin', migrations: TRASHBIN_MIGRATIONS, attach };

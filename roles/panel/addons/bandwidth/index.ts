/**
 * The bandwidth addon (spec/1, panel side): the node-facing API agents call, limits settings and
 * per-server overrides pushed to the nodes, stats polling into usage rollups, quota suspensions,
 * and the admin pages and JSON. Attached to every panel process; only `panel serve` starts its
 * background work.
 */
import type { FastifyInstance } from 'fastify';
import { webAsset } from '../../../../src/lib/web-assets.ts';
import type { PanelContext } from '../../context.ts';
import type { PanelStore } from '../../store/store.ts';
import { csrfToken, registerNavEntry, registerServerSection, registerWebExtension, requireAdmin } from '../../web/index.ts';
import type { PanelAddon, RunningAddon } from '../addon.ts';
import { registerAdminJson } from './admin-json.ts';
import { limitsCard, overrideForm, registerAdminPages } from './admin-pages.ts';
import { DASHBOARD_SCRIPT } from './dashboard-script.ts';
import { BANDWIDTH_MIGRATIONS } from './migrations.ts';
import { registerNodeApi } from './node-api.ts';
import { bandwidthInputProblems, createBandwidthService } from './service.ts';
import { createBandwidthStore } from './store.ts';

function attach(ctx: PanelContext, panelStore: PanelStore): RunningAddon {
  const store = createBandwidthStore(panelStore.sqlite);
  const service = createBandwidthService(ctx, store);
  ctx.hooks.serverSuspension.push(async (server, suspended) => {
    if (!suspended) await service.undoQuotaRename(server);
  });
  // A server given `bandwidth: {...}` at creation gets its own limits; one without follows the
  // defaults. The object is checked before the server is written, so a bad one creates nothing.
  (ctx.hooks.serverInput ??= []).push((input) => bandwidthInputProblems(input.bandwidth));
  ctx.hooks.serverCreated.push(async (server, input) => {
    const bandwidth = input.bandwidth;
    // One new config_version for the new server: an override saved with it already bumped it.
    const saved = typeof bandwidth === 'object' && bandwidth !== null ? await service.saveOverride(server.id, bandwidth) : undefined;
    if (saved === undefined) await service.serversChanged(server.node_id);
  });
  ctx.hooks.serverDeleted.push((server) => service.serversChanged(server.node_id));
  // This addon keeps the agents' registrations and pushes their limits: other addons reach
  // nodes and change limits entries through it.
  (ctx.hooks.onlineNodeAgent ??= []).push((nodeId) => service.onlineAgent(nodeId));
  (ctx.hooks.limitsChanged ??= []).push((nodeId) => service.serversChanged(nodeId));

  registerNavEntry({ section: 'Bandwidth', label: 'Dashboard', href: '/admin/bandwidth', order: 300 });
  registerNavEntry({ section: 'Bandwidth', label: 'Nodes', href: '/admin/bandwidth/nodes', order: 310 });
  registerNavEntry({ section: 'Bandwidth', label: 'Events', href: '/admin/bandwidth/events', order: 320 });
  registerNavEntry({ section: 'Bandwidth', label: 'Settings', href: '/admin/bandwidth/settings', order: 330 });
  registerServerSection('bandwidth', async (server, req, reply) => {
    const override = await store.override(server.id);
    return limitsCard(server, override, overrideForm(override, (await store.settings()).settings), csrfToken(req, reply));
  });
  registerWebExtension('bandwidth', async (web) => {
    await web.register(async (admin) => {
      admin.addHook('preHandler', requireAdmin(ctx));
      registerAdminJson(admin, ctx, store, service);
      registerAdminPages(admin, ctx, store, service);
    });
  });

  return {
    async routes(app: FastifyInstance) {
      await app.register(async (api) => registerNodeApi(api, ctx, store, service), { prefix: '/api/bandwidth/node' });
      const asset = (path: string, type: string, body: () => string): void => {
        app.get(path, (_req, reply) => reply.type(type).header('cache-control', 'public, max-age=86400').send(body()));
      };
      asset('/assets/uplot.js', 'text/javascript; charset=utf-8', () => webAsset('uplot.js'));
      asset('/assets/uplot.css', 'text/css; charset=utf-8', () => webAsset('uplot.css'));
      asset('/assets/bandwidth.js', 'text/javascript; charset=utf-8', () => DASHBOARD_SCRIPT);
    },
    start: () => service.start(),
    stop: () => service.stop(),
  };
}

export const bandwidthAddon: PanelAddon = { name: 'bandwidth', migrations: BANDWIDTH_MIGRATIONS, attach };

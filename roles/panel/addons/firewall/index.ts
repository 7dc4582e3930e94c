/**
 * The firewall alerts addon (spec/3 §2.10, §3, §4.3, §6.3, panel side): SMART mode per server
 * (granted by an admin, enabled by the owner, sent to the node in its limits entry), the pull of
 * the nodes' SMART attack events into records with acknowledgement, the "Under mitigation" badge,
 * the offline incidents of nodes, and the alerts to the admin chat webhook, the owner's webhook
 * and the owner's e-mail through a persisted outbox; the admin Firewall pages and the client API.
 * Attached to every panel process; only `panel serve` starts the pull, the incident check and
 * the delivery.
 */
import type { PanelContext } from '../../context.ts';
import type { PanelStore } from '../../store/store.ts';
import { registerNavEntry, registerServerListBadges, registerServerSection, registerWebExtension, requireAdmin } from '../../web/index.ts';
import type { PanelAddon, RunningAddon } from '../addon.ts';
import { EVENTS_PAGE, mitigationBadge, registerFirewallAdminPages, SETTINGS_PAGE, smartSection } from './admin-pages.ts';
import { PERMISSIONS, registerFirewallClientRoutes } from './client-api.ts';
import { FIREWALL_MIGRATIONS } from './migrations.ts';
import { createFirewallService } from './service.ts';
import { createFirewallStore } from './store.ts';

function attach(ctx: PanelContext, panelStore: PanelStore): RunningAddon {
  const store = createFirewallStore(panelStore.sqlite);
  const service = createFirewallService(ctx, store);
  for (const p of Object.values(PERMISSIONS)) ctx.permissions.add(p);
  (ctx.hooks.limitsEntries ??= []).push((servers) => service.limitsEntries(servers));
  (ctx.hooks.nodeStatus ??= []).push((node, online, reason) => service.nodeStatus(node, online, reason));

  registerNavEntry({ section: 'Firewall', label: 'Events', href: EVENTS_PAGE, order: 400 });
  registerNavEntry({ section: 'Firewall', label: 'Settings', href: SETTINGS_PAGE, order: 410 });
  registerServerSection('firewall', (server, req, reply) => smartSection(server, req, reply, ctx, store, service));
  registerServerListBadges('firewall', async (servers) => {
    const active = await store.mitigations(servers.map((s) => s.id));
    return new Map([...active].map(([id, m]) => [id, mitigationBadge({ mitigation: { cap_mbps: m.cap_mbps, since: m.since } })]));
  });
  registerWebExtension('firewall', async (web) => {
    await web.register(async (admin) => {
      admin.addHook('preHandler', requireAdmin(ctx));
      registerFirewallAdminPages(admin, ctx, store, service);
    });
  });

  return {
    clientRoutes: (api, kit) => registerFirewallClientRoutes(api, kit, ctx, store, service),
    start: () => service.start(),
    stop: () => service.stop(),
  };
}

export const firewallAddon: PanelAddon = { name: 'firewall', migrations: FIREWALL_MIGRATIONS, attach };

/**
 * SMART mode in the client API (spec/3 §4.3), inside the client API scope behind its key
 * authentication and the core's server checks (404 without access, 409 suspended, 403 without the
 * permission): the server's SMART state with its attack events, newest first and paged; enabling
 * it (once an admin granted it); the owner webhook (once granted and enabled); acknowledging an
 * event of the server. Errors are the panel's `errors[]`; bad input is 422 naming the field.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { redactUrl } from '../../../../src/lib/webhook-url.ts';
import { item, list } from '../../http/api-format.ts';
import { apiActor, apiUser, idParam, pageQuery } from '../../http/api-auth.ts';
import type { ClientApiKit } from '../../http/client-api.ts';
import type { PanelContext } from '../../context.ts';
import type { ServerRow } from '../../store/records.ts';
import { createValidator } from '../../services/validation.ts';
import { mitigationText, peakText, baselineText, trafficText, TYPE_WORDS } from './notices.ts';
import type { FirewallService, SmartState } from './service.ts';
import { WEBHOOK_STYLES, type WebhookStyle } from './settings.ts';
import type { EventRow, FirewallStore } from './store.ts';

export const PERMISSIONS = { read: 'firewall.smart.read', update: 'firewall.smart.update', ack: 'firewall.smart.ack' } as const;

const validateEnable = createValidator<{ enabled: boolean }>({ required: ['enabled'], properties: { enabled: { type: 'boolean' } } });
const validateWebhook = createValidator<{ webhook_url: string | null; style?: WebhookStyle }>({
  required: ['webhook_url'],
  properties: { webhook_url: { type: ['string', 'null'] }, style: { enum: WEBHOOK_STYLES } },
});

/** The API attributes of an attack event: the contract's figures, and the same in words. */
export function eventAttributes(e: EventRow, acknowledgedBy: string | null): Record<string, unknown> {
  const metrics = { pps: e.pps, bps: e.bps, peak_pps: e.peak_pps, peak_bps: e.peak_bps, baseline_pps: e.baseline_pps, baseline_bps: e.baseline_bps, ratio: e.ratio };
  const mitigation = { action: e.action, cap_mbps: e.cap_mbps };
  return {
    id: e.id,
    type: e.type,
    summary: TYPE_WORDS[e.type],
    level: e.level,
    occurred_at: e.occurred_at,
    started_at: e.started_at,
    ended_at: e.ended_at,
    metrics,
    traffic: trafficText(metrics),
    peak: peakText(metrics),
    baseline: baselineText(metrics),
    mitigation,
    mitigation_text: mitigationText(mitigation),
    message: e.message,
    acknowledged: e.acknowledged_at !== null,
    acknowledged_at: e.acknowledged_at,
    acknowledged_by: acknowledgedBy,
  };
}

/** The usernames of the users who acknowledged `rows`, by user id. */
export async function acknowledgers(ctx: PanelContext, rows: readonly EventRow[]): Promise<Map<number, string>> {
  const ids = [...new Set(rows.flatMap((r) => (r.acknowledged_by === null ? [] : [r.acknowledged_by])))];
  const users = await Promise.all(ids.map((id) => ctx.store.users.find(id)));
  return new Map(users.flatMap((u) => (u === undefined ? [] : [[u.id, u.username] as const])));
}

/** The API attributes of a server's SMART state; the webhook URL only masked. */
export function stateAttributes(s: SmartState): Record<string, unknown> {
  return {
    granted: s.granted,
    enabled: s.enabled,
    active: s.active,
    webhook: { set: s.webhook_url !== '', url: s.webhook_url === '' ? null : redactUrl(s.webhook_url), style: s.webhook_style },
    under_mitigation: s.under_mitigation,
    mitigation: s.mitigation,
  };
}

/** Registers the routes on the client API scope; runs once at app build. */
export function registerFirewallClientRoutes(api: FastifyInstance, kit: ClientApiKit, ctx: PanelContext, store: FirewallStore, service: FirewallService): void {
  const base = '/servers/:server/v1/firewall/smart';
  const usernames = (rows: readonly EventRow[]): Promise<Map<number, string>> => acknowledgers(ctx, rows);
  const log = (req: FastifyRequest, event: string, server: ServerRow, properties: Record<string, unknown>): Promise<void> =>
    ctx.activity.log({ event, actor: apiActor(req), subject: { type: 'server', id: server.id }, properties, ip: req.ip });
  const stateItem = (state: SmartState): ReturnType<typeof item> => item('firewall_smart', stateAttributes(state));

  api.get(base, async (req) => {
    const { server } = await kit.access(req, PERMISSIONS.read);
    const q = pageQuery(req.query);
    const page = await store.events({ serverId: server.id, page: q.page, perPage: Math.max(1, q.perPage) });
    const names = await usernames(page.items);
    const events = list('firewall_attack_event', page, (e) => eventAttributes(e, e.acknowledged_by === null ? null : (names.get(e.acknowledged_by) ?? null)));
    return item('firewall_smart', { ...stateAttributes(await service.smartState(server)), relationships: { events } });
  });

  api.put(base, async (req) => {
    const { server } = await kit.access(req, PERMISSIONS.update);
    const { enabled } = validateEnable(req.body);
    const state = await service.setEnabled(server, enabled);
    await log(req, `server:firewall.smart.${enabled ? 'enable' : 'disable'}`, server, {});
    return stateItem(state);
  });

  api.put(`${base}/webhook`, async (req) => {
    const { server } = await kit.access(req, PERMISSIONS.update);
    const v = validateWebhook(req.body);
    const state = await service.setWebhook(server, v.webhook_url, v.style);
    await log(req, 'server:firewall.smart.webhook', server, { set: state.webhook_url !== '', url: state.webhook_url === '' ? null : redactUrl(state.webhook_url), style: state.webhook_style });
    return stateItem(state);
  });

  api.post(`${base}/events/:id/ack`, async (req) => {
    const { server } = await kit.access(req, PERMISSIONS.ack);
    const id = idParam((req.params as Record<string, string | undefined>).id, 'attack event');
    const before = await store.event(id);
    const event = await service.acknowledge(id, server.id, apiUser(req).id);
    if (before?.acknowledged_at === null) await log(req, 'server:firewall.event.ack', server, { event: id });
    const names = await usernames([event]);
    return item('firewall_attack_event', eventAttributes(event, event.acknowledged_by === null ? null : (names.get(event.acknowledged_by) ?? null)));
  });
}

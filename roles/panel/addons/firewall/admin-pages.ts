/**
 * The firewall alerts' admin pages, in the admin web scope (session, 2FA, admin check, CSRF): the
 * settings form (spec/3 §2.10), the attack events list (newest first, filtered by server and by
 * unacknowledged, acknowledge, pull now), the grant and revoke of SMART mode from the server
 * page's SMART section, and that section itself.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { redactUrl } from '../../../../src/lib/webhook-url.ts';
import type { PanelContext } from '../../context.ts';
import { found } from '../../services/records.ts';
import { validationError } from '../../services/validation.ts';
import type { ServerRow } from '../../store/records.ts';
import {
  adminAudit,
  checkboxField,
  csrfToken,
  currentSession,
  failedForm,
  formBody,
  formOf,
  formSummary,
  html,
  idParam,
  inputField,
  inputOf,
  pageParam,
  pager,
  postForm,
  actionButton,
  rowsOrNone,
  selectField,
  seeOther,
  sendPage,
  setFlash,
  type FormState,
  type SafeHtml,
} from '../../web/index.ts';
import { acknowledgers } from './client-api.ts';
import { mitigationText, trafficText, TYPE_WORDS } from './notices.ts';
import type { FirewallService, SmartState } from './service.ts';
import { SETTINGS_SCHEMA, type FirewallSettings } from './settings.ts';
import type { EventRow, FirewallStore } from './store.ts';

export const SETTINGS_PAGE = '/admin/firewall/settings';
export const EVENTS_PAGE = '/admin/firewall/events';
const PER_PAGE = 50;
const SECTION_EVENTS = 10;
const STYLE_OPTIONS = [
  { value: 'chat_a', label: 'Embeds (chat_a: Discord-style)' },
  { value: 'chat_b', label: 'Blocks (chat_b: Slack-style)' },
];

/** A level as a badge: grey for level 1, red from level 2. */
export function levelBadge(level: number): SafeHtml {
  return html`<span class="${level >= 2 ? 'badge red' : 'badge'}">Level ${level}</span>`;
}

/** The "Under mitigation" badge of a server whose latest incident has a mitigation in force. */
export function mitigationBadge(state: Pick<SmartState, 'mitigation'>): SafeHtml {
  const cap = state.mitigation?.cap_mbps;
  return html`<span class="badge red" title="${cap === null || cap === undefined ? 'inbound traffic is being mitigated' : `inbound traffic capped at ${cap} Mbit/s`}">Under mitigation</span>`;
}

function settingsForm(s: FirewallSettings): FormState {
  return formOf({
    webhook_style: s.webhook_style,
    node_offline_webhook_max: s.node_offline_webhook_max,
    node_stable_seconds: s.node_stable_seconds,
    smart_owner_email_enabled: s.smart_owner_email_enabled ? 'on' : '',
  });
}

const range = (k: 'node_offline_webhook_max' | 'node_stable_seconds'): string => `${SETTINGS_SCHEMA[k].minimum.toLocaleString('en')} to ${SETTINGS_SCHEMA[k].maximum.toLocaleString('en')}`;

/** One row of an events table; `servers` names the servers, `names` the acknowledging users. */
function eventRow(e: EventRow, server: string | undefined, node: string | undefined, ackBy: string | undefined, csrf: string, back: string): SafeHtml {
  const metrics = { pps: e.pps, bps: e.bps, peak_pps: e.peak_pps, peak_bps: e.peak_bps, baseline_pps: e.baseline_pps, baseline_bps: e.baseline_bps, ratio: e.ratio };
  const acked =
    e.acknowledged_at === null
      ? postForm(`${EVENTS_PAGE}/${e.id}/ack`, csrf, html`<input type="hidden" name="back" value="${back}"><button type="submit" class="secondary">Acknowledge</button>`)
      : html`by ${ackBy ?? 'a deleted user'} at ${e.acknowledged_at}`;
  return html`<tr id="event-${e.id}"><td>${e.occurred_at}</td><td>${server === undefined ? `#${e.server_id}` : html`<a href="/admin/servers/${e.server_id}">${server}</a>`}</td><td>${node ?? `#${e.node_id}`}</td><td>${TYPE_WORDS[e.type]}<div class="help">${e.message}</div></td><td>${levelBadge(e.level)}</td><td>${trafficText(metrics)}</td><td>${mitigationText({ action: e.action, cap_mbps: e.cap_mbps })}</td><td>${e.started_at}<br>${e.ended_at === null ? 'ongoing' : html`ended ${e.ended_at}`}</td><td>${acked}</td></tr>`;
}

const EVENT_HEAD = html`<thead><tr><th>When</th><th>Server</th><th>Node</th><th>What happened</th><th>Level</th><th>Traffic</th><th>Mitigation</th><th>Attack</th><th>Acknowledged</th></tr></thead>`;

/** The admin back-link an acknowledge returns to: only the events page or a server page, never elsewhere. */
function backOf(value: string | undefined): string {
  return value !== undefined && /^\/admin\/(firewall\/events|servers\/\d+)(\?[\w=&%.-]*)?$/.test(value) ? value : EVENTS_PAGE;
}

/** Registers the pages on an admin scope (requireAdmin in its preHandler); runs once at app build. */
export function registerFirewallAdminPages(admin: FastifyInstance, ctx: PanelContext, store: FirewallStore, service: FirewallService): void {
  const names = async (rows: readonly EventRow[]): Promise<{ servers: Map<number, string>; nodes: Map<number, string>; users: Map<number, string> }> => {
    const servers = await Promise.all([...new Set(rows.map((r) => r.server_id))].map((id) => ctx.store.servers.find(id)));
    const nodes = await ctx.store.nodes.all();
    return {
      servers: new Map(servers.flatMap((s) => (s === undefined ? [] : [[s.id, s.name] as const]))),
      nodes: new Map(nodes.map((n) => [n.id, n.name])),
      users: await acknowledgers(ctx, rows),
    };
  };

  const settingsPage = async (req: FastifyRequest, reply: FastifyReply, form?: FormState, status = 200): Promise<FastifyReply> => {
    const s = await service.settings();
    const f = form ?? settingsForm(s);
    const waiting = await store.outboxSize();
    return sendPage(req, reply, {
      title: 'Firewall settings',
      status,
      body: html`<h1>Firewall settings</h1><p>Where the firewall alerts go: node offline and online changes, mitigation failures and SMART attack events to the admin chat webhook; each server's attack alerts to its owner's webhook and, when switched on here, by e-mail.</p>
<div class="card"><p id="firewall-webhook-current">${s.webhook_url === '' ? 'No admin chat webhook is set: fleet alerts are not sent.' : html`Admin chat webhook: <code>${redactUrl(s.webhook_url)}</code>`} · ${waiting === 0 ? 'no alerts waiting' : `${waiting} alerts waiting for delivery`}</p>${formSummary(f)}${postForm(
        SETTINGS_PAGE,
        csrfToken(req, reply),
        html`${inputField(f, 'webhook_url', 'Admin chat webhook URL', { type: 'url', placeholder: s.webhook_url === '' ? 'https://…' : redactUrl(s.webhook_url), help: 'Blank keeps the current URL; an https URL replaces it.', blank: true })}${checkboxField(
          f,
          'clear_webhook',
          'Remove the admin chat webhook',
        )}<div class="grid">${selectField(f, 'webhook_style', 'Webhook style', STYLE_OPTIONS)}${inputField(f, 'node_offline_webhook_max', 'Offline alerts per incident of a flapping node', {
          type: 'number',
          help: range('node_offline_webhook_max'),
        })}${inputField(f, 'node_stable_seconds', 'Seconds a node must stay online before its return is announced', { type: 'number', help: range('node_stable_seconds') })}</div>${checkboxField(
          f,
          'smart_owner_email_enabled',
          'E-mail server owners about SMART attack events on their servers',
        )}<div class="actions"><button type="submit">Save settings</button></div>`,
      )}</div>`,
    });
  };

  admin.get(SETTINGS_PAGE, (req, reply) => settingsPage(req, reply));

  admin.post(SETTINGS_PAGE, async (req, reply) => {
    const values = formBody(req.body);
    try {
      const next = await service.saveSettings(inputOf(values, { text: ['webhook_url', 'webhook_style'], int: ['node_offline_webhook_max', 'node_stable_seconds'], bool: ['smart_owner_email_enabled', 'clear_webhook'] }));
      await adminAudit(ctx, req, 'admin:firewall.settings', undefined, { ...next, webhook_url: next.webhook_url === '' ? null : redactUrl(next.webhook_url) });
      setFlash(reply, 'success', 'Firewall settings saved.');
      return seeOther(reply, SETTINGS_PAGE);
    } catch (err) {
      const failed = failedForm(values, err);
      if (failed === undefined) throw err;
      return settingsPage(req, reply, failed.form, failed.status);
    }
  });

  admin.get(EVENTS_PAGE, async (req, reply) => {
    const query = req.query as Record<string, string | undefined>;
    const serverText = query.server ?? '';
    if (serverText !== '' && !/^[1-9]\d{0,15}$/.test(serverText)) throw validationError([{ field: 'server', rule: 'integer', detail: 'the server filter must be one of the listed servers' }]);
    const serverId = serverText === '' ? undefined : Number(serverText);
    const unacknowledged = query.unacknowledged === 'on' || query.unacknowledged === '1';
    const page = await store.events({ ...(serverId !== undefined ? { serverId } : {}), unacknowledged, page: pageParam(req), perPage: PER_PAGE });
    const n = await names(page.items);
    const choices = await Promise.all((await store.eventServers()).map((id) => ctx.store.servers.find(id)));
    const filter: Record<string, string> = { ...(serverId !== undefined ? { server: String(serverId) } : {}), ...(unacknowledged ? { unacknowledged: 'on' } : {}) };
    const back = `${EVENTS_PAGE}${Object.keys(filter).length === 0 ? '' : `?${new URLSearchParams(filter).toString()}`}`;
    const csrf = csrfToken(req, reply);
    const body = html`<h1>Firewall events</h1><p>SMART attack events pulled from the nodes every 2 minutes, newest first.</p>
<form method="get" action="${EVENTS_PAGE}" class="actions"><select name="server" aria-label="Server"><option value="">All servers</option>${choices.flatMap((s) =>
      s === undefined ? [] : [html`<option value="${s.id}"${s.id === serverId ? html` selected` : ''}>${s.name}</option>`],
    )}</select><label><input type="checkbox" name="unacknowledged"${unacknowledged ? html` checked` : ''}> Only unacknowledged</label><button type="submit" class="secondary">Show</button></form>
<div class="actions">${actionButton('/admin/firewall/sync', csrf, 'Pull events from the nodes now', 'secondary')}</div>
<table id="firewall-events">${EVENT_HEAD}<tbody>${rowsOrNone(
      page.items.map((e) => eventRow(e, n.servers.get(e.server_id), n.nodes.get(e.node_id), e.acknowledged_by === null ? undefined : n.users.get(e.acknowledged_by), csrf, back)),
      9,
      unacknowledged ? 'No unacknowledged attack events.' : 'No attack events.',
    )}</tbody></table>${pager(page, EVENTS_PAGE, filter)}`;
    return sendPage(req, reply, { title: 'Firewall events', body });
  });

  admin.post(`${EVENTS_PAGE}/:id/ack`, async (req, reply) => {
    const id = idParam(req, 'attack event');
    const before = await service.acknowledge(id, undefined, currentSession(req).user.id);
    await adminAudit(ctx, req, 'admin:firewall.event.ack', { type: 'server', id: before.server_id }, { event: id });
    setFlash(reply, 'success', 'The attack event is acknowledged.');
    return seeOther(reply, backOf(formBody(req.body).back));
  });

  admin.post('/admin/firewall/sync', async (req, reply) => {
    const added = await service.syncAll();
    await adminAudit(ctx, req, 'admin:firewall.sync', undefined, { events: added });
    setFlash(reply, 'success', added === 0 ? 'No new attack events on the nodes.' : `Pulled ${added} new attack ${added === 1 ? 'event' : 'events'}.`);
    return seeOther(reply, EVENTS_PAGE);
  });

  for (const [action, granted] of [
    ['grant', true],
    ['revoke', false],
  ] as const) {
    admin.post(`/admin/firewall/servers/:id/${action}`, async (req, reply) => {
      const server = found(await ctx.store.servers.find(idParam(req, 'server')), 'server');
      const changed = await service.setGranted(server, granted, currentSession(req).user.id);
      if (changed) await adminAudit(ctx, req, `admin:firewall.smart.${action}`, { type: 'server', id: server.id });
      setFlash(reply, 'success', granted ? 'SMART mode is granted: the owner can enable it.' : 'SMART mode is revoked: the node stops detecting attacks on this server.');
      return seeOther(reply, `/admin/servers/${server.id}`);
    });
  }
}

/** The SMART section of the admin server page: grant or revoke, the owner's choices, the latest events. */
export async function smartSection(server: ServerRow, req: FastifyRequest, reply: FastifyReply, ctx: PanelContext, store: FirewallStore, service: FirewallService): Promise<SafeHtml> {
  const state = await service.smartState(server);
  const page = await store.events({ serverId: server.id, page: 1, perPage: SECTION_EVENTS });
  const csrf = csrfToken(req, reply);
  const nodes = new Map((await ctx.store.nodes.all()).map((n) => [n.id, n.name]));
  const users = await acknowledgers(ctx, page.items);
  const grant = state.granted
    ? actionButton(`/admin/firewall/servers/${server.id}/revoke`, csrf, 'Revoke SMART mode', 'danger')
    : actionButton(`/admin/firewall/servers/${server.id}/grant`, csrf, 'Grant SMART mode');
  return html`<div class="card" id="firewall-smart"><h2>SMART attack detection ${state.under_mitigation ? mitigationBadge(state) : ''}</h2>
<p id="firewall-smart-state">${state.granted ? 'Granted by an administrator' : 'Not granted'} · ${state.enabled ? 'enabled by the owner' : 'not enabled by the owner'} · ${
    state.active ? 'the node detects and mitigates attacks on this server' : 'the node does not watch this server'
  }</p>
<p>Owner webhook: ${state.webhook_url === '' ? 'none' : html`<code>${redactUrl(state.webhook_url)}</code> (${state.webhook_style})`}</p>
<div class="actions">${grant}</div>
<h3>Latest attack events</h3><table id="firewall-server-events">${EVENT_HEAD}<tbody>${rowsOrNone(
    page.items.map((e) => eventRow(e, server.name, nodes.get(e.node_id), e.acknowledged_by === null ? undefined : users.get(e.acknowledged_by), csrf, `/admin/servers/${server.id}`)),
    9,
    'No attack events.',
  )}</tbody></table>${page.total > SECTION_EVENTS ? html`<p><a href="${EVENTS_PAGE}?server=${server.id}">All ${page.total} events of this server</a></p>` : ''}</div>`;
}

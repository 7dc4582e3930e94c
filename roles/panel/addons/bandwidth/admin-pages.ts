/**
 * The addon's admin pages: the dashboard (fleet In/Out chart over a chosen range, top
 * consumers), the nodes page (online state, version, last seen, live rates, counts, token reset),
 * the settings form with its ranges, the events list, and a server's usage against its quotas
 * with its override form and the unthrottle button.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { formatBytes, formatRate } from '../../../../src/lib/cli-format.ts';
import { errorMessage } from '../../../../src/core/app-error.ts';
import type { PanelContext } from '../../context.ts';
import { found } from '../../services/records.ts';
import type { ServerRow } from '../../store/records.ts';
import {
  confirmButton,
  adminAudit,
  checkboxField,
  csrfToken,
  failedForm,
  formBody,
  formOf,
  formSummary,
  html,
  idParam,
  inputField,
  inputOf,
  pageParam,
  postForm,
  selectField,
  sendPage,
  setFlash,
  seeOther,
  type FormState,
  type SafeHtml,
  rowsOrNone,
} from '../../web/index.ts';
import { nodeCards, topConsumers } from './admin-json.ts';
import { effectiveLimits } from './limits.ts';
import type { BandwidthService } from './service.ts';
import { EXCEED_ACTIONS, SETTING_SCHEMA, type BandwidthSettings } from './settings.ts';
import type { BandwidthStore, OverrideRow } from './store.ts';

const RANGES: readonly [number, string][] = [
  [24, 'last 24 hours'],
  [168, 'last 7 days'],
  [720, 'last 30 days'],
  [2160, 'last 90 days'],
];
const DIRECTIONS = ['rx', 'tx'] as const;
const PERIODS = ['day', 'week', 'month'] as const;
const LIMIT_FIELDS = ['rx_speed_mbps', 'tx_speed_mbps', 'rx_quota_day_gb', 'rx_quota_week_gb', 'rx_quota_month_gb', 'tx_quota_day_gb', 'tx_quota_week_gb', 'tx_quota_month_gb', 'throttle_rx_mbps', 'throttle_tx_mbps'] as const;
const SETTING_INTS = Object.entries(SETTING_SCHEMA).flatMap(([k, v]) => ('type' in v && v.type === 'integer' ? [k] : []));
const LABELS: Record<string, string> = {
  rx_speed_mbps: 'Download cap (RX, Mbit/s, 0 = none)',
  tx_speed_mbps: 'Upload cap (TX, Mbit/s, 0 = none)',
  rx_quota_day_gb: 'RX quota per day (GiB)',
  rx_quota_week_gb: 'RX quota per week (GiB)',
  rx_quota_month_gb: 'RX quota per month (GiB)',
  tx_quota_day_gb: 'TX quota per day (GiB)',
  tx_quota_week_gb: 'TX quota per week (GiB)',
  tx_quota_month_gb: 'TX quota per month (GiB)',
  throttle_rx_mbps: 'RX speed while throttled (Mbit/s)',
  throttle_tx_mbps: 'TX speed while throttled (Mbit/s)',
  exceed_action: 'When a quota is exceeded',
};
const ACTION_OPTIONS = EXCEED_ACTIONS.map((a) => ({ value: a, label: a === 'throttle' ? 'throttle to the throttle speeds' : a === 'suspend' ? 'suspend the server (then 1 Mbit/s)' : 'record an event only' }));

function scripts(): SafeHtml {
  return html`<link rel="stylesheet" href="/assets/uplot.css"><script src="/assets/uplot.js"></script><script src="/assets/bandwidth.js"></script>`;
}

function hoursParam(req: FastifyRequest): number {
  const h = Number((req.query as Record<string, string | undefined>).hours ?? '24');
  return RANGES.some(([v]) => v === h) ? h : 24;
}

function rangeForm(hours: number, action: string): SafeHtml {
  return html`<form method="get" action="${action}" class="actions"><select name="hours" aria-label="Range">${RANGES.map(
    ([v, label]) => html`<option value="${v}"${v === hours ? html` selected` : ''}>${label}</option>`,
  )}</select><button type="submit" class="secondary">Show</button></form>`;
}

/** The limits form of a server, filled with its effective values. */
export function overrideForm(o: OverrideRow | undefined, s: BandwidthSettings): FormState {
  const eff = effectiveLimits(s, o);
  return formOf({ ...eff, enabled: eff.enabled ? 'on' : '', use_override: o === undefined ? '' : 'on' });
}

/** The card with a server's bandwidth limits form; on the bandwidth server page and the core server page. */
export function limitsCard(server: ServerRow, override: OverrideRow | undefined, f: FormState, csrf: string): SafeHtml {
  return html`<div class="card" id="bandwidth-limits"><h2>Bandwidth limits</h2><p>${override === undefined ? 'This server follows the global defaults.' : 'This server has its own limits (no field falls back to the defaults).'} <a href="/admin/bandwidth/servers/${server.id}">Usage and events</a></p>${formSummary(f)}${postForm(
    `/admin/bandwidth/servers/${server.id}`,
    csrf,
    html`${checkboxField(f, 'use_override', 'Use limits of its own instead of the global defaults')}${checkboxField(f, 'enabled', 'Enforce limits (off: only measure)')}<div class="grid">${LIMIT_FIELDS.map((k) =>
      inputField(f, k, LABELS[k] ?? k, { type: 'number' }),
    )}${selectField(f, 'exceed_action', LABELS.exceed_action ?? '', ACTION_OPTIONS)}</div><div class="actions"><button type="submit">Save limits</button></div>`,
  )}</div>`;
}

/** Registers the pages on the admin scope; runs once at app build. */
export function registerAdminPages(admin: FastifyInstance, ctx: PanelContext, store: BandwidthStore, service: BandwidthService): void {
  admin.get('/admin/bandwidth', async (req, reply) => {
    const hours = hoursParam(req);
    const cards = await nodeCards(ctx, store);
    const top = await topConsumers(store, hours);
    const servers = await Promise.all(top.map((t) => ctx.store.servers.find(t.server_id)));
    const sum = (k: 'containers' | 'throttled' | 'quota_exceeded'): number => cards.reduce((a, c) => a + Number(c[k]), 0);
    return sendPage(req, reply, {
      title: 'Bandwidth',
      body: html`<h1>Bandwidth</h1>
        <div class="stats"><div class="stat"><b>${cards.filter((c) => c.online).length} / ${cards.length}</b>nodes online</div><div class="stat"><b>${sum('containers')}</b>running servers</div><div class="stat"><b>${sum('throttled')}</b>throttled</div><div class="stat"><b>${sum('quota_exceeded')}</b>over a quota</div></div>
        <div class="card"><h2>Fleet traffic</h2>${rangeForm(hours, '/admin/bandwidth')}<div id="bw-chart" data-hours="${hours}"></div><p class="help" id="bw-chart-summary"></p></div>
        <div class="card"><h2>Top consumers</h2>${
          top.length === 0
            ? html`<p>No traffic recorded in this range yet.</p>`
            : html`<table id="top-consumers"><tr><th>Server</th><th>In (RX)</th><th>Out (TX)</th><th>Total</th></tr>${top.map((t, i) => {
                const s = servers[i];
                return html`<tr><td>${s === undefined ? `#${t.server_id}` : html`<a href="/admin/bandwidth/servers/${s.id}">${s.name}</a>`}</td><td>${formatBytes(t.rx_bytes)}</td><td>${formatBytes(t.tx_bytes)}</td><td>${formatBytes(t.rx_bytes + t.tx_bytes)}</td></tr>`;
              })}</table>`
        }</div>${scripts()}`,
    });
  });

  admin.get('/admin/bandwidth/nodes', async (req, reply) => {
    const cards = await nodeCards(ctx, store);
    const csrf = csrfToken(req, reply);
    return sendPage(req, reply, {
      title: 'Bandwidth nodes',
      body: html`<h1>Bandwidth nodes</h1><p class="help">A node is online while its agent heartbeats or answers stats polls; it goes offline after 3 failed polls in a row or 3 poll intervals without a word. Live rates refresh every 5 seconds.</p>
        <table id="bandwidth-nodes"><tr><th>Node</th><th>State</th><th>Agent</th><th>Last seen</th><th>Servers</th><th>In</th><th>Out</th><th>Throttled</th><th>Over quota</th><th></th></tr>${rowsOrNone(cards.map(
          (c) => html`<tr data-node="${String(c.id)}"${c.online ? html` data-live-node="${String(c.id)}"` : ''}><td><a href="/admin/nodes/${String(c.id)}">${String(c.name)}</a><div class="help">${String(c.api_url ?? c.fqdn)}</div></td>
            <td>${c.online ? html`<span class="badge green">online</span>` : !c.registered ? html`<span class="badge">never registered</span>` : html`<span class="badge red">offline</span>`}</td>
            <td>${String(c.version ?? '-')}</td><td>${String(c.last_seen_at ?? '-')}</td><td data-k="containers">${String(c.containers)}</td>
            <td data-k="rx">${formatRate(Number(c.rx_rate_bps))}</td><td data-k="tx">${formatRate(Number(c.tx_rate_bps))}</td><td data-k="throttled">${String(c.throttled)}</td><td data-k="exceeded">${String(c.quota_exceeded)}</td>
            <td>${confirmButton(`/admin/nodes/${String(c.id)}/token`, csrf, 'Reset token', `Reset the pairing token of node ${String(c.name)}? Its agent is refused until it has the new token and is restarted.`)}</td></tr>`,
        ), 10, 'No nodes yet.')}</table>${scripts()}`,
    });
  });

  const settingsPage = async (req: FastifyRequest, reply: FastifyReply, form: FormState, status = 200): Promise<FastifyReply> => {
    const { configVersion } = await store.settings();
    const number = (name: keyof BandwidthSettings, label: string, help?: string): SafeHtml => {
      const s = SETTING_SCHEMA[name] as { minimum?: number; maximum?: number };
      return inputField(form, name, label, { type: 'number', help: help ?? `${s.minimum ?? 0} to ${(s.maximum ?? 0).toLocaleString('en')}` });
    };
    return sendPage(req, reply, {
      title: 'Bandwidth settings',
      status,
      body: html`<h1>Bandwidth settings</h1><p>Defaults for every server without its own limits. Saving a change bumps the limits version (now <b id="config-version">${configVersion}</b>) and pushes the new limits to every online node.</p>${formSummary(form)}
        <div class="card">${postForm(
          '/admin/bandwidth/settings',
          csrfToken(req, reply),
          html`<h2>Speeds and quotas</h2><div class="grid">${number('default_rx_speed_mbps', LABELS.rx_speed_mbps ?? '')}${number('default_tx_speed_mbps', LABELS.tx_speed_mbps ?? '')}${DIRECTIONS.flatMap((d) =>
            PERIODS.map((p) => number(`default_${d}_quota_${p}_gb`, LABELS[`${d}_quota_${p}_gb`] ?? '', '0 = none')),
          )}</div>
          <h2>Enforcement</h2><div class="grid">${selectField(form, 'default_exceed_action', LABELS.exceed_action ?? '', ACTION_OPTIONS)}${number('default_throttle_rx_mbps', LABELS.throttle_rx_mbps ?? '')}${number('default_throttle_tx_mbps', LABELS.throttle_tx_mbps ?? '')}</div>${checkboxField(form, 'rename_on_quota_suspend', 'Rename servers suspended for a quota with the prefix "(Bandwidth Quota Exceeded) " until they are unsuspended')}
          <h2>Schedule and retention</h2><div class="grid">${inputField(form, 'timezone', 'Quota timezone (IANA name)', { help: 'Days start at midnight, weeks on Monday, months on the 1st, in this zone.' })}${number('poll_interval_seconds', 'Heartbeat and stats poll interval (s)')}${number('retention_days_hourly', 'Keep hourly usage (days)')}${number('retention_days_daily', 'Keep daily usage (days)')}${number('events_retention_days', 'Keep events (days)', '1 or more')}</div>
          <div class="actions"><button type="submit">Save settings</button></div>`,
        )}</div>`,
    });
  };
  const settingsForm = (s: BandwidthSettings): FormState => formOf({ ...s, rename_on_quota_suspend: s.rename_on_quota_suspend ? 'on' : '' });
  admin.get('/admin/bandwidth/settings', async (req, reply) => settingsPage(req, reply, settingsForm((await store.settings()).settings)));
  admin.post('/admin/bandwidth/settings', async (req, reply) => {
    const values = formBody(req.body);
    const input = { ...inputOf(values, { int: SETTING_INTS, textOrOmit: ['default_exceed_action', 'timezone'], bool: ['rename_on_quota_suspend'] }) };
    try {
      const version = await service.saveSettings(input);
      await adminAudit(ctx, req, 'admin:bandwidth.settings', undefined, { config_version: version ?? null });
      setFlash(reply, 'success', version === undefined ? 'Nothing changed.' : `Settings saved; limits version ${version} is being pushed to the online nodes.`);
      return seeOther(reply, '/admin/bandwidth/settings');
    } catch (err) {
      const failed = failedForm(values, err);
      if (failed === undefined) throw err;
      return settingsPage(req, reply, failed.form, failed.status);
    }
  });

  admin.get('/admin/bandwidth/events', async (req, reply) => {
    const page = pageParam(req);
    const { items, total } = await store.events({ page, perPage: 50 });
    const servers = new Map((await Promise.all([...new Set(items.map((e) => e.server_id).filter((id): id is number => id !== null))].map((id) => ctx.store.servers.find(id)))).filter((s): s is ServerRow => s !== undefined).map((s) => [s.id, s]));
    const pages = Math.max(1, Math.ceil(total / 50));
    return sendPage(req, reply, {
      title: 'Bandwidth events',
      body: html`<h1>Bandwidth events</h1><table id="bandwidth-events"><tr><th>Occurred</th><th>Server</th><th>Type</th><th>Period</th><th>Direction</th><th>Message</th></tr>${rowsOrNone(items.map((e) => {
        const s = e.server_id === null ? undefined : servers.get(e.server_id);
        return html`<tr><td>${e.occurred_at}</td><td>${s === undefined ? e.server_uuid : html`<a href="/admin/bandwidth/servers/${s.id}">${s.name}</a>`}</td><td><span class="badge">${e.type}</span></td><td>${e.period ?? '-'}</td><td>${e.direction ?? '-'}</td><td>${e.message}</td></tr>`;
      }), 6, 'No bandwidth events yet.')}</table><div class="pager">${page > 1 ? html`<a href="?page=${page - 1}">&larr; Previous</a>` : ''}<span>Page ${page} of ${pages}</span>${page < pages ? html`<a href="?page=${page + 1}">Next &rarr;</a>` : ''}</div>`,
    });
  });

  const serverPage = async (req: FastifyRequest, reply: FastifyReply, server: ServerRow, form?: FormState, status = 200): Promise<FastifyReply> => {
    const { settings } = await store.settings();
    const override = await store.override(server.id);
    const eff = effectiveLimits(settings, override);
    const status_ = await store.node(server.node_id);
    const stats = ((JSON.parse(status_?.cached_stats ?? '{}') as { servers?: Record<string, unknown>[] }).servers ?? []).find((x) => x.uuid === server.uuid);
    const f = form ?? overrideForm(override, settings);
    const csrf = csrfToken(req, reply);
    const usage = DIRECTIONS.map(
      (d) =>
        html`<tr><th>${d === 'rx' ? 'In (RX)' : 'Out (TX)'}</th>${PERIODS.map((p) => {
          const used = Number(stats?.[`${d}_${p}`] ?? 0);
          const quota = eff[`${d}_quota_${p}_gb`] ?? 0;
          return html`<td>${formatBytes(used)} / ${quota === 0 ? 'unlimited' : `${quota} GiB`}${quota > 0 ? html` <span class="badge${used >= quota * 1024 ** 3 ? ' red' : ''}">${Math.floor((used / (quota * 1024 ** 3)) * 100)}%</span>` : ''}</td>`;
        })}</tr>`,
    );
    return sendPage(req, reply, {
      title: `Bandwidth of ${server.name}`,
      status,
      body: html`<h1>Bandwidth of <a href="/admin/servers/${server.id}">${server.name}</a></h1>
        <div class="card"><h2>Usage this period</h2><table id="server-usage"><tr><th></th><th>Day</th><th>Week</th><th>Month</th></tr>${usage}</table>
        <p>${stats === undefined ? 'The node has not reported this server yet.' : html`Now ${formatRate(Number(stats.rx_rate_bps ?? 0))} in, ${formatRate(Number(stats.tx_rate_bps ?? 0))} out.${(stats.exceeded as string[] | undefined)?.length ? html` Exceeded: <b id="exceeded">${(stats.exceeded as string[]).join(', ')}</b>.` : ''}`}</p>
        <div class="actions">${confirmButton(`/admin/bandwidth/servers/${server.id}/unthrottle`, csrf, 'Unthrottle until the period resets', `Unthrottle ${server.name}? Its exceeded quotas stop applying until their periods reset, and nothing here can throttle it again before then.`)}</div></div>
        <div class="card"><div id="bw-chart" data-hours="168" data-server="${server.id}"></div><p class="help" id="bw-chart-summary"></p></div>
        ${limitsCard(server, override, f, csrf)}${scripts()}`,
    });
  };
  admin.get('/admin/bandwidth/servers/:id', async (req, reply) => serverPage(req, reply, found(await ctx.store.servers.find(idParam(req, 'server')), 'server')));
  admin.post('/admin/bandwidth/servers/:id', async (req, reply) => {
    const server = found(await ctx.store.servers.find(idParam(req, 'server')), 'server');
    const values = formBody(req.body);
    const use = values.use_override === 'on';
    try {
      const version = await service.saveOverride(server.id, use ? inputOf(values, { int: LIMIT_FIELDS, textOrOmit: ['exceed_action'], bool: ['enabled'] }) : null);
      await adminAudit(ctx, req, 'admin:bandwidth.override', { type: 'server', id: server.id }, { override: use, config_version: version ?? null });
      setFlash(reply, 'success', version === undefined ? 'Nothing changed.' : use ? 'Limits saved and pushed to the node.' : 'The server follows the global defaults again.');
      return seeOther(reply, `/admin/bandwidth/servers/${server.id}`);
    } catch (err) {
      const failed = failedForm(values, err);
      if (failed === undefined) throw err;
      return serverPage(req, reply, server, failed.form, failed.status);
    }
  });
  admin.post('/admin/bandwidth/servers/:id/unthrottle', async (req, reply) => {
    const server = found(await ctx.store.servers.find(idParam(req, 'server')), 'server');
    try {
      const done = await service.unthrottle(server.id);
      await adminAudit(ctx, req, 'admin:bandwidth.unthrottle', { type: 'server', id: server.id });
      setFlash(reply, 'success', done ? 'Unthrottled until the quota periods reset.' : 'The server was not throttled.');
    } catch (err) {
      setFlash(reply, 'error', `Unthrottle failed: ${errorMessage(err)}`);
    }
    return seeOther(reply, `/admin/bandwidth/servers/${server.id}`);
  });
}


/**
 * The firewall alerts' work (spec/3 §6.3): settings through a 300 s cache that admin writes clear
 * at once; the SMART grant (admin) and enable and webhook (owner) of a server, a change of what
 * the node enforces pushed at once through the bandwidth addon; the pull of every online node's
 * SMART events (at start and every 2 minutes, or at once from the admin Events page), stored with
 * the node's cursor and the alerts they cause in one transaction per page; the offline incidents
 * of nodes from the core's nodeStatus hook; acknowledgement; and the outbox's destinations.
 */
import { AppError, errorMessage } from '../../../../src/core/app-error.ts';
import { SERVICE_VERSION } from '../../../../src/core/version.ts';
import type { SmartEvent } from '../../../../src/contracts/types.ts';
import { chatABody, chatBBody, type ChatNotice } from '../../../../src/lib/chat-payloads.ts';
import { sendWebhook } from '../../../../src/lib/webhook-send.ts';
import { redactUrl } from '../../../../src/lib/webhook-url.ts';
import type { NodeAgentTarget, PanelContext } from '../../context.ts';
import { fetchSmartEvents } from '../../services/node-client.ts';
import { now } from '../../services/records.ts';
import { validationError } from '../../services/validation.ts';
import type { NodeRow, ServerRow } from '../../store/records.ts';
import { cameOnline, isOver, wentOffline } from './node-incidents.ts';
import { emailOf, nodeOfflineNotice, nodeOnlineNotice, OWNER_TYPES, PER_MESSAGE, smartNotice, type AlertEvent } from './notices.ts';
import { createOutbox, type DeliveryResult, type Destination } from './outbox.ts';
import { encodeSettings, FIREWALL_DEFAULTS, parseSettings, settingsFromForm, webhookUrlProblem, WEBHOOK_STYLES, type FirewallSettings, type WebhookStyle } from './settings.ts';
import type { EventRow, FirewallStore, OutboxInput, PulledEvent, SmartRow } from './store.ts';

/** How long a settings read is reused, as the other addons do. */
export const SETTINGS_CACHE_MS = 300_000;
/** spec/3 §6.3: SMART events sync from the nodes every 2 minutes. */
export const SYNC_INTERVAL_MS = 120_000;
/** Events per request of the pull (the node API allows 1-500). */
export const PULL_LIMIT = 200;
/** Pages per node and sync: a backlog beyond 10,000 events is picked up by the next sync. */
const MAX_PAGES = 50;
/** How often open node incidents are checked for their stable end. */
const INCIDENT_CHECK_MS = 5_000;
const USER_AGENT = `hostkit-panel/${SERVICE_VERSION} (firewall alerts)`;
const CHAT_USERNAME = 'hostkit';

/** A server's SMART state as the pages and the client API show it (the webhook URL decrypted). */
export interface SmartState {
  granted: boolean;
  enabled: boolean;
  /** SMART is on for the node: granted and enabled. */
  active: boolean;
  webhook_url: string;
  webhook_style: WebhookStyle;
  under_mitigation: boolean;
  mitigation: { cap_mbps: number | null; since: string } | null;
}

export interface FirewallService {
  /** The settings in force (admin webhook URL decrypted): cached up to 300 s; the defaults when the store cannot be read. */
  settings(): Promise<FirewallSettings>;
  /** Validates the admin form, stores it (the URL encrypted) and clears the cache; returns the new settings. */
  saveSettings(input: unknown): Promise<FirewallSettings>;
  smartState(server: ServerRow): Promise<SmartState>;
  /** Admin: grants or revokes SMART mode; true when it changed. */
  setGranted(server: ServerRow, granted: boolean, adminId: number): Promise<boolean>;
  /** Owner: enables or disables SMART; 409 SmartModeNotGranted while an admin has not granted it. */
  setEnabled(server: ServerRow, enabled: boolean): Promise<SmartState>;
  /** Owner: sets (https URL) or clears (null) the owner webhook; 409 unless SMART is granted and enabled, 422 for a bad URL. */
  setWebhook(server: ServerRow, url: string | null, style: WebhookStyle | undefined): Promise<SmartState>;
  /** The `smart` field of each server's limits entry (PanelHooks.limitsEntries). */
  limitsEntries(servers: readonly ServerRow[]): Promise<Map<number, { smart: boolean }>>;
  /** Acknowledges an event of `serverId` (undefined: any server, the admin page); 404 for another server's. Idempotent. */
  acknowledge(id: number, serverId: number | undefined, userId: number): Promise<EventRow>;
  /** The core's nodeStatus hook. */
  nodeStatus(node: NodeRow, online: boolean, reason: string): Promise<void>;
  /** Ends the incidents of nodes that stayed online for the stable time. */
  checkIncidents(): Promise<void>;
  /** Pulls every online node's new events; resolves to how many were new. One run at a time. */
  syncAll(): Promise<number>;
  start(): void;
  stop(): Promise<void>;
}

/** The ids the outbox keys destinations by. */
export const ADMIN_DESTINATION = 'admin';
const ownerDestination = (serverId: number): string => `owner:${serverId}`;
const emailDestination = (serverId: number): string => `email:${serverId}`;

const active = (row: SmartRow | undefined): boolean => row !== undefined && row.granted === 1 && row.enabled === 1;

/** The AlertEvent of a pulled event. */
function alertEvent(e: SmartEvent, server: ServerRow, node: NodeRow): AlertEvent {
  return { type: e.type, level: e.level, occurred_at: e.occurred_at, started_at: e.started_at, ended_at: e.ended_at, metrics: e.metrics, mitigation: e.mitigation, message: e.message, server: server.name, node: node.name };
}

/** Runs once per process (attach); timers run only between start() and stop(). */
export function createFirewallService(ctx: PanelContext, store: FirewallStore): FirewallService {
  const log = ctx.logger.child({ addon: 'firewall' });
  let cached: { value: FirewallSettings; until: number } | undefined;
  let syncing: Promise<number> | undefined;
  const timers = new Set<NodeJS.Timeout>();
  let stopped = false;

  async function settings(): Promise<FirewallSettings> {
    const t = Date.now();
    if (cached !== undefined && t < cached.until) return cached.value;
    try {
      const rows = await store.settingRows();
      const url = rows.webhook_url ?? '';
      const value = parseSettings({ ...rows, webhook_url: url === '' ? '' : ctx.appKey.decrypt(url) });
      cached = { value, until: t + SETTINGS_CACHE_MS };
      return value;
    } catch (err) {
      log.error({ err: errorMessage(err) }, 'cannot read the firewall settings; using the built-in defaults (no admin webhook)');
      return { ...FIREWALL_DEFAULTS };
    }
  }

  async function smartState(server: ServerRow): Promise<SmartState> {
    const [row, mitigations] = await Promise.all([store.smart(server.id), store.mitigations([server.id])]);
    const m = mitigations.get(server.id);
    return {
      granted: row?.granted === 1,
      enabled: row?.enabled === 1,
      active: active(row),
      webhook_url: row === undefined || row.webhook_url === '' ? '' : ctx.appKey.decrypt(row.webhook_url),
      webhook_style: row?.webhook_style ?? 'chat_a',
      under_mitigation: m !== undefined,
      mitigation: m === undefined ? null : { cap_mbps: m.cap_mbps, since: m.since },
    };
  }

  /** What the node enforces changed: the bandwidth addon gives the node a new config_version and pushes it now. */
  async function nodeLimitsChanged(server: ServerRow, smart: boolean): Promise<void> {
    log.info({ server: server.uuid, smart }, 'SMART mode of server %s is now %s; pushing it to its node', server.name, smart ? 'on' : 'off');
    for (const hook of ctx.hooks.limitsChanged ?? []) await hook(server.node_id);
  }

  async function saveSmart(server: ServerRow, change: Partial<Omit<SmartRow, 'server_id'>>): Promise<void> {
    const before = active(await store.smart(server.id));
    const after = active(await store.saveSmart(server.id, change, now()));
    if (before !== after) await nodeLimitsChanged(server, after);
  }

  async function onlineAgent(nodeId: number): Promise<NodeAgentTarget | undefined> {
    for (const hook of ctx.hooks.onlineNodeAgent ?? []) {
      const target = await hook(nodeId);
      if (target !== undefined) return target;
    }
    return undefined;
  }

  /** The alerts a new event causes, by the settings and the server's SMART state now. */
  function alertsFor(e: SmartEvent, server: ServerRow, node: NodeRow, s: FirewallSettings, smart: SmartRow | undefined): OutboxInput[] {
    const ae = alertEvent(e, server, node);
    const base = { kind: 'smart' as const, server_id: server.id, level: e.level };
    const out: OutboxInput[] = [];
    if (s.webhook_url !== '') out.push({ ...base, destination: ADMIN_DESTINATION, notice: JSON.stringify(smartNotice(ae, 'admin')) });
    if (OWNER_TYPES.has(e.type) && active(smart)) {
      const owner = JSON.stringify(smartNotice(ae, 'owner'));
      if (smart?.webhook_url !== '') out.push({ ...base, destination: ownerDestination(server.id), notice: owner });
      if (s.smart_owner_email_enabled) out.push({ ...base, destination: emailDestination(server.id), notice: owner });
    }
    return out;
  }

  /** Pulls one node page by page until caught up; returns how many events were new. */
  async function syncNode(node: NodeRow): Promise<number> {
    const agent = await onlineAgent(node.id);
    if (agent === undefined) return 0;
    const servers = new Map((await ctx.store.servers.all({ node_id: node.id })).map((s) => [s.uuid, s]));
    let cursor = await store.cursor(node.id);
    let after = cursor?.last_id ?? 0;
    let added = 0;
    for (let page = 0; page < MAX_PAGES && !stopped; page++) {
      const data = await fetchSmartEvents(agent, after, PULL_LIMIT);
      if (cursor !== undefined && data.stream !== cursor.stream && after > 0) {
        // A new store numbers its events from 1 again: what came back is relative to the old
        // cursor, so ask again from the start.
        log.warn({ node: node.name, stream: data.stream, previous_stream: cursor.stream }, 'node %s has a new SMART event store (%s, was %s): pulling it from the start', node.name, data.stream, cursor.stream);
        after = 0;
        continue;
      }
      const s = await settings();
      const known = data.events.filter((e) => servers.has(e.server_uuid));
      if (known.length < data.events.length) {
        log.warn({ node: node.name, skipped: data.events.length - known.length }, 'skipped %d SMART events of node %s for servers not on it', data.events.length - known.length, node.name);
      }
      const smart = await store.smartOf([...new Set(known.map((e) => (servers.get(e.server_uuid) as ServerRow).id))]);
      const pulled: PulledEvent[] = known.map((e) => {
        const server = servers.get(e.server_uuid) as ServerRow;
        return { server_id: server.id, event: e, alerts: alertsFor(e, server, node, s, smart.get(server.id)) };
      });
      const lastReturned = data.events[data.events.length - 1]?.id ?? after;
      cursor = { stream: data.stream, last_id: Math.max(after, lastReturned) };
      const stored = await store.storePage(node.id, cursor, pulled, now());
      added += stored.length;
      if (data.events.length === 0 || lastReturned >= data.last_id) break;
      after = lastReturned;
    }
    if (added > 0) {
      log.info({ node: node.name, events: added }, 'pulled %d SMART events from node %s', added, node.name);
      outbox.kick();
    }
    return added;
  }

  async function syncAll(): Promise<number> {
    if (syncing !== undefined) return syncing;
    syncing = (async () => {
      let added = 0;
      for (const node of await ctx.store.nodes.all()) {
        try {
          added += await syncNode(node);
        } catch (err) {
          log.warn({ node: node.name, err: errorMessage(err) }, 'SMART event pull from node %s failed: %s', node.name, errorMessage(err));
        }
      }
      return added;
    })();
    try {
      return await syncing;
    } finally {
      syncing = undefined;
    }
  }

  function chatDestination(url: string, style: WebhookStyle, what: string): Destination {
    return {
      label: `${what} ${redactUrl(url)}`,
      perMessage: PER_MESSAGE[style],
      send: (notices) =>
        sendWebhook({ url, userAgent: USER_AGENT, body: JSON.stringify(style === 'chat_a' ? chatABody(notices, { username: CHAT_USERNAME }) : chatBBody(notices, { username: CHAT_USERNAME })) }),
    };
  }

  /** Where a destination's alerts go now, or undefined when it is no longer set up. */
  async function resolve(destination: string): Promise<Destination | undefined> {
    const s = await settings();
    if (destination === ADMIN_DESTINATION) return s.webhook_url === '' ? undefined : chatDestination(s.webhook_url, s.webhook_style, 'the admin webhook');
    const [kind, id] = destination.split(':');
    const server = await ctx.store.servers.find(Number(id));
    if (server === undefined) return undefined;
    const state = await smartState(server);
    if (!state.active) return undefined;
    if (kind === 'owner') return state.webhook_url === '' ? undefined : chatDestination(state.webhook_url, state.webhook_style, `the owner webhook of server ${server.name}`);
    const owner = await ctx.store.users.find(server.owner_id);
    if (kind !== 'email' || !s.smart_owner_email_enabled || owner === undefined) return undefined;
    return {
      label: `the owner e-mail of server ${server.name}`,
      perMessage: PER_MESSAGE.email,
      async send(notices): Promise<DeliveryResult> {
        try {
          await ctx.mailer.send({ to: owner.email, ...emailOf(notices) });
          return { ok: true };
        } catch (err) {
          // An SMTP 5xx (unknown mailbox, refused) will not change by retrying.
          const code = (err as { cause?: { responseCode?: unknown } }).cause?.responseCode;
          return { ok: false, error: errorMessage(err), permanent: typeof code === 'number' && code >= 500 };
        }
      },
    };
  }

  const outbox = createOutbox(store, resolve, log, ctx.activity);

  async function checkIncidents(): Promise<void> {
    const s = await settings();
    for (const incident of await store.nodeIncidents()) {
      if (!isOver(incident, Date.now(), s.node_stable_seconds)) continue;
      const node = await ctx.store.nodes.find(incident.node_id);
      const at = now();
      const alerts = node === undefined || s.webhook_url === '' ? [] : [nodeAlert(nodeOnlineNotice(node.name, at, incident.started_at, incident.offline_count, s.node_stable_seconds))];
      await store.saveNodeIncident(incident.node_id, null, alerts, at);
      log.info({ node: node?.name, offline_count: incident.offline_count }, 'node %s stayed online for %d s: its offline incident is over', node?.name ?? incident.node_id, s.node_stable_seconds);
      outbox.kick();
    }
  }

  const nodeAlert = (notice: ChatNotice): OutboxInput => ({ destination: ADMIN_DESTINATION, kind: 'node', server_id: null, level: null, notice: JSON.stringify(notice) });

  function every(ms: number, what: string, fn: () => Promise<unknown>): void {
    const tick = (): void => {
      const t = setTimeout(() => {
        timers.delete(t);
        void fn()
          .catch((err: unknown) => log.error({ err: errorMessage(err) }, '%s failed', what))
          .finally(() => {
            if (!stopped) tick();
          });
      }, ms);
      timers.add(t);
    };
    tick();
  }

  return {
    settings,
    async saveSettings(input) {
      const next = settingsFromForm(input, await settings());
      await store.saveSettings(encodeSettings(next).map(([k, v]) => [k, k === 'webhook_url' && v !== '' ? ctx.appKey.encrypt(v) : v]));
      cached = undefined;
      return next;
    },
    smartState,
    async setGranted(server, granted, adminId) {
      const row = await store.smart(server.id);
      if ((row?.granted === 1) === granted) return false;
      await saveSmart(server, granted ? { granted: 1, granted_by: adminId, granted_at: now() } : { granted: 0 });
      return true;
    },
    async setEnabled(server, enabled) {
      const row = await store.smart(server.id);
      if (row?.granted !== 1) throw new AppError('SmartModeNotGranted', 'SMART mode has not been granted for this server: an administrator must grant it before it can be enabled', { status: 409 });
      await saveSmart(server, { enabled: enabled ? 1 : 0 });
      return smartState(server);
    },
    async setWebhook(server, url, style) {
      const row = await store.smart(server.id);
      if (!active(row)) {
        const why = row?.granted !== 1 ? 'SMART mode has not been granted for this server by an administrator' : 'SMART mode is not enabled for this server: enable it first';
        throw new AppError(row?.granted !== 1 ? 'SmartModeNotGranted' : 'SmartModeNotEnabled', `the owner webhook needs SMART mode granted and enabled: ${why}`, { status: 409 });
      }
      const given = url?.trim() ?? null;
      const problem = given === null ? undefined : given === '' ? { field: 'webhook_url', rule: 'url', detail: 'the webhook_url field must be an https URL, or null to remove the webhook' } : webhookUrlProblem('webhook_url', given);
      if (problem !== undefined) throw validationError([problem]);
      await saveSmart(server, { webhook_url: given === null ? '' : ctx.appKey.encrypt(given), webhook_style: style ?? row?.webhook_style ?? WEBHOOK_STYLES[0] });
      return smartState(server);
    },
    async limitsEntries(servers) {
      const rows = await store.smartOf(servers.map((s) => s.id));
      return new Map(servers.map((s) => [s.id, { smart: active(rows.get(s.id)) }]));
    },
    async acknowledge(id, serverId, userId) {
      const event = await store.event(id);
      if (event === undefined || (serverId !== undefined && event.server_id !== serverId)) throw new AppError('ERR_NOT_FOUND', 'the requested attack event was not found', { status: 404 });
      return (await store.acknowledge(id, userId, now())) as EventRow;
    },
    async nodeStatus(node, online, reason) {
      const s = await settings();
      const at = now();
      const current = await store.nodeIncident(node.id);
      if (online) {
        const next = cameOnline(current, at);
        if (next !== undefined) await store.saveNodeIncident(node.id, next, [], at);
        return;
      }
      const { incident, announce } = wentOffline(current, at, s.node_offline_webhook_max);
      const alerts = announce && s.webhook_url !== '' ? [nodeAlert(nodeOfflineNotice(node.name, reason, at, incident, s.node_offline_webhook_max))] : [];
      await store.saveNodeIncident(node.id, incident, alerts, at);
      if (!announce) {
        log.info(
          { node: node.name, offline_count: incident.offline_count, max: s.node_offline_webhook_max },
          'node %s went offline again (%d times in this incident): alert held back, %d of %d sent',
          node.name,
          incident.offline_count,
          incident.offline_alerts,
          s.node_offline_webhook_max,
        );
      }
      outbox.kick();
    },
    checkIncidents,
    syncAll,
    start() {
      outbox.start();
      void syncAll();
      every(SYNC_INTERVAL_MS, 'SMART event sync', syncAll);
      every(INCIDENT_CHECK_MS, 'node incident check', checkIncidents);
    },
    async stop() {
      stopped = true;
      for (const t of timers) clearTimeout(t);
      timers.clear();
      await syncing;
      await outbox.stop();
    },
  };
}

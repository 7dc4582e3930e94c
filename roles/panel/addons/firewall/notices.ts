/**
 * What the firewall alerts say, in words: SMART events and node transitions as chat notices (the
 * shared chat_a / chat_b payload builders render them), the owner e-mail made of the same
 * notices, metrics in readable units against the baseline, and the digest of a burst (one message
 * that shows up to the platform's maximum and sums up the rest in one line). Pure.
 */
import type { SmartEvent } from '../../../../src/contracts/types.ts';
import { SERVICE_VERSION } from '../../../../src/core/version.ts';
import { CHAT_A_LIMITS, CHAT_B_LIMITS, type ChatNotice } from '../../../../src/lib/chat-payloads.ts';
import type { WebhookStyle } from './settings.ts';

export type SmartType = SmartEvent['type'];
export type Metrics = SmartEvent['metrics'];
export type Mitigation = SmartEvent['mitigation'];

export const SOURCE = `hostkit panel ${SERVICE_VERSION} · firewall`;

/** The event types an owner hears about (the admin hears every type). */
export const OWNER_TYPES: ReadonlySet<SmartType> = new Set(['attack_detected', 'attack_escalated', 'attack_ended']);

export const TYPE_WORDS: Readonly<Record<SmartType, string>> = {
  attack_detected: 'Attack detected',
  attack_escalated: 'Attack escalated',
  mitigation_started: 'Mitigation started',
  mitigation_ended: 'Mitigation lifted',
  attack_ended: 'Attack ended',
  apply_failed: 'Mitigation could not be applied',
};

const LOOK: Readonly<Record<SmartType | 'node_offline' | 'node_online' | 'digest', { emoji: string; color: number }>> = {
  attack_detected: { emoji: '🚨', color: 0xfaa61a },
  attack_escalated: { emoji: '🔺', color: 0xed4245 },
  mitigation_started: { emoji: '🛡️', color: 0x5865f2 },
  mitigation_ended: { emoji: '🔓', color: 0x3498db },
  attack_ended: { emoji: '✅', color: 0x57f287 },
  apply_failed: { emoji: '❌', color: 0xe74c3c },
  node_offline: { emoji: '🔴', color: 0xed4245 },
  node_online: { emoji: '🟢', color: 0x57f287 },
  digest: { emoji: '📋', color: 0x80848e },
};

/** `84,000 packets/s`. */
export function formatPps(pps: number): string {
  return `${Math.round(pps).toLocaleString('en')} packets/s`;
}

/** Bits per second in the largest unit that keeps a whole number in front, three significant digits: `1.2 Gbit/s`, `850 Mbit/s`, `12.5 kbit/s`. */
export function formatBps(bps: number): string {
  const units: [number, string][] = [
    [1e9, 'Gbit/s'],
    [1e6, 'Mbit/s'],
    [1e3, 'kbit/s'],
  ];
  for (const [size, unit] of units) {
    if (bps >= size) {
      const v = bps / size;
      return `${v.toLocaleString('en', { maximumFractionDigits: v >= 100 ? 0 : v >= 10 ? 1 : 2 })} ${unit}`;
    }
  }
  return `${Math.round(bps)} bit/s`;
}

/** `12x baseline`, `2.5x baseline`. */
export function formatRatio(ratio: number): string {
  return `${ratio >= 10 ? Math.round(ratio).toLocaleString('en') : ratio.toFixed(1)}x baseline`;
}

/** The traffic now against the baseline: `84,000 packets/s, 1.2 Gbit/s (12x baseline)`. */
export function trafficText(m: Metrics): string {
  return `${formatPps(m.pps)}, ${formatBps(m.bps)} (${formatRatio(m.ratio)})`;
}

export function peakText(m: Metrics): string {
  return `${formatPps(m.peak_pps)}, ${formatBps(m.peak_bps)}`;
}

export function baselineText(m: Metrics): string {
  return `${formatPps(m.baseline_pps)}, ${formatBps(m.baseline_bps)}`;
}

/** The mitigation in force after the event. */
export function mitigationText(m: Mitigation): string {
  return m.action === 'rate_cap' && m.cap_mbps !== null ? `inbound traffic capped at ${formatBps(m.cap_mbps * 1e6)}` : 'none (alert only)';
}

export function levelText(level: number): string {
  return `level ${level} of 3`;
}

/** A SMART event as the alerts see it: the contract's event with the names of its server and node. */
export interface AlertEvent {
  type: SmartType;
  level: number;
  occurred_at: string;
  started_at: string;
  ended_at: string | null;
  metrics: Metrics;
  mitigation: Mitigation;
  message: string;
  server: string;
  node: string;
}

/** The notice of a SMART event; the owner's leaves out the node (fleet detail). */
export function smartNotice(e: AlertEvent, audience: 'admin' | 'owner'): ChatNotice {
  const look = LOOK[e.type];
  return {
    event: e.type,
    title: `${TYPE_WORDS[e.type]} on ${e.server}: level ${e.level}`,
    emoji: look.emoji,
    color: look.color,
    timestamp: e.occurred_at,
    message: e.message,
    fields: {
      Server: e.server,
      ...(audience === 'admin' ? { Node: e.node } : {}),
      Level: levelText(e.level),
      Traffic: trafficText(e.metrics),
      Peak: peakText(e.metrics),
      Baseline: baselineText(e.metrics),
      Mitigation: mitigationText(e.mitigation),
      Started: e.started_at,
      ...(e.ended_at !== null ? { Ended: e.ended_at } : {}),
    },
    source: SOURCE,
  };
}

/** An offline transition of an incident: how often the node went offline in it, and how many of those were announced (this one included). */
export function nodeOfflineNotice(node: string, reason: string, at: string, incident: { offline_count: number; offline_alerts: number }, max: number): ChatNotice {
  const capped = incident.offline_alerts >= max;
  return {
    event: 'node_offline',
    title: `Node ${node} is offline`,
    ...LOOK.node_offline,
    timestamp: at,
    message: `The panel lost node ${node}: ${reason}.${incident.offline_count > 1 ? ` It went offline ${incident.offline_count} times in this incident.` : ''}${
      capped ? ' Further offline alerts of this incident are held back until the node has stayed online again.' : ''
    }`,
    fields: { Node: node, 'Offline alerts': `${incident.offline_alerts} of at most ${max}` },
    source: SOURCE,
  };
}

/** The end of an incident: the node stayed online for the stable time. */
export function nodeOnlineNotice(node: string, at: string, since: string, offlineCount: number, stableSeconds: number): ChatNotice {
  return {
    event: 'node_online',
    title: `Node ${node} is back online`,
    ...LOOK.node_online,
    timestamp: at,
    message: `Node ${node} has been online for ${stableSeconds} s without a break; the incident that began at ${since} is over.`,
    fields: { Node: node, 'Incident began': since, 'Times offline': offlineCount },
    source: SOURCE,
  };
}

/** An alert waiting in the outbox, as the digest needs it. */
export interface PendingAlert {
  id: number;
  kind: 'smart' | 'node';
  server_id: number | null;
  level: number | null;
  notice: ChatNotice;
}

/** Notices per message a platform takes: chat_a's embeds; chat_b's attachments of the 3 blocks chatBBody gives each notice. E-mail lists up to 50. */
export const PER_MESSAGE: Readonly<Record<WebhookStyle | 'email', number>> = { chat_a: CHAT_A_LIMITS.embeds, chat_b: Math.floor(CHAT_B_LIMITS.blocks / 3), email: 50 };
/** More waiting notices than this for one destination are sent as one digest. */
export const DIGEST_AFTER = 5;

const plural = (n: number, one: string, many = `${one}s`): string => `${n.toLocaleString('en')} ${n === 1 ? one : many}`;

/** The one line that sums up the alerts a digest does not show: `and 95 more attack events on 12 servers`. */
export function summaryLine(rest: readonly PendingAlert[]): string {
  const attacks = rest.filter((a) => a.kind === 'smart');
  const nodes = rest.length - attacks.length;
  const onServers = `on ${plural(new Set(attacks.map((a) => a.server_id)).size, 'server')}`;
  const more = `and ${rest.length.toLocaleString('en')} more`;
  if (nodes === 0) return `${more} ${attacks.length === 1 ? 'attack event' : 'attack events'} ${onServers}`;
  if (attacks.length === 0) return `${more} ${nodes === 1 ? 'node alert' : 'node alerts'}`;
  return `${more} alerts: ${plural(attacks.length, 'attack event')} ${onServers}, ${plural(nodes, 'node alert')}`;
}

/**
 * What one delivery to a destination sends: with up to DIGEST_AFTER alerts waiting, the oldest
 * alone; with more, one message showing as many as the platform takes (one slot kept for the
 * summary when they do not all fit) and one line for the rest. `covers` is the id of the last
 * alert the message stands for: on success every waiting alert up to it is done.
 */
export function planMessage(pending: readonly PendingAlert[], perMessage: number, now: string): { notices: ChatNotice[]; covers: number; count: number } | undefined {
  const first = pending[0];
  if (first === undefined) return undefined;
  const last = pending[pending.length - 1] as PendingAlert;
  if (pending.length <= DIGEST_AFTER) return { notices: [first.notice], covers: first.id, count: 1 };
  if (pending.length <= perMessage) return { notices: pending.map((a) => a.notice), covers: last.id, count: pending.length };
  const shown = pending.slice(0, perMessage - 1);
  const line = summaryLine(pending.slice(perMessage - 1));
  const summary: ChatNotice = {
    event: 'digest',
    title: line.charAt(0).toUpperCase() + line.slice(1),
    ...LOOK.digest,
    timestamp: now,
    message: `${pending.length.toLocaleString('en')} alerts arrived together; the panel's Firewall events page lists every one.`,
    fields: {},
    source: SOURCE,
  };
  return { notices: [...shown.map((a) => a.notice), summary], covers: last.id, count: pending.length };
}

/** The owner e-mail of one or more notices: the subject names the server and the level, the body lists each notice's words and figures. */
export function emailOf(notices: readonly ChatNotice[]): { subject: string; text: string } {
  const one = notices.length === 1 ? notices[0] : undefined;
  const server = notices.map((n) => n.fields.Server).find((s) => typeof s === 'string');
  const levels = notices.flatMap((n) => (typeof n.fields.Level === 'string' ? [Number(/\d/.exec(n.fields.Level)?.[0])] : []));
  const subject = one !== undefined ? `[hostkit] ${one.title}` : `[hostkit] ${notices.length} attack alerts for ${String(server ?? 'your server')}, up to level ${Math.max(...levels, 1)}`;
  const block = (n: ChatNotice): string =>
    [n.title, '', n.message, '', ...Object.entries(n.fields).map(([k, v]) => `${k}: ${v === null ? '-' : String(v)}`)].join('\n');
  return { subject, text: `${notices.map(block).join('\n\n----\n\n')}\n\n-- \n${SOURCE}\n` };
}

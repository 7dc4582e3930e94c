/**
 * Webhook payloads of the daemon (spec/3 §4.2, §6.2): the twelve events with their defaults and
 * colours, and the three body styles. Chat payloads are cut to the platforms' documented limits
 * instead of being refused (an over-long container name must not lose the notification). Pure.
 */
import { SERVICE_VERSION } from '../../src/core/version.ts';

export const EVENTS = [
  'daemon_started',
  'daemon_stopped',
  'container_found',
  'container_removed',
  'quota_warning',
  'quota_exceeded',
  'reset',
  'cleanup',
  'error',
  'config_updated',
  'tc_failed',
  'docker_error',
] as const;
export type EventName = (typeof EVENTS)[number];

interface EventStyle {
  on: boolean;
  color: number;
  emoji: string;
  title: string;
}

/** §6.2: default on/off and chat_a colour of every event. */
export const EVENT_STYLE: Record<EventName, EventStyle> = {
  daemon_started: { on: true, color: 0x57f287, emoji: '🟢', title: 'Daemon started' },
  daemon_stopped: { on: true, color: 0xfee75c, emoji: '🟡', title: 'Daemon stopped' },
  container_found: { on: true, color: 0x5865f2, emoji: '📦', title: 'Container found' },
  container_removed: { on: true, color: 0x80848e, emoji: '🗑️', title: 'Container removed' },
  quota_warning: { on: true, color: 0xfaa61a, emoji: '⚠️', title: 'Quota warning' },
  quota_exceeded: { on: true, color: 0xed4245, emoji: '⛔', title: 'Quota exceeded' },
  reset: { on: false, color: 0x9b59b6, emoji: '🔄', title: 'Counters reset' },
  cleanup: { on: false, color: 0x1abc9c, emoji: '🧹', title: 'Cleanup' },
  error: { on: true, color: 0xed4245, emoji: '❗', title: 'Error' },
  config_updated: { on: false, color: 0x3498db, emoji: '⚙️', title: 'Configuration updated' },
  tc_failed: { on: true, color: 0xe74c3c, emoji: '🚦', title: 'Traffic control failed' },
  docker_error: { on: true, color: 0xe74c3c, emoji: '🐳', title: 'Container runtime error' },
};

/** The synthetic event of `bandwidth webhook test`; sent whatever the events map says. */
export const TEST_STYLE: EventStyle = { on: true, color: 0x3498db, emoji: '🧪', title: 'Webhook test' };

/** One notification as the daemon raises it. `data` carries §4.2's fields where they apply. */
export interface Notice {
  event: EventName | 'test';
  /** RFC 3339. */
  timestamp: string;
  message: string;
  data: Record<string, string | number | boolean | null>;
}

export function styleOf(event: Notice['event']): EventStyle {
  return event === 'test' ? TEST_STYLE : EVENT_STYLE[event];
}

/** Documented limits of the embed-style platform. */
export const CHAT_A_LIMITS = { title: 256, description: 4096, fields: 25, fieldName: 256, fieldValue: 1024, footer: 2048, total: 6000, embeds: 10 };
/** Documented limits of the block-style platform. */
export const CHAT_B_LIMITS = { sectionText: 3000, headerText: 150, contextText: 3000, blocks: 50, fallback: 4000 };

/** Cuts to at most `max` code points, marking the cut with an ellipsis. */
export function cut(text: string, max: number): string {
  const chars = Array.from(text);
  if (chars.length <= max) return text;
  return max <= 1 ? chars.slice(0, max).join('') : chars.slice(0, max - 1).join('') + '…';
}

const len = (s: string): number => Array.from(s).length;

function fieldText(v: string | number | boolean | null): string {
  return v === null ? '-' : String(v);
}

export interface ChatAEmbed {
  title: string;
  description: string;
  color: number;
  timestamp: string;
  footer: { text: string };
  fields: { name: string; value: string; inline: boolean }[];
}

/** One embed within the per-embed limits. */
export function chatAEmbed(n: Notice): ChatAEmbed {
  const s = styleOf(n.event);
  const fields = Object.entries(n.data)
    .slice(0, CHAT_A_LIMITS.fields)
    .map(([k, v]) => ({ name: cut(k, CHAT_A_LIMITS.fieldName), value: cut(fieldText(v) || '-', CHAT_A_LIMITS.fieldValue), inline: true }));
  return {
    title: cut(`${s.emoji} ${s.title}`, CHAT_A_LIMITS.title),
    description: cut(n.message || '-', CHAT_A_LIMITS.description),
    color: s.color,
    timestamp: n.timestamp,
    footer: { text: cut(`bandwidth daemon ${SERVICE_VERSION} · ${n.event}`, CHAT_A_LIMITS.footer) },
    fields,
  };
}

function embedChars(e: ChatAEmbed): number {
  return len(e.title) + len(e.description) + len(e.footer.text) + e.fields.reduce((t, f) => t + len(f.name) + len(f.value), 0);
}

/**
 * One message for up to 10 notices, its characters across all embeds at most 6000: fields are
 * dropped from the last embeds first, then descriptions shortened, so every notice keeps its title.
 */
export function chatABody(notices: Notice[], username?: string): { username?: string; embeds: ChatAEmbed[] } {
  const embeds = notices.slice(0, CHAT_A_LIMITS.embeds).map(chatAEmbed);
  let total = embeds.reduce((t, e) => t + embedChars(e), 0);
  for (let i = embeds.length - 1; i >= 0 && total > CHAT_A_LIMITS.total; i--) {
    const e = embeds[i] as ChatAEmbed;
    while (e.fields.length > 0 && total > CHAT_A_LIMITS.total) {
      const f = e.fields.pop() as ChatAEmbed['fields'][number];
      total -= len(f.name) + len(f.value);
    }
  }
  for (let i = embeds.length - 1; i >= 0 && total > CHAT_A_LIMITS.total; i--) {
    const e = embeds[i] as ChatAEmbed;
    const keep = Math.max(1, len(e.description) - (total - CHAT_A_LIMITS.total));
    total -= len(e.description);
    e.description = cut(e.description, keep);
    total += len(e.description);
  }
  return username ? { username, embeds } : { embeds };
}

const hex = (c: number): string => `#${c.toString(16).padStart(6, '0')}`;

/** Slack-style mrkdwn needs &, < and > escaped. */
const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

export interface ChatBBody {
  text: string;
  channel?: string;
  username?: string;
  attachments: { color: string; fallback: string; blocks: Record<string, unknown>[] }[];
}

/** One message with an attachment (colour bar + blocks) per notice, at most 50 blocks in all. */
export function chatBBody(notices: Notice[], opts: { channel?: string; username?: string } = {}): ChatBBody {
  const per = 3;
  const list = notices.slice(0, Math.floor(CHAT_B_LIMITS.blocks / per));
  const attachments = list.map((n) => {
    const s = styleOf(n.event);
    const title = `${s.emoji} ${s.title}`;
    const details = Object.entries(n.data).map(([k, v]) => `*${esc(k)}:* ${esc(fieldText(v))}`).join('\n');
    const text = details ? `${esc(n.message)}\n${details}` : esc(n.message || '-');
    return {
      color: hex(s.color),
      fallback: cut(`${title}: ${n.message}`, CHAT_B_LIMITS.fallback),
      blocks: [
        { type: 'header', text: { type: 'plain_text', text: cut(title, CHAT_B_LIMITS.headerText), emoji: true } },
        { type: 'section', text: { type: 'mrkdwn', text: cut(text, CHAT_B_LIMITS.sectionText) } },
        { type: 'context', elements: [{ type: 'mrkdwn', text: cut(`${n.timestamp} · bandwidth daemon ${SERVICE_VERSION} · ${n.event}`, CHAT_B_LIMITS.contextText) }] },
      ],
    };
  });
  const body: ChatBBody = { text: cut(list.map((n) => `${styleOf(n.event).title}: ${n.message}`).join('\n'), CHAT_B_LIMITS.fallback), attachments };
  if (opts.channel) body.channel = opts.channel;
  if (opts.username) body.username = opts.username;
  return body;
}

/** §4.2's generic body: one notice per request. */
export function genericBody(n: Notice): { event: string; timestamp: string; daemon_version: string; data: Notice['data'] } {
  return { event: n.event, timestamp: n.timestamp, daemon_version: SERVICE_VERSION, data: { message: n.message, ...n.data } };
}

/**
 * Chat webhook bodies for the two platform styles every notifying role speaks (bandwidthd's
 * events, the panel's firewall alerts): chat_a (embeds) and chat_b (blocks in attachments).
 * Bodies are cut to the platforms' documented limits instead of being refused (an over-long
 * container name must not lose the notification). Pure.
 */

/** Documented limits of the embed-style platform. */
export const CHAT_A_LIMITS = { title: 256, description: 4096, fields: 25, fieldName: 256, fieldValue: 1024, footer: 2048, total: 6000, embeds: 10 };
/** Documented limits of the block-style platform. */
export const CHAT_B_LIMITS = { sectionText: 3000, headerText: 150, contextText: 3000, blocks: 50, fallback: 4000 };

/** One notification in a platform-neutral form; each role maps its own events to it. */
export interface ChatNotice {
  /** Machine name, shown in the footer/context line (e.g. 'quota_exceeded', 'attack_detected'). */
  event: string;
  /** e.g. 'Quota exceeded'. */
  title: string;
  emoji: string;
  /** 0xRRGGBB. */
  color: number;
  /** RFC 3339. */
  timestamp: string;
  /** One or more sentences. */
  message: string;
  /** Label -> value, shown in this order; null shows as '-'. */
  fields: Record<string, string | number | boolean | null>;
  /** Who sends it, e.g. 'bandwidth daemon 1.0.0' or 'hostkit panel 1.0.0 · firewall'. */
  source: string;
}

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

/** The footer (chat_a) and context (chat_b) line names the sender and the event. */
const signature = (n: ChatNotice): string => `${n.source} · ${n.event}`;

export interface ChatAEmbed {
  title: string;
  description: string;
  color: number;
  timestamp: string;
  footer: { text: string };
  fields: { name: string; value: string; inline: boolean }[];
}

/** One embed within the per-embed limits. */
function chatAEmbed(n: ChatNotice): ChatAEmbed {
  const fields = Object.entries(n.fields)
    .slice(0, CHAT_A_LIMITS.fields)
    .map(([k, v]) => ({ name: cut(k, CHAT_A_LIMITS.fieldName), value: cut(fieldText(v) || '-', CHAT_A_LIMITS.fieldValue), inline: true }));
  return {
    title: cut(`${n.emoji} ${n.title}`, CHAT_A_LIMITS.title),
    description: cut(n.message || '-', CHAT_A_LIMITS.description),
    color: n.color,
    timestamp: n.timestamp,
    footer: { text: cut(signature(n), CHAT_A_LIMITS.footer) },
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
export function chatABody(notices: ChatNotice[], opts: { username?: string } = {}): { username?: string; embeds: ChatAEmbed[] } {
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
  return opts.username ? { username: opts.username, embeds } : { embeds };
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
export function chatBBody(notices: ChatNotice[], opts: { channel?: string; username?: string } = {}): ChatBBody {
  const per = 3;
  const list = notices.slice(0, Math.floor(CHAT_B_LIMITS.blocks / per));
  const attachments = list.map((n) => {
    const title = `${n.emoji} ${n.title}`;
    const details = Object.entries(n.fields).map(([k, v]) => `*${esc(k)}:* ${esc(fieldText(v))}`).join('\n');
    const text = details ? `${esc(n.message)}\n${details}` : esc(n.message || '-');
    return {
      color: hex(n.color),
      fallback: cut(`${title}: ${n.message}`, CHAT_B_LIMITS.fallback),
      blocks: [
        { type: 'header', text: { type: 'plain_text', text: cut(title, CHAT_B_LIMITS.headerText), emoji: true } },
        { type: 'section', text: { type: 'mrkdwn', text: cut(text, CHAT_B_LIMITS.sectionText) } },
        { type: 'context', elements: [{ type: 'mrkdwn', text: cut(`${n.timestamp} · ${signature(n)}`, CHAT_B_LIMITS.contextText) }] },
      ],
    };
  });
  const body: ChatBBody = { text: cut(list.map((n) => `${n.title}: ${n.message}`).join('\n'), CHAT_B_LIMITS.fallback), attachments };
  if (opts.channel) body.channel = opts.channel;
  if (opts.username) body.username = opts.username;
  return body;
}

/**
 * Webhook payloads of the daemon (spec/3 §4.2, §6.2): the twelve events with their defaults and
 * colours, the generic body, and the notice in the form src/lib/chat-payloads.ts builds the
 * chat_a and chat_b bodies from (cut to the platforms' limits there). Pure.
 */
import { SERVICE_VERSION } from '../../src/core/version.ts';
import type { ChatNotice } from '../../src/lib/chat-payloads.ts';

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

/** The notice in the chat payloads' neutral form: the event's style, its data as fields, the daemon as source. Pure. */
export function chatNotice(n: Notice): ChatNotice {
  const s = styleOf(n.event);
  return { event: n.event, title: s.title, emoji: s.emoji, color: s.color, timestamp: n.timestamp, message: n.message, fields: n.data, source: `bandwidth daemon ${SERVICE_VERSION}` };
}

/** §4.2's generic body: one notice per request. */
export function genericBody(n: Notice): { event: string; timestamp: string; daemon_version: string; data: Notice['data'] } {
  return { event: n.event, timestamp: n.timestamp, daemon_version: SERVICE_VERSION, data: { message: n.message, ...n.data } };
}

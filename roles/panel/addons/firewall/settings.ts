/**
 * The firewall alerts' global settings (spec/3 §2.10): the admin chat webhook and its platform
 * style, the cap on offline alerts of one incident of a flapping node, how long a node must stay
 * online before its return is announced, and the master switch of owner e-mail. Keys, defaults,
 * ranges, the admin form's validation and the conversions between stored text and typed values.
 * The webhook URLs (admin and owner) are secrets: stored encrypted with the app key, shown masked.
 */
import { createValidator, validationError, type FieldProblem } from '../../services/validation.ts';

export const WEBHOOK_STYLES = ['chat_a', 'chat_b'] as const;
export type WebhookStyle = (typeof WEBHOOK_STYLES)[number];

export interface FirewallSettings {
  /** The admin chat webhook; '' = none (no admin alerts are queued). */
  webhook_url: string;
  webhook_style: WebhookStyle;
  node_offline_webhook_max: number;
  node_stable_seconds: number;
  smart_owner_email_enabled: boolean;
}

/** The table's defaults: seeded by the migration, and used whole when the store cannot be read. */
export const FIREWALL_DEFAULTS: Readonly<FirewallSettings> = Object.freeze({
  webhook_url: '',
  webhook_style: 'chat_a',
  node_offline_webhook_max: 3,
  node_stable_seconds: 300,
  smart_owner_email_enabled: false,
});

export const SETTINGS_SCHEMA = {
  webhook_style: { enum: WEBHOOK_STYLES },
  node_offline_webhook_max: { type: 'integer', minimum: 1, maximum: 100 },
  node_stable_seconds: { type: 'integer', minimum: 30, maximum: 86_400 },
  smart_owner_email_enabled: { type: 'boolean' },
} as const;

/** The longest webhook URL taken: chat platforms' are under 200 characters. */
export const WEBHOOK_URL_MAX = 2048;

/**
 * The problem with a webhook URL named `field`, or undefined when it can be used: https (the URL
 * carries the platform's token), a host, no credentials, at most WEBHOOK_URL_MAX characters. Pure.
 */
export function webhookUrlProblem(field: string, url: string): FieldProblem | undefined {
  const bad = (detail: string): FieldProblem => ({ field, rule: 'url', detail: `the ${field} field ${detail}` });
  if (url.length > WEBHOOK_URL_MAX) return bad(`must not be longer than ${WEBHOOK_URL_MAX} characters`);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return bad('must be a valid https URL');
  }
  if (parsed.protocol !== 'https:') return bad('must be an https URL (the URL carries the webhook\'s secret)');
  if (parsed.hostname === '') return bad('must name a host');
  if (parsed.username !== '' || parsed.password !== '') return bad('must not carry a user name or password');
  return undefined;
}

/** What the admin form sends: the URL only when it changes ('' keeps the stored one), or `clear_webhook`. */
export interface SettingsForm {
  webhook_url?: string;
  clear_webhook: boolean;
  webhook_style: WebhookStyle;
  node_offline_webhook_max: number;
  node_stable_seconds: number;
  smart_owner_email_enabled: boolean;
}

const validateForm = createValidator<SettingsForm>({
  required: Object.keys(SETTINGS_SCHEMA),
  properties: { ...SETTINGS_SCHEMA, webhook_url: { type: 'string' }, clear_webhook: { type: 'boolean', default: false } },
});

/** Validates the admin form against the settings in force; throws ERR_VALIDATION naming each bad field. */
export function settingsFromForm(input: unknown, current: FirewallSettings): FirewallSettings {
  const { webhook_url: url, clear_webhook: clear, ...rest } = validateForm(input);
  const given = (url ?? '').trim();
  const problem = given === '' ? undefined : webhookUrlProblem('webhook_url', given);
  if (problem !== undefined) throw validationError([problem]);
  return { ...rest, webhook_url: clear ? '' : given === '' ? current.webhook_url : given };
}

/** Stored text values to typed settings (the URL already decrypted): booleans are `1`/`0`; a missing or unreadable value takes its default. */
export function parseSettings(rows: Readonly<Record<string, string>>): FirewallSettings {
  const out: Record<string, unknown> = { ...FIREWALL_DEFAULTS };
  for (const [k, def] of Object.entries(FIREWALL_DEFAULTS)) {
    const text = rows[k];
    if (text === undefined) continue;
    if (typeof def === 'boolean') out[k] = text === '1';
    else if (typeof def === 'number') out[k] = /^\d{1,9}$/.test(text) ? Number(text) : def;
    else if (k === 'webhook_style') out[k] = (WEBHOOK_STYLES as readonly string[]).includes(text) ? text : def;
    else out[k] = text;
  }
  return out as unknown as FirewallSettings;
}

/** Typed settings to stored text, key by key (the URL still in plain text: the store encrypts it). */
export function encodeSettings(s: FirewallSettings): [string, string][] {
  return Object.entries(s).map(([k, v]) => [k, typeof v === 'boolean' ? (v ? '1' : '0') : String(v)]);
}

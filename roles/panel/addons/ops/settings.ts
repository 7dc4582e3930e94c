/**
 * The operations suite's settings (spec/2 §2.5): keys, typed defaults, the validation of an admin
 * save, and the conversion between stored text (`1`/`0` for booleans, '' for a null) and typed
 * values. A missing or unreadable row takes its default.
 */
import { createValidator } from '../../services/validation.ts';

export interface OpsSettings {
  naming_pattern: string;
  allocation_page_size: number;
  metrics_retention_days: number;
  upgrade_cpu_threshold: number;
  upgrade_ram_threshold: number;
  upgrade_disk_threshold: number;
  upgrade_window_hours: number;
  upgrade_cooldown_hours: number;
  upgrade_message: string;
  health_crash_threshold: number;
  health_window_hours: number;
  health_retention_days: number;
  node_pressure_warn_pct: number;
  node_pressure_crit_pct: number;
  bulk_move_enabled: boolean;
  /** Null until set through the tags settings route; null reads as hidden. */
  tags_visible_to_users: boolean | null;
}

export const OPS_DEFAULTS: Readonly<OpsSettings> = Object.freeze({
  naming_pattern: '{server_id} - {username}',
  allocation_page_size: 50,
  metrics_retention_days: 90,
  upgrade_cpu_threshold: 85,
  upgrade_ram_threshold: 85,
  upgrade_disk_threshold: 90,
  upgrade_window_hours: 72,
  upgrade_cooldown_hours: 168,
  upgrade_message: 'Your server may benefit from a larger plan based on recent resource usage.',
  health_crash_threshold: 5,
  health_window_hours: 24,
  health_retention_days: 30,
  node_pressure_warn_pct: 75,
  node_pressure_crit_pct: 90,
  bulk_move_enabled: false,
  tags_visible_to_users: false,
});

const int = (minimum: number, maximum: number): { type: 'integer'; minimum: number; maximum: number } => ({ type: 'integer', minimum, maximum });

/** Every key of an admin save (all required; tags_visible_to_users has its own route). */
export const SETTINGS_SCHEMA = {
  naming_pattern: { type: 'string', minLength: 1, maxLength: 191 },
  allocation_page_size: int(10, 200),
  metrics_retention_days: int(7, 3650),
  upgrade_cpu_threshold: int(1, 100),
  upgrade_ram_threshold: int(1, 100),
  upgrade_disk_threshold: int(1, 100),
  upgrade_window_hours: int(1, 8760),
  upgrade_cooldown_hours: int(1, 8760),
  upgrade_message: { type: 'string', minLength: 1, maxLength: 500 },
  health_crash_threshold: int(1, 100),
  health_window_hours: int(1, 168),
  health_retention_days: int(1, 365),
  node_pressure_warn_pct: int(1, 99),
  node_pressure_crit_pct: int(1, 100),
  bulk_move_enabled: { type: 'boolean' },
} as const;

export type SettingsUpdate = Omit<OpsSettings, 'tags_visible_to_users'>;
export const SETTINGS_KEYS = Object.keys(SETTINGS_SCHEMA) as (keyof SettingsUpdate)[];
export const INT_KEYS = SETTINGS_KEYS.filter((k) => SETTINGS_SCHEMA[k].type === 'integer');
export const TEXT_KEYS = SETTINGS_KEYS.filter((k) => SETTINGS_SCHEMA[k].type === 'string');

/** Validates a save: every key but tags_visible_to_users required, ranges per §2.5 (warn/crit order is not checked). */
export const validateSettingsUpdate = createValidator<SettingsUpdate>({ required: SETTINGS_KEYS, properties: SETTINGS_SCHEMA });

/** Validates the tags settings route's one key: a boolean or null. */
export const validateTagsVisibility = createValidator<{ tags_visible_to_users: boolean | null }>({
  required: ['tags_visible_to_users'],
  properties: { tags_visible_to_users: { type: ['boolean', 'null'] } },
});

/** Stored text to typed settings; a missing or malformed value takes its default. Pure. */
export function parseSettings(rows: Readonly<Record<string, string>>): OpsSettings {
  const out: Record<string, unknown> = { ...OPS_DEFAULTS };
  for (const [k, def] of Object.entries(OPS_DEFAULTS)) {
    const text = rows[k];
    if (text === undefined) continue;
    if (k === 'tags_visible_to_users') out[k] = text === '' ? null : text === '1';
    else if (typeof def === 'boolean') out[k] = text === '1';
    else if (typeof def === 'number') {
      if (/^\d{1,9}$/.test(text)) out[k] = Number(text);
    } else out[k] = text;
  }
  return out as unknown as OpsSettings;
}

/** Typed values to stored text, key by key. Pure. */
export function encodeSettings(s: Partial<OpsSettings>): [string, string][] {
  return Object.entries(s).map(([k, v]) => [k, v === null ? '' : typeof v === 'boolean' ? (v ? '1' : '0') : String(v)]);
}

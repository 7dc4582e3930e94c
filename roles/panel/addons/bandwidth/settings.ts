/**
 * The addon's global settings (spec/1 §2.8): keys, seeded defaults, ranges, and the validation of
 * the settings form. `config_version` is not a setting anyone edits: the store bumps it.
 */
import { isTimeZone, zoneNameCase } from '../../../../src/lib/calendar.ts';
import { createValidator, validationError } from '../../services/validation.ts';

export const EXCEED_ACTIONS = ['throttle', 'suspend', 'none'] as const;
export type ExceedAction = (typeof EXCEED_ACTIONS)[number];

export interface BandwidthSettings {
  default_rx_speed_mbps: number;
  default_tx_speed_mbps: number;
  default_exceed_action: ExceedAction;
  default_throttle_rx_mbps: number;
  default_throttle_tx_mbps: number;
  default_rx_quota_day_gb: number;
  default_rx_quota_week_gb: number;
  default_rx_quota_month_gb: number;
  default_tx_quota_day_gb: number;
  default_tx_quota_week_gb: number;
  default_tx_quota_month_gb: number;
  timezone: string;
  poll_interval_seconds: number;
  retention_days_hourly: number;
  retention_days_daily: number;
  events_retention_days: number;
  rename_on_quota_suspend: boolean;
}

export const SETTING_DEFAULTS: Readonly<BandwidthSettings> = {
  default_rx_speed_mbps: 0,
  default_tx_speed_mbps: 0,
  default_exceed_action: 'throttle',
  default_throttle_rx_mbps: 5,
  default_throttle_tx_mbps: 5,
  default_rx_quota_day_gb: 0,
  default_rx_quota_week_gb: 0,
  default_rx_quota_month_gb: 0,
  default_tx_quota_day_gb: 0,
  default_tx_quota_week_gb: 0,
  default_tx_quota_month_gb: 0,
  timezone: 'UTC',
  poll_interval_seconds: 60,
  retention_days_hourly: 90,
  retention_days_daily: 730,
  events_retention_days: 180,
  rename_on_quota_suspend: false,
};

const SPEED = { type: 'integer', minimum: 0, maximum: 1_000_000 };
const THROTTLE = { type: 'integer', minimum: 1, maximum: 1_000_000 };
const QUOTA = { type: 'integer', minimum: 0, maximum: 1_000_000 };

/** Ranges of spec/1 §2.8 (quotas have none there: capped at a million GiB to stay an integer everywhere). */
export const SETTING_SCHEMA = {
  default_rx_speed_mbps: SPEED,
  default_tx_speed_mbps: SPEED,
  default_exceed_action: { enum: EXCEED_ACTIONS },
  default_throttle_rx_mbps: THROTTLE,
  default_throttle_tx_mbps: THROTTLE,
  default_rx_quota_day_gb: QUOTA,
  default_rx_quota_week_gb: QUOTA,
  default_rx_quota_month_gb: QUOTA,
  default_tx_quota_day_gb: QUOTA,
  default_tx_quota_week_gb: QUOTA,
  default_tx_quota_month_gb: QUOTA,
  timezone: { type: 'string', minLength: 1, maxLength: 64 },
  poll_interval_seconds: { type: 'integer', minimum: 15, maximum: 3600 },
  retention_days_hourly: { type: 'integer', minimum: 1, maximum: 3650 },
  retention_days_daily: { type: 'integer', minimum: 1, maximum: 7300 },
  events_retention_days: { type: 'integer', minimum: 1, maximum: 100_000 },
  rename_on_quota_suspend: { type: 'boolean' },
} as const;

const validate = createValidator<BandwidthSettings>({ required: Object.keys(SETTING_SCHEMA), properties: SETTING_SCHEMA });

/** Validates a complete settings object (the form sends every field); throws ERR_VALIDATION. */
export function validateSettings(input: unknown): BandwidthSettings {
  const v = validate(input);
  if (!isTimeZone(v.timezone)) throw validationError([{ field: 'timezone', rule: 'timezone', detail: 'the timezone field must be an IANA time zone name such as Europe/Berlin' }]);
  // Stored and pushed in one spelling: the agent takes another spelling for a zone switch.
  return { ...v, timezone: zoneNameCase(v.timezone) };
}

/** Turns stored text values into typed settings (unknown keys ignored, missing ones defaulted). */
export function parseSettings(rows: Record<string, string>): BandwidthSettings {
  const out: Record<string, unknown> = { ...SETTING_DEFAULTS };
  for (const [k, def] of Object.entries(SETTING_DEFAULTS)) {
    const text = rows[k];
    if (text === undefined) continue;
    out[k] = typeof def === 'number' ? Number(text) : typeof def === 'boolean' ? text === '1' : text;
  }
  return out as unknown as BandwidthSettings;
}

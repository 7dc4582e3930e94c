/**
 * The trash bin's global settings (spec/2 §2.3): keys, built-in defaults, ranges, the admin form's
 * MB field, and the conversions between stored text (`1`/`0` for booleans) and typed values.
 */
import { MIB } from '../../../../src/lib/units.ts';
import { createValidator } from '../../services/validation.ts';

export interface TrashSettings {
  enabled: boolean;
  retention_hours: number;
  default_max_bytes_per_server: number;
  max_files_per_delete: number;
  purge_batch_size: number;
  logging_enabled: boolean;
  protect_trash_dir: boolean;
}

/** The table's defaults: seeded by the migration, and used whole when the store cannot be read. */
export const TRASH_DEFAULTS: Readonly<TrashSettings> = Object.freeze({
  enabled: true,
  retention_hours: 24,
  default_max_bytes_per_server: 0,
  max_files_per_delete: 100,
  purge_batch_size: 200,
  logging_enabled: true,
  protect_trash_dir: true,
});

export const RETENTION_HOURS = { type: 'integer', minimum: 1, maximum: 8760 } as const;
/** The admin forms take sizes in MB: 0 to 10,485,760 MB (10 TiB), stored as bytes. */
export const SIZE_MB = { type: 'integer', minimum: 0, maximum: 10_485_760 } as const;

/** The admin settings form: the seven settings, the per-server size in MB. */
export const SETTINGS_FORM_SCHEMA = {
  enabled: { type: 'boolean' },
  retention_hours: RETENTION_HOURS,
  default_max_mb_per_server: SIZE_MB,
  max_files_per_delete: { type: 'integer', minimum: 1, maximum: 10_000 },
  purge_batch_size: { type: 'integer', minimum: 50, maximum: 5000 },
  logging_enabled: { type: 'boolean' },
  protect_trash_dir: { type: 'boolean' },
} as const;

type SettingsForm = Omit<TrashSettings, 'default_max_bytes_per_server'> & { default_max_mb_per_server: number };
const validateForm = createValidator<SettingsForm>({ required: Object.keys(SETTINGS_FORM_SCHEMA), properties: SETTINGS_FORM_SCHEMA });

/** Validates the admin form (every field required, ranges per §2.3; throws ERR_VALIDATION naming each bad field) and converts MB to bytes. */
export function settingsFromForm(input: unknown): TrashSettings {
  const { default_max_mb_per_server: mb, ...rest } = validateForm(input);
  return { ...rest, default_max_bytes_per_server: mb * MIB };
}

/** Stored text values to typed settings: booleans are `1`/`0`; a missing or unreadable value takes its default. */
export function parseSettings(rows: Readonly<Record<string, string>>): TrashSettings {
  const out: Record<string, unknown> = { ...TRASH_DEFAULTS };
  for (const [k, def] of Object.entries(TRASH_DEFAULTS)) {
    const text = rows[k];
    if (text === undefined) continue;
    if (typeof def === 'boolean') out[k] = text === '1';
    else if (/^\d{1,16}$/.test(text)) out[k] = Number(text);
  }
  return out as unknown as TrashSettings;
}

/** Typed settings to stored text, key by key. */
export function encodeSettings(s: TrashSettings): [string, string][] {
  return Object.entries(s).map(([k, v]) => [k, typeof v === 'boolean' ? (v ? '1' : '0') : String(v)]);
}

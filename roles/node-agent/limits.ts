/**
 * Turns a limits payload (PUT /limits, or the panel's GET /limits) into the agent's effective
 * limits: each entry validated on its own (a bad entry counts as failed, spec/1 §4.1 rule 5),
 * missing fields taken from the override-row defaults of spec/1 §2.9.
 */
import { isTimeZone } from '../../src/lib/calendar.ts';
import { firstFailure } from '../../src/lib/api-envelope.ts';
import { validateLimitsPayload } from '../../src/contracts/validators.js';
import type { Limits } from './accounting.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const INT_FIELDS = [
  'rx_speed_mbps',
  'tx_speed_mbps',
  'rx_quota_day_gb',
  'rx_quota_week_gb',
  'rx_quota_month_gb',
  'tx_quota_day_gb',
  'tx_quota_week_gb',
  'tx_quota_month_gb',
  'throttle_rx_mbps',
  'throttle_tx_mbps',
] as const;

// A speed above this (1 Tbit/s, beyond any NIC) is a typo: tc cannot take it, so the entry fails
// instead of being reported applied and then refused by tc on every cycle.
export const MAX_SPEED_MBPS = 1_000_000;
const SPEED_FIELDS: ReadonlySet<string> = new Set(['rx_speed_mbps', 'tx_speed_mbps', 'throttle_rx_mbps', 'throttle_tx_mbps']);

/** The override-row defaults of spec/1 §2.9: what a limits entry's missing fields become. */
export const LIMIT_DEFAULTS: Readonly<Omit<Limits, 'uuid'>> = {
  enabled: true,
  rx_speed_mbps: 0,
  tx_speed_mbps: 0,
  rx_quota_day_gb: 0,
  rx_quota_week_gb: 0,
  rx_quota_month_gb: 0,
  tx_quota_day_gb: 0,
  tx_quota_week_gb: 0,
  tx_quota_month_gb: 0,
  exceed_action: 'throttle',
  throttle_rx_mbps: 5,
  throttle_tx_mbps: 5,
  smart: false,
};

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** One entry: the effective limits, or why it failed. */
export function normalizeEntry(raw: unknown): Limits | string {
  if (!isObject(raw)) return 'entry is not an object';
  const e = raw;
  if (typeof e['uuid'] !== 'string' || !UUID.test(e['uuid'])) return 'uuid missing or not a UUID';
  const out: Limits = { ...LIMIT_DEFAULTS, uuid: e['uuid'].toLowerCase() };
  for (const f of ['enabled', 'smart'] as const) {
    const v = e[f];
    if (v === undefined) continue;
    if (typeof v !== 'boolean') return `${f} must be a boolean`;
    out[f] = v;
  }
  for (const f of INT_FIELDS) {
    const v = e[f];
    if (v === undefined) continue;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) return `${f} must be a non-negative integer`;
    if (SPEED_FIELDS.has(f) && v > MAX_SPEED_MBPS) return `${f} must be at most ${MAX_SPEED_MBPS} (1 Tbit/s)`;
    out[f] = v;
  }
  const action = e['exceed_action'];
  if (action !== undefined) {
    if (action !== 'throttle' && action !== 'suspend' && action !== 'none') return 'exceed_action must be throttle, suspend or none';
    out.exceed_action = action;
  }
  return out;
}

export interface NormalizedLimits {
  configVersion: number;
  timezone: string | null;
  servers: Limits[];
  failed: { index: number; reason: string }[];
}

/**
 * The whole payload. Returns an error string for what fails the whole request: a payload the
 * contract's validator refuses at the top level (not an object, config_version or servers
 * missing or of the wrong type: nothing is replaced), or an unknown time zone (the previous one
 * stays). The entries are not the validator's: each is checked by normalizeEntry, so a bad one
 * counts as failed without failing the request (spec/1 §4.1 rule 5).
 */
export function normalizeLimits(payload: unknown): NormalizedLimits | string {
  const top = isObject(payload) && Array.isArray(payload['servers']) ? { ...payload, servers: [] } : payload;
  if (!validateLimitsPayload(top)) return `invalid limits payload: ${firstFailure(validateLimitsPayload.errors)}`;
  const version = top.config_version;
  const entries = (payload as { servers: unknown[] }).servers;
  let timezone: string | null = null;
  if (top.timezone !== undefined && top.timezone !== '') {
    if (!isTimeZone(top.timezone)) return `unknown timezone ${JSON.stringify(top.timezone)}; the previous timezone stays`;
    timezone = top.timezone;
  }
  const servers: Limits[] = [];
  const failed: { index: number; reason: string }[] = [];
  const seen = new Set<string>();
  entries.forEach((raw, index) => {
    const entry = normalizeEntry(raw);
    if (typeof entry === 'string') failed.push({ index, reason: entry });
    else if (seen.has(entry.uuid)) failed.push({ index, reason: `duplicate uuid ${entry.uuid}` });
    else {
      seen.add(entry.uuid);
      servers.push(entry);
    }
  });
  return { configVersion: version, timezone, servers, failed };
}

/**
 * Effective limits (spec/1 §2.9): a server with an override row takes the whole row, one without
 * takes the live global defaults, never a mix; and the limits payload (§2.5) a node receives for
 * its own servers.
 */
import type { LimitsPayload, ServerLimitsEntry } from '../../../../src/contracts/types.ts';
import type { ServerRow } from '../../store/records.ts';
import type { BandwidthSettings } from './settings.ts';
import type { OverrideRow } from './store.ts';

/** A server's bandwidth limits (the entry without its uuid, and without `smart`, which is the firewall addon's). */
export type Effective = Omit<ServerLimitsEntry, 'uuid' | 'smart'>;

/** The defaults as a limits entry (enabled: the global defaults always enforce). */
export function defaultLimits(s: BandwidthSettings): Effective {
  return {
    enabled: true,
    rx_speed_mbps: s.default_rx_speed_mbps,
    tx_speed_mbps: s.default_tx_speed_mbps,
    rx_quota_day_gb: s.default_rx_quota_day_gb,
    rx_quota_week_gb: s.default_rx_quota_week_gb,
    rx_quota_month_gb: s.default_rx_quota_month_gb,
    tx_quota_day_gb: s.default_tx_quota_day_gb,
    tx_quota_week_gb: s.default_tx_quota_week_gb,
    tx_quota_month_gb: s.default_tx_quota_month_gb,
    exceed_action: s.default_exceed_action,
    throttle_rx_mbps: s.default_throttle_rx_mbps,
    throttle_tx_mbps: s.default_throttle_tx_mbps,
  };
}

/** An override row as a limits entry. */
export function overrideLimits(o: OverrideRow): Effective {
  return {
    enabled: o.enabled === 1,
    rx_speed_mbps: o.rx_speed_mbps,
    tx_speed_mbps: o.tx_speed_mbps,
    rx_quota_day_gb: o.rx_quota_day_gb,
    rx_quota_week_gb: o.rx_quota_week_gb,
    rx_quota_month_gb: o.rx_quota_month_gb,
    tx_quota_day_gb: o.tx_quota_day_gb,
    tx_quota_week_gb: o.tx_quota_week_gb,
    tx_quota_month_gb: o.tx_quota_month_gb,
    exceed_action: o.exceed_action,
    throttle_rx_mbps: o.throttle_rx_mbps,
    throttle_tx_mbps: o.throttle_tx_mbps,
  };
}

/** A server's effective limits. Pure. */
export function effectiveLimits(settings: BandwidthSettings, override: OverrideRow | undefined): Effective {
  return override === undefined ? defaultLimits(settings) : overrideLimits(override);
}

/**
 * The payload for one node: its servers with their effective limits, and the fields other addons
 * add to an entry (`extras`, by server id: the firewall's `smart`). Pure.
 */
export function limitsPayload(
  configVersion: number,
  settings: BandwidthSettings,
  servers: readonly ServerRow[],
  overrides: ReadonlyMap<number, OverrideRow>,
  extras: ReadonlyMap<number, Partial<ServerLimitsEntry>> = new Map(),
): LimitsPayload {
  return {
    config_version: configVersion,
    timezone: settings.timezone,
    servers: servers.map((s) => ({ ...extras.get(s.id), uuid: s.uuid, ...effectiveLimits(settings, overrides.get(s.id)) })),
  };
}

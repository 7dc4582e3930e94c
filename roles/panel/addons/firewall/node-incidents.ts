/**
 * Offline incidents of a node, for the admin alerts (spec/3 §2.10 node_offline_webhook_max): an
 * incident starts when the node goes offline and ends once it has stayed online for the stable
 * time (node_stable_seconds); a flapping node stays in one incident. Each offline transition is
 * counted, the first `max` of an incident are announced, and the end is announced once. Pure.
 */

export interface NodeIncident {
  started_at: string;
  /** 1 while the node is offline. */
  offline: number;
  /** Offline transitions of this incident. */
  offline_count: number;
  /** Offline alerts queued for this incident (at most the max). */
  offline_alerts: number;
  /** When the node came back, while it is online inside the incident; else null. */
  online_since: string | null;
}

/** An offline transition: the incident it opens or continues, and whether this one is announced. */
export function wentOffline(incident: NodeIncident | undefined, at: string, max: number): { incident: NodeIncident; announce: boolean } {
  const current = incident ?? { started_at: at, offline: 0, offline_count: 0, offline_alerts: 0, online_since: null };
  const announce = current.offline_alerts < max;
  return {
    incident: { ...current, offline: 1, offline_count: current.offline_count + 1, offline_alerts: current.offline_alerts + (announce ? 1 : 0), online_since: null },
    announce,
  };
}

/** An online transition: the incident goes on with the node online since `at`; none without an incident (a first registration). */
export function cameOnline(incident: NodeIncident | undefined, at: string): NodeIncident | undefined {
  return incident === undefined ? undefined : { ...incident, offline: 0, online_since: at };
}

/** True when the node has been online for the stable time (`nowMs` past online_since + stableSeconds): the incident ends and its return is announced. */
export function isOver(incident: NodeIncident, nowMs: number, stableSeconds: number): boolean {
  return incident.offline === 0 && incident.online_since !== null && nowMs - Date.parse(incident.online_since) >= stableSeconds * 1000;
}

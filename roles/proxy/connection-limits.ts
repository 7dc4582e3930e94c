/**
 * The connections phase (spec/3 §2.5 `connections.per_ip`, `connections.per_site`): in-flight
 * requests per client IP and per site, counted in the shared ConnectionSlots where a live tunnel
 * also holds a slot. A request that passes takes a slot and gives it back when its response is
 * over, whatever the outcome (the data plane runs onRequestDone work on every exit path: answer,
 * origin failure, client abort; an upgrade's slot passes to its tunnel at the 101).
 */
import type { ConnectionSlots } from './connection-slots.ts';
import { onRequestDone, type RequestContext } from './request-context.ts';
import { ALLOW, deny, type Verdict } from './verdict.ts';

/** Rule ids of this phase; also written in docs/proxy-admin-api.md. */
export const CONN_RULES = { perIp: 'conn.per_ip', perSite: 'conn.per_site' } as const;

// One client holding too many requests open is that client's doing (429); a full site is the
// server's capacity (503). Both ask to retry after a second: slots free up as responses end.
const PER_IP_FULL = deny(429, CONN_RULES.perIp, { 'retry-after': '1' });
const PER_SITE_FULL = deny(503, CONN_RULES.perSite, { 'retry-after': '1' });

/** The site's connections check, or undefined when both limits are 0 (unlimited). */
export function createConnectionLimits(opts: { siteId: string; perIp: number; perSite: number; slots: ConnectionSlots }): ((ctx: RequestContext) => Verdict) | undefined {
  const { siteId, perIp, perSite, slots } = opts;
  if (perIp <= 0 && perSite <= 0) return undefined;
  return function connectionLimits(ctx) {
    const slot = slots.tryAcquire(siteId, ctx.clientIp, perIp, perSite);
    if (slot === 'per_ip') return PER_IP_FULL;
    if (slot === 'per_site') return PER_SITE_FULL;
    onRequestDone(ctx, slot);
    return ALLOW;
  };
}

/**
 * Active-connection slots per site and per client IP. A live WebSocket tunnel holds one slot from
 * the origin's 101 until it closes (spec/3 §2.6); the connections phase (connection-limits.ts)
 * makes each in-flight request hold one too, so `connections.per_ip` / `per_site` count both.
 * Slots outlive config generations.
 */

export interface ConnectionSlots {
  /** Takes a slot; the returned function gives it back and does nothing when called again. */
  acquire(siteId: string, ip: string): () => void;
  /** Slots held for the site. */
  site(siteId: string): number;
  /** Slots held by one client IP on the site. */
  ip(siteId: string, ip: string): number;
}

/** Creates the counters; runs once at start. */
export function createConnectionSlots(): ConnectionSlots {
  const bySite = new Map<string, number>();
  const byIp = new Map<string, number>();

  function bump(map: Map<string, number>, key: string, by: number): void {
    const n = (map.get(key) ?? 0) + by;
    if (n <= 0) map.delete(key);
    else map.set(key, n);
  }

  return {
    acquire(siteId, ip) {
      const ipKey = `${siteId}\0${ip}`;
      bump(bySite, siteId, 1);
      bump(byIp, ipKey, 1);
      let held = true;
      return function releaseSlot() {
        if (!held) return;
        held = false;
        bump(bySite, siteId, -1);
        bump(byIp, ipKey, -1);
      };
    },
    site: (siteId) => bySite.get(siteId) ?? 0,
    ip: (siteId, ip) => byIp.get(`${siteId}\0${ip}`) ?? 0,
  };
}

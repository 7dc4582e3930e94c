/**
 * Active-connection slots per site and per client IP. A live WebSocket tunnel holds one slot from
 * the origin's 101 until it closes (spec/3 §2.6); the connections phase (connection-limits.ts)
 * makes each in-flight request hold one too, so `connections.per_ip` / `per_site` count both.
 * The counts live in the shared table, so every worker sees every slot; they outlive config
 * generations.
 */
import { SharedTable } from './shared-table.ts';
import { wallNow } from './read-clock.ts';

export interface ConnectionSlots {
  /** Takes a slot; the returned function gives it back and does nothing when called again. */
  acquire(siteId: string, ip: string): () => void;
  /**
   * Takes a slot unless the IP already holds `perIp` or the site `perSite` (0 = unlimited); the
   * test and the take are one step, so workers racing for the last slot cannot both get it.
   */
  tryAcquire(siteId: string, ip: string, perIp: number, perSite: number): (() => void) | 'per_ip' | 'per_site';
  /** Slots held for the site. */
  site(siteId: string): number;
}

// Keys: SITE + site id, and the site's IP prefix (`ci\0<site>\0`) + IP, each passed to the table
// in two parts so no key is joined per request.
const SITE = 'cs\0';

/** Creates the counters in `table`; runs once per thread at start. */
export function createConnectionSlots(table: SharedTable = SharedTable.create()): ConnectionSlots {
  // Per-site IP key prefixes, one per site id seen (bounded: a long run's renamed sites).
  const ipPrefixes = new Map<string, string>();
  const ipPrefixOf = (siteId: string): string => {
    let p = ipPrefixes.get(siteId);
    if (p === undefined) {
      if (ipPrefixes.size >= 4096) ipPrefixes.clear();
      ipPrefixes.set(siteId, (p = `ci\0${siteId}\0`));
    }
    return p;
  };
  // Both run under the table's lock.
  function countOf(key: string, suffix: string, now: number): number {
    const at = table.find(key, now, false, suffix);
    return at === -1 ? 0 : (table.values[at + 1] as number);
  }
  /** Adds `by` to the count under `key` + `suffix`; an entry is deleted at zero. False when the table is full. */
  function bump(key: string, suffix: string, by: number, now: number): boolean {
    const at = table.find(key, now, by > 0, suffix);
    if (at === -1) return false;
    const n = (table.values[at + 1] as number) + by;
    if (n <= 0) table.remove(at);
    else table.values[at + 1] = n;
    return true;
  }

  /** The release of a slot taken for `siteId` and `ip` (each only when held: a full table holds none). */
  function releaseOf(siteId: string, ipPrefix: string, ip: string, heldSite: boolean, heldIp: boolean): () => void {
    return function releaseSlot() {
      if (!heldSite && !heldIp) return;
      const t = wallNow();
      table.lock();
      if (heldSite) bump(SITE, siteId, -1, t);
      if (heldIp) bump(ipPrefix, ip, -1, t);
      table.unlock();
      heldSite = heldIp = false;
    };
  }

  return {
    acquire(siteId, ip) {
      const ipPrefix = ipPrefixOf(siteId);
      const now = wallNow();
      table.lock();
      const release = releaseOf(siteId, ipPrefix, ip, bump(SITE, siteId, 1, now), bump(ipPrefix, ip, 1, now));
      table.unlock();
      return release;
    },
    tryAcquire(siteId, ip, perIp, perSite) {
      const ipPrefix = ipPrefixOf(siteId);
      const now = wallNow();
      const v = table.values;
      table.lock();
      // Each count is read and taken in one find (a find may move other entries, so an entry's
      // position is used only until the next find). A refusal gives back what it took.
      const ipAt = table.find(ipPrefix, now, true, ip);
      if (ipAt !== -1 && perIp > 0 && (v[ipAt + 1] as number) >= perIp) {
        table.unlock();
        return 'per_ip';
      }
      if (ipAt !== -1) v[ipAt + 1] = (v[ipAt + 1] as number) + 1;
      const siteAt = table.find(SITE, now, true, siteId);
      if (siteAt !== -1 && perSite > 0 && (v[siteAt + 1] as number) >= perSite) {
        if (ipAt !== -1) bump(ipPrefix, ip, -1, now);
        table.unlock();
        return 'per_site';
      }
      if (siteAt !== -1) v[siteAt + 1] = (v[siteAt + 1] as number) + 1;
      table.unlock();
      return releaseOf(siteId, ipPrefix, ip, siteAt !== -1, ipAt !== -1);
    },
    site(siteId) {
      table.lock();
      const n = countOf(SITE, siteId, Date.now());
      table.unlock();
      return n;
    },
  };
}

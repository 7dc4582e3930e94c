/**
 * Login throttling: at most 5 attempts that are not followed by a success per account (whether
 * named by username or email; an unknown login string counts on its own) and source IP in a
 * sliding 15-minute window; the next attempt is refused with 429 until the oldest leaves the
 * window. An attempt counts when it starts, before the password or code is checked, so requests
 * sent in parallel cannot all slip in before the first failure is recorded; a success forgets the
 * key's attempts. The checkpoint and the password check of the account pages count under their
 * own keys the same way. Kept in memory: a restart forgets it, and several panel processes each
 * count on their own (acceptable for a panel that runs as one process; a shared store would be
 * needed behind a load balancer).
 */

export interface LoginThrottle {
  /**
   * Takes an attempt for the key: 0 when it may go ahead (and it now counts), else the seconds
   * until one may (nothing counted).
   */
  take(key: string): number;
  /** Forgets the attempts of a key (after a success). */
  reset(key: string): void;
}

export interface ThrottleOptions {
  limit?: number;
  windowMs?: number;
  /**
   * Most keys kept (bounded memory under a spray attack); beyond it the stalest key that is not
   * at its limit goes first, so a spray of made-up names cannot flush a blocked account's count.
   */
  maxKeys?: number;
  now?: () => number;
}

/** Creates one throttle (one per panel web app; the trash bin's request limits use it too). */
export function createLoginThrottle(opts: ThrottleOptions = {}): LoginThrottle {
  const limit = opts.limit ?? 5;
  const windowMs = opts.windowMs ?? 15 * 60_000;
  const maxKeys = opts.maxKeys ?? 10_000;
  const now = opts.now ?? Date.now;
  const attempts = new Map<string, number[]>();

  const recent = (key: string, t: number): number[] => {
    const list = (attempts.get(key) ?? []).filter((at) => t - at < windowMs);
    if (list.length === 0) attempts.delete(key);
    else attempts.set(key, list);
    return list;
  };

  // Map iteration is insertion order and take() re-inserts: the first keys are the stalest.
  const evict = (t: number): void => {
    for (const key of attempts.keys()) {
      if (recent(key, t).length < limit) {
        attempts.delete(key);
        return;
      }
    }
    const oldest = attempts.keys().next().value;
    if (oldest !== undefined) attempts.delete(oldest);
  };

  return {
    take(key) {
      const t = now();
      const list = recent(key, t);
      if (list.length >= limit) return Math.max(1, Math.ceil(((list[list.length - limit] ?? t) + windowMs - t) / 1000));
      list.push(t);
      attempts.delete(key);
      attempts.set(key, list);
      while (attempts.size > maxKeys) evict(t);
      return 0;
    },
    reset(key) {
      attempts.delete(key);
    },
  };
}

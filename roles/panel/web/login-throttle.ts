/**
 * Login throttling: at most 5 failed attempts per account (whether named by username or email;
 * an unknown login string counts on its own) and source IP in a sliding 15-minute
 * window; the next attempt is refused with 429 until the oldest failure leaves the window. The
 * checkpoint counts its failed codes under its own key the same way. Kept in memory: a restart
 * forgets it, and several panel processes each count on their own (acceptable for a panel that
 * runs as one process; a shared store would be needed behind a load balancer).
 */

export interface LoginThrottle {
  /** Seconds until another attempt is allowed, 0 when it is allowed now. */
  retryAfter(key: string): number;
  /** Records a failed attempt. */
  fail(key: string): void;
  /** Forgets the failures of a key (after a successful login). */
  reset(key: string): void;
}

export interface ThrottleOptions {
  limit?: number;
  windowMs?: number;
  /** Most keys kept; beyond it the stalest keys are dropped (bounded memory under a spray attack). */
  maxKeys?: number;
  now?: () => number;
}

/** Creates one throttle (one per panel web app). */
export function createLoginThrottle(opts: ThrottleOptions = {}): LoginThrottle {
  const limit = opts.limit ?? 5;
  const windowMs = opts.windowMs ?? 15 * 60_000;
  const maxKeys = opts.maxKeys ?? 10_000;
  const now = opts.now ?? Date.now;
  const failures = new Map<string, number[]>();

  const recent = (key: string, t: number): number[] => {
    const list = (failures.get(key) ?? []).filter((at) => t - at < windowMs);
    if (list.length === 0) failures.delete(key);
    else failures.set(key, list);
    return list;
  };

  return {
    retryAfter(key) {
      const t = now();
      const list = recent(key, t);
      if (list.length < limit) return 0;
      return Math.max(1, Math.ceil(((list[list.length - limit] ?? t) + windowMs - t) / 1000));
    },
    fail(key) {
      const t = now();
      const list = recent(key, t);
      list.push(t);
      failures.delete(key);
      failures.set(key, list);
      // Map iteration is insertion order and fail() re-inserts: the first keys are the stalest.
      while (failures.size > maxKeys) {
        const oldest = failures.keys().next().value;
        if (oldest === undefined) break;
        failures.delete(oldest);
      }
    },
    reset(key) {
      failures.delete(key);
    },
  };
}

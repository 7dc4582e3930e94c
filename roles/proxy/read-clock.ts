/**
 * The data plane's clock, read at most once per socket read. A plain request reads the time a
 * dozen times (its deadlines, its event's time and duration, the quota window, the rate meters,
 * the origin's backoff), and one read of either clock costs about 45 ns in node, 4-5% of a
 * worker's own time per request. The shared-buffer read callbacks of client and origin
 * connections (nearly all requests' work runs inside them) mark their start and end; inside one,
 * the first read of each clock is kept and reused, so every time taken there is the read's
 * arrival. Anywhere else each call reads the clock.
 */

let inRead = false;
let mono = Number.NaN;
let wall = Number.NaN;

/** A read callback starts: the clocks are read afresh on first use. */
export function readStarted(): void {
  inRead = true;
  mono = Number.NaN;
  wall = Number.NaN;
}

/** The read callback is over: calls read the clocks again. */
export function readEnded(): void {
  inRead = false;
}

/** performance.now(), the read's when inside one. */
export function monoNow(): number {
  if (!inRead) return performance.now();
  if (Number.isNaN(mono)) mono = performance.now();
  return mono;
}

/** Date.now(), the read's when inside one. */
export function wallNow(): number {
  if (!inRead) return Date.now();
  if (Number.isNaN(wall)) wall = Date.now();
  return wall;
}

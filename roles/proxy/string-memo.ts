// V8 copies substrings shorter than this instead of pointing into their parent.
const SLICE_MIN = 13;

/** `s` as a string of its own: not a slice that keeps a larger string (a whole head) alive. */
function detached(s: string): string {
  // Slicing a joined string copies it first, so the result refers to nothing larger.
  return s.length < SLICE_MIN ? s : ` ${s}`.slice(1);
}

/**
 * Remembers a pure function of a string for the last distinct inputs: user-agent tests run
 * several regular expressions per request, while real traffic repeats a few hundred user agents.
 * Bounded: when `max` inputs are remembered the memory starts over, so a client cycling through
 * endless distinct values costs what no memo would, never more memory. Inputs are kept as copies
 * of their own: a header value or target is a slice of its whole request head, which the memo
 * would otherwise keep alive.
 */
export function memoizeString<T>(fn: (input: string) => T, max = 1024): (input: string) => T {
  const seen = new Map<string, T>();
  return function remembered(input) {
    let v = seen.get(input);
    if (v === undefined && !seen.has(input)) {
      v = fn(input);
      if (seen.size >= max) seen.clear();
      seen.set(detached(input), v);
    }
    return v as T;
  };
}

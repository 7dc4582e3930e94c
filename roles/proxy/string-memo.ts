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
      // Slicing a joined string copies it first, so the kept key refers to nothing larger.
      seen.set(` ${input}`.slice(1), v);
    }
    return v as T;
  };
}

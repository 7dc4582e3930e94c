/**
 * The node agent's memory profile: V8 told to favour memory over speed. `--optimize-for-size`
 * gives smaller heap growth steps; `--no-maglev --no-opt` leave the agent's JavaScript to the
 * interpreter and the baseline compiler (Sparkplug), so the optimizing compilers' code is never
 * paged in and their output never allocated. With 1,000 servers that is about 66 instead of 80
 * MiB of RSS for a cycle of about 30-40 ms of CPU, inside its 50 ms budget (docs/benchmarks.md).
 * NODE_OPTIONS refuses these flags and the executable's own flags would apply to every role, so
 * the agent sets them on itself, first thing, before its modules load.
 */
import { setFlagsFromString } from 'node:v8';

/** Runs once, when `bandwidth-node serve` starts, before the daemon's modules load (and in its benchmark). */
export function useAgentMemoryProfile(): void {
  setFlagsFromString('--optimize-for-size --no-maglev --no-opt');
}

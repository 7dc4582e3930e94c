/**
 * The node agent's memory profile: V8 told to favour memory over speed (`--optimize-for-size`:
 * smaller heap growth steps, less eager optimization). With 1,000 servers the agent's RSS goes
 * from about 100 to 77 MiB for a cycle about 30% slower, still well inside its CPU budget
 * (docs/benchmarks.md). NODE_OPTIONS refuses this V8 flag and the executable's own flags would
 * apply to every role, so the agent sets it on itself, first thing, before it allocates.
 */
import { setFlagsFromString } from 'node:v8';

/** Runs once, when `bandwidth-node serve` starts, before the daemon's modules load (and in its benchmark). */
export function useAgentMemoryProfile(): void {
  setFlagsFromString('--optimize-for-size');
}

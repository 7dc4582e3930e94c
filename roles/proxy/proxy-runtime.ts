/**
 * The running configuration: the last good files (config-state.ts) and the generation compiled
 * from them. A reload builds a complete new generation first and only then swaps it in (one
 * assignment), so requests see either the old or the new config, never a mix; a build that fails
 * keeps the old generation.
 */
import type { Logger } from 'pino';
import type { ProxyGlobalConfig } from '../../src/contracts/types.ts';
import { errorMessage } from '../../src/core/app-error.ts';
import { createConfigState, type ConfigState } from './config-state.ts';
import { buildGeneration, type Generation } from './generation.ts';
import type { OriginPools } from './origin-pools.ts';
import type { PipelineServices } from './pipeline.ts';

export interface ReloadOutcome {
  /** True when a new generation was swapped in. */
  swapped: boolean;
  generation: Generation;
  /** Files whose current text fails to load (their last good version, if any, still serves). */
  broken: { file: string; problems: { path: string; message: string }[] }[];
  /** Global keys changed on disk that need a restart. */
  restartRequired: string[];
}

export interface ProxyRuntime {
  readonly state: ConfigState;
  current(): Generation;
  /**
   * Re-reads changed files (every file and certificate with `force`) and swaps in a new
   * generation when anything changed. Runs from the file watcher, the admin API and the hourly
   * certificate timer; calls never overlap (all synchronous).
   */
  reload(opts: { force: boolean; reason: string }): ReloadOutcome;
  /** Called with each new generation after it is swapped in. */
  onSwap(listener: (gen: Generation) => void): void;
}

/**
 * Loads the files and builds the first generation; runs once at start (throws on a bad
 * config.yaml). `services` makes the state that outlives generations, from the start-up config
 * (its data_dir), before the first generation is compiled.
 */
export function createProxyRuntime(opts: { root: string; logger: Logger; pools: OriginPools; services: (startGlobal: Readonly<ProxyGlobalConfig>) => PipelineServices }): ProxyRuntime {
  const { root, logger, pools } = opts;
  const state = createConfigState({ root, logger });
  const services = opts.services(state.startGlobal);
  const listeners: ((gen: Generation) => void)[] = [];
  let generation = buildGeneration({ number: 1, root, global: state.global(), sites: state.sites(), previous: undefined, pools, services, logger });

  function outcome(swapped: boolean): ReloadOutcome {
    return {
      swapped,
      generation,
      broken: [...state.broken()].map(([file, err]) => ({ file, problems: err.problems })),
      restartRequired: state.pendingRestart(),
    };
  }

  return {
    state,
    current: () => generation,
    reload({ force, reason }) {
      const changed = state.refresh(force);
      if (!changed && !force) return outcome(false);
      let next: Generation;
      try {
        next = buildGeneration({ number: generation.number + 1, root, global: state.global(), sites: state.sites(), previous: generation, pools, services, logger });
      } catch (err) {
        logger.error({ err: errorMessage(err), reason }, 'building the new configuration failed: the current one keeps serving');
        return outcome(false);
      }
      generation = next;
      logger.info({ generation: next.number, sites: next.sites.length, reason }, 'configuration applied');
      for (const l of listeners) l(next);
      return outcome(true);
    },
    onSwap(listener) {
      listeners.push(listener);
    },
  };
}

/**
 * Graceful shutdown: daemons register cleanup steps (stop accepting, finish the cycle, flush the
 * store); SIGTERM or SIGINT runs them newest first, each bounded by a timeout, then logs `stopped`
 * and closes the logger, then exits. A second signal exits at once with code 1.
 */
import { errorMessage } from './app-error.ts';
import type { AppLogger } from './logger.ts';

type Step = { name: string; run: () => unknown };

export interface Shutdown {
  /** Adds a step run at shutdown; steps run in reverse order of registration. */
  add(name: string, run: () => unknown): void;
  /**
   * Runs every step (once), then logs `stopped` and closes the logger; resolves when done. Used by
   * signals and by tests. `cause`, the error a failed start ends with, is logged first: the log
   * file says why, not only stderr. A log without its `stopped` line ended in a crash or a kill.
   */
  run(reason: string, cause?: unknown): Promise<void>;
  /** The logger the steps report to, when there is one. */
  readonly logger: AppLogger | undefined;
}

export function createShutdown(opts: { logger?: AppLogger; timeoutMs?: number } = {}): Shutdown {
  const steps: Step[] = [];
  let running: Promise<void> | undefined;

  async function run(reason: string, cause?: unknown): Promise<void> {
    if (running) return running;
    running = (async () => {
      const started = Date.now();
      if (cause !== undefined) opts.logger?.error('%s: %s', reason, errorMessage(cause));
      opts.logger?.info({ reason }, 'shutting down');
      for (const step of [...steps].reverse()) {
        let timer: NodeJS.Timeout | undefined;
        const timeout = new Promise<'timeout'>((res) => {
          timer = setTimeout(() => res('timeout'), opts.timeoutMs ?? 10_000);
        });
        try {
          const outcome = await Promise.race([Promise.resolve().then(step.run), timeout]);
          if (outcome === 'timeout') opts.logger?.warn({ step: step.name }, 'shutdown step timed out');
        } catch (err) {
          opts.logger?.error({ err, step: step.name }, 'shutdown step failed');
        } finally {
          clearTimeout(timer);
        }
      }
      opts.logger?.info({ reason, duration_ms: Date.now() - started }, 'stopped');
      await opts.logger?.close();
    })();
    return running;
  }

  return {
    add(name, fn) {
      steps.push({ name, run: fn });
    },
    run,
    logger: opts.logger,
  };
}

/**
 * Installs SIGTERM/SIGINT handlers that run `shutdown` and exit 0; a second signal exits 1. Also
 * takes SIGUSR1, which would otherwise open node's debugger on 127.0.0.1:9229, code execution in
 * the daemon for any local user; operators send it out of habit (logrotate's "reopen logs" for
 * nginx), so it is logged and ignored.
 */
export function exitOnSignals(shutdown: Shutdown, exit: (code: number) => void = (c) => process.exit(c)): void {
  process.on('SIGUSR1', () => shutdown.logger?.warn('SIGUSR1 ignored: it would open a debugger port, and logs need no reopening (hostkit rotates its own files)'));
  let seen = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (seen) exit(1);
    seen = true;
    void shutdown.run(signal).then(() => exit(0));
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}

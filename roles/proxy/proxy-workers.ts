/**
 * The main thread's side of the data-plane workers (issue 7 item 10): one worker thread per core
 * (global `workers`, 0 = availableParallelism), each binding every listener with SO_REUSEPORT so
 * the kernel spreads connections over them. Each worker compiles the config snapshots the main
 * thread sends, serves requests, and sends back its events; counters live in the shared table.
 * A worker that dies takes the proxy down (systemd restarts it), since its slots and in-flight
 * requests cannot be accounted for any more.
 */
import { createServer } from 'node:net';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { getAsset, isSea } from 'node:sea';
import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import { parseListen } from '../../src/core/config-checks.ts';
import type { SharedTable } from './shared-table.ts';
import type { ConfigSnapshot, FromWorker, ToWorker, WorkerData } from './worker-protocol.ts';

/** The SEA asset holding the worker bundle (scripts/build.ts). */
export const WORKER_ASSET = 'proxy-worker.cjs';
// A worker that does not answer a close within the grace period plus this is terminated.
const CLOSE_SLACK_MS = 5_000;
const SYNC_TIMEOUT_MS = 1_000;

export interface ProxyWorkers {
  /** Every bound address as `scheme://ip:port`. */
  readonly addresses: readonly string[];
  readonly count: number;
  /** Sends a new generation to every worker. */
  broadcast(snapshot: ConfigSnapshot): void;
  /**
   * Resolves once every worker applied what was sent before and sent its events so far (the
   * admin API's read-your-writes); a worker that does not answer within a second is not waited for.
   */
  sync(): Promise<void>;
  /** Requests in flight on each worker. */
  inFlight(): number[];
  /** Graceful stop: every worker stops accepting, lets requests finish (bounded), and exits. */
  close(graceMs: number): Promise<void>;
}

export interface WorkerOptions {
  count: number;
  root: string;
  table: SharedTable;
  http: readonly string[];
  https: readonly string[];
  snapshot: ConfigSnapshot;
  logger: Logger;
  /** Every message but ready, failed and synced. */
  onMessage(index: number, message: FromWorker): void;
  /** A worker died after start. */
  onFatal(err: Error): void;
}

/** `workers: 0` means one per core. */
export function workerCount(configured: number): number {
  return configured > 0 ? configured : Math.max(1, availableParallelism());
}

function spawn(data: WorkerData): Worker {
  const opts = { workerData: data, name: `osproxy-worker-${data.index}` };
  if (isSea()) return new Worker(getAsset(WORKER_ASSET, 'utf8'), { ...opts, eval: true });
  return new Worker(join(import.meta.dirname, 'worker-main.ts'), opts);
}

/**
 * Fails when another process holds an address: SO_REUSEPORT would otherwise let a second proxy
 * (same user) share the port silently instead of refusing to start.
 */
async function probe(address: string): Promise<void> {
  const parsed = parseListen(address);
  if (!parsed) throw new Error(`bad listen address ${address}`);
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) => reject(new Error(`cannot listen on ${address}: ${err.message}`)));
    server.listen({ host: parsed.host, port: parsed.port, exclusive: true }, () => resolve());
  });
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

/** Starts every worker and resolves once all listen; rejects (and stops them) when one cannot. */
export async function startWorkers(opts: WorkerOptions): Promise<ProxyWorkers> {
  for (const address of [...opts.http, ...opts.https]) await probe(address);
  const workers: Worker[] = [];
  // A failure while starting rejects the start; once running, it is fatal; once stopping, expected.
  let phase: 'starting' | 'running' | 'stopping' = 'starting';
  let addresses: string[] = [];
  // Sync id -> called once per worker answer.
  const waiting = new Map<number, () => void>();
  let nextSync = 0;

  const started = Promise.all(
    Array.from({ length: opts.count }, (_, index) => {
      const worker = spawn({ index, root: opts.root, table: opts.table.buffer, http: [...opts.http], https: [...opts.https], snapshot: opts.snapshot });
      workers.push(worker);
      return new Promise<void>((resolve, reject) => {
        worker.on('message', (m: FromWorker) => {
          if (m.type === 'ready') {
            addresses = m.addresses;
            resolve();
          } else if (m.type === 'failed') reject(new Error(m.message));
          else if (m.type === 'synced') waiting.get(m.id)?.();
          else opts.onMessage(index, m);
        });
        worker.on('error', (err) => {
          reject(err);
          if (phase === 'running') opts.onFatal(new Error(`data-plane worker ${index} failed: ${err.message}`));
        });
        worker.on('exit', (code) => {
          reject(new Error(`data-plane worker ${index} exited (${code})`));
          if (phase === 'running') opts.onFatal(new Error(`data-plane worker ${index} exited unexpectedly (code ${code})`));
        });
      });
    }),
  );
  try {
    await started;
  } catch (err) {
    phase = 'stopping';
    await Promise.all(workers.map((w) => w.terminate()));
    throw err;
  }
  phase = 'running';
  opts.logger.info({ workers: opts.count }, 'data-plane workers listening');

  const send = (m: ToWorker): void => {
    for (const w of workers) w.postMessage(m);
  };

  return {
    addresses,
    count: opts.count,
    broadcast: (snapshot) => send({ type: 'config', snapshot }),
    sync() {
      const id = ++nextSync;
      return new Promise<void>((resolve) => {
        let left = workers.length;
        const done = (): void => {
          clearTimeout(timer);
          waiting.delete(id);
          resolve();
        };
        const timer = setTimeout(done, SYNC_TIMEOUT_MS);
        waiting.set(id, () => {
          if (--left === 0) done();
        });
        send({ type: 'sync', id });
      });
    },
    inFlight: () => workers.map((_, i) => opts.table.inFlight(i)),
    async close(graceMs) {
      phase = 'stopping';
      send({ type: 'close', graceMs });
      await Promise.all(
        workers.map(
          (w) =>
            new Promise<void>((resolve) => {
              const timer = setTimeout(() => void w.terminate(), graceMs + CLOSE_SLACK_MS);
              w.once('exit', () => {
                clearTimeout(timer);
                resolve();
              });
            }),
        ),
      );
    },
  };
}

/**
 * A data-plane worker thread (proxy-workers.ts starts one per core): binds every listener with
 * SO_REUSEPORT, compiles each config snapshot the main thread sends into its own generation, and
 * serves requests with services backed by the shared table, so counts are exact across workers.
 * Request events go to the main thread in small batches; quota and mitigation notices at once.
 * The executable carries this file as its own bundle (a SEA asset, scripts/build.ts).
 */
import { parentPort, workerData, type TransferListItem } from 'node:worker_threads';
import type { Logger } from 'pino';
import { createLogger } from '../../src/core/logger.ts';
import { errorMessage } from '../../src/core/app-error.ts';
import { createBanList } from './ban-list.ts';
import { createChallengeTokens } from './challenge-tokens.ts';
import { createConnectionSlots } from './connection-slots.ts';
import { createDataPlane } from './data-plane.ts';
import { buildGeneration, type Generation } from './generation.ts';
import { startListeners } from './listeners.ts';
import { levelFromRustLog, type ProxyLogLevel } from './log-level.ts';
import { createMitigation } from './mitigation.ts';
import { createOriginPools } from './origin-pools.ts';
import type { PipelineServices } from './pipeline.ts';
import { createQuotaCounters } from './quota-store.ts';
import { createRateCounters } from './rate-limit.ts';
import { createRateShaper } from './rate-shaper.ts';
import type { PlaneRequestEvent } from './recent-events.ts';
import { SharedTable } from './shared-table.ts';
import { decodeSites, type ConfigSnapshot, type FromWorker, type ToWorker, type WorkerData, EventPacker } from './worker-protocol.ts';

// Request events leave in batches of at most this many, or this long after the first one, so
// messages stay few under load; the admin API's sync flushes them at once.
const BATCH_MAX = 1024;
const BATCH_MS = 25;

async function runWorker(data: WorkerData, port: NonNullable<typeof parentPort>): Promise<void> {
  const levelOf = (s: ConfigSnapshot): ProxyLogLevel => levelFromRustLog(process.env['RUST_LOG']) ?? s.global.log_level;
  const rootLogger = createLogger({ name: 'osproxy', level: 'info' });
  rootLogger.level = levelOf(data.snapshot);
  const logger = rootLogger.child({ worker: data.index });
  const post = (m: FromWorker, transfer?: TransferListItem[]): void => port.postMessage(m, transfer);
  const table = SharedTable.attach(data.table);
  let secret = Buffer.from(data.snapshot.secret);
  const services: PipelineServices = {
    quota: createQuotaCounters(table, (event) => post({ type: 'quota_exceeded', event })),
    shaper: createRateShaper(table),
    slots: createConnectionSlots(table),
    // The workers serve the requests, so they make (and log) the rate limiter's bans.
    bans: createBanList(table, logger),
    rates: createRateCounters(table),
    // The main thread builds every generation too and logs what building finds.
    transparentSaid: new Set(),
    challenge: createChallengeTokens({ secret: () => secret, table }),
    mitigation: createMitigation((event) => post({ type: 'mitigation', event }), { table, ticks: false }),
  };
  const pools = createOriginPools({ table, logger });
  // Building a generation logs nothing here: the main thread built it first and said it all.
  const quiet = logger.child({}, { level: 'silent' }) as Logger;
  const build = (s: ConfigSnapshot, previous: Generation | undefined): Generation => {
    secret = Buffer.from(s.secret);
    logger.level = levelOf(s);
    return buildGeneration({ number: s.number, root: data.root, global: s.global, sites: decodeSites(s.sites), previous, pools, services, logger: quiet });
  };
  let generation = build(data.snapshot, undefined);

  const batch = new EventPacker(BATCH_MAX);
  let pending: NodeJS.Timeout | undefined;
  const flush = (): void => {
    if (pending) clearTimeout(pending);
    pending = undefined;
    if (batch.count === 0) return;
    const events = batch.take();
    post({ type: 'events', events }, [events.fields.buffer]);
  };
  // A 101's event gets a number, so the tunnel's totals can follow it to the main thread.
  const refs = new WeakMap<PlaneRequestEvent, number>();
  let nextRef = 0;
  const plane = createDataPlane({
    current: () => generation,
    onEvent(e) {
      let ref = 0;
      if (e.status === 101) refs.set(e, (ref = ++nextRef));
      if (batch.add(e, ref)) flush();
      else pending ??= setTimeout(flush, BATCH_MS);
    },
    onTunnelClosed(site, up, down, event) {
      flush();
      post({ type: 'tunnel', ref: event && refs.get(event), site, up, down, duration_ms: event?.duration_ms ?? 0 });
    },
    onInFlight: (delta) => table.addInFlight(data.index, delta),
    services,
    logger,
  });

  let listeners;
  try {
    listeners = await startListeners({ http: data.http, https: data.https, plane, maxHeaderSize: data.snapshot.maxHeaderSize, reusePort: true, logger });
  } catch (err) {
    post({ type: 'failed', message: errorMessage(err) });
    return;
  }
  const live = listeners;
  port.on('message', (m: ToWorker) => {
    if (m.type === 'config') {
      try {
        generation = build(m.snapshot, generation);
        live.setMaxHeaderSize(m.snapshot.maxHeaderSize);
      } catch (err) {
        logger.error({ err: errorMessage(err), generation: m.snapshot.number }, 'worker cannot build the new configuration: it keeps serving the current one');
      }
    } else if (m.type === 'sync') {
      flush();
      post({ type: 'synced', id: m.id });
    } else {
      void live
        .close(m.graceMs)
        .then(() => {
          flush();
          pools.close();
          return rootLogger.close();
        })
        .finally(() => process.exit(0));
    }
  });
  post({ type: 'ready', addresses: [...live.addresses] });
}

if (parentPort) void runWorker(workerData as WorkerData, parentPort);

/**
 * The node agent's runtime: discovery keeps a map of managed containers and their host veths;
 * every poll interval one cycle runs meter -> account -> store -> enforce -> outbox; the panel
 * loop registers (backoff 1 s -> 30 s), sends heartbeats and pulls limits on a config_version
 * difference. Cycles, limits pushes and unthrottles run one at a time through one queue, so the
 * in-memory state and the store never disagree.
 */
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { AppError, errorMessage } from '../../src/core/app-error.ts';
import { SERVICE_VERSION } from '../../src/core/version.ts';
import { durationMs } from '../../src/lib/units.ts';
import { nextPeriodStart, periodKey, periodStart, type Period } from '../../src/lib/calendar.ts';
import type { InterfaceShape, TrafficControl } from '../../src/lib/tc.ts';
import type { IfaceTraffic } from '../../src/lib/veth.ts';
import type { NodeAgentConfig, LimitsPayload, ServerStatsRecord, SmartEventsData } from '../../src/contracts/types.ts';
import {
  accountServer,
  desiredSpeeds,
  exceededList,
  newServerState,
  unthrottle as clearCombos,
  type AgentEvent,
  type Combo,
  type Limits,
} from './accounting.ts';
import { smartSettings } from './config.ts';
import { normalizeLimits } from './limits.ts';
import { applyFailure, newSmartState, smartStep, type SmartEventDraft, type SmartState } from './smart.ts';
import { PanelError, registerBackoffMs, type PanelClient } from './panel-client.ts';
import type { AgentStore, HourlyDelta, OutboxItem, ServerRecord, StoredLimits } from './store.ts';

const HOUR = 3_600_000;
/** Hourly history kept long enough for the longest period the history endpoint serves (a month) and then some. */
const HISTORY_KEEP_MS = 62 * 24 * HOUR;
const OUTBOX_BATCH = 50;
/** A stopped container's veth is gone well within this; its IFB is swept by the first scan after. */
const IFB_SWEEP_DELAY_MS = 5_000;
/** Learned baselines are written this often (and at stop); incidents are written in their cycle. */
const SMART_SAVE_MS = 5 * 60_000;
const DAY = 24 * HOUR;

/** A running container that is a managed server, with its host-side veth. */
export interface ManagedContainer {
  uuid: string;
  containerId: string;
  name: string;
  iface: string | null;
  ifindex: number | null;
}

/** What the agent needs from the container runtime; the real one wraps dockerode and /proc. */
export interface ContainerView {
  /** Rescans the runtime; rejects when the engine is unreachable. */
  scan(): Promise<ManagedContainer[]>;
  /** Calls `onChange` when containers start, die, are destroyed or renamed; returns an unsubscribe. */
  watch(onChange: () => void): () => void;
  /** Host-view counters of the given interfaces (rx = bytes the container sent, tx = bytes sent to it). */
  counters(ifaces: string[]): Promise<Map<string, IfaceTraffic>>;
}

export interface AgentDeps {
  config: NodeAgentConfig;
  store: AgentStore;
  containers: ContainerView;
  tc: TrafficControl | null;
  panel: PanelClient;
  logger: Logger;
  tokenFile: string;
  now?: () => number;
}


export interface AgentStatus {
  version: string;
  uptime_seconds: number;
  containers: number;
  servers: number;
  throttled: number;
  quota_exceeded: number;
  config_version: number;
  timezone: string;
  outbox: number;
  docker: string;
  panel: { registered: boolean; node_id: number | null; last_heartbeat_at: string | null; last_error: string | null };
  /** The store's last failed write (a full disk, a read-only file), cleared by the next stored cycle. */
  database: { path: string; last_error: string | null; last_error_at: string | null };
  traffic_control: boolean;
  /** SMART detection: on for this node, servers watched, servers under attack now. */
  smart: { enabled: boolean; watched: number; attacked: number };
}

export interface Agent {
  start(): Promise<void>;
  stop(): Promise<void>;
  knows(uuid: string): boolean;
  health(): { status: 'ok'; version: string; containers: number; uptime_seconds: number };
  stats(): ServerStatsRecord[];
  history(uuid: string, period: Period, bucket: 'hour' | 'day'): { t: string; rx_bytes: number; tx_bytes: number }[];
  applyLimits(payload: Partial<LimitsPayload>): Promise<{ applied: number; failed: number }>;
  unthrottle(uuid: string): Promise<boolean>;
  status(): AgentStatus;
  /** One full cycle now (also what the timer runs); resolves when it is stored and enforced. */
  runCycle(): Promise<void>;
  /** One discovery scan now. */
  rescan(): Promise<void>;
  /** Delivers queued events now (up to 50). */
  flushOutbox(): Promise<void>;
  /** SMART events with id > after, oldest first (GET /smart/events). */
  smartEvents(after: number, limit: number): SmartEventsData;
}

export function createAgent(deps: AgentDeps): Agent {
  const { config, store, logger } = deps;
  const now = deps.now ?? Date.now;
  const startedAt = now();
  const pollMs = durationMs(config.bandwidth.poll_interval);
  const records: Map<string, ServerRecord> = store.loadServers();
  let limits: StoredLimits = store.loadLimits();
  const smartConfig = smartSettings(config);
  const loadedSmart = store.loadSmart();
  const smartStates: Map<string, SmartState> = loadedSmart.states;
  let lastIncident = loadedSmart.lastIncident;
  const nextIncident = (): number => ++lastIncident;
  let smartSavedAt = now();
  /** The detector's inbound cap of a server (bit/s), null when none is in force. */
  const smartCap = (uuid: string): number | null => smartStates.get(uuid)?.incident?.capBps ?? null;
  let containers = new Map<string, ManagedContainer>();
  let dockerState = 'not scanned yet';
  /** False until a discovery scan has answered: before that, a server missing from `containers` is unknown, not stopped. */
  let discovered = false;
  /** When to sweep the IFBs of managed veths that went away; null: none went away. */
  let ifbSweepAt: number | null = null;
  // uuid -> interface carrying our rules. tc rules outlive the agent: what the stored state shaped
  // when the last run stopped still counts as applied, so a server that needs no rules at the first
  // enforce (limits removed, a period rolled over while the agent was down, traffic control turned
  // off) loses them.
  const applied = new Map<string, { iface: string; ifindex: number }>();
  for (const rec of records.values()) {
    const speeds = desiredSpeeds(rec.state, limits.servers.get(rec.state.uuid));
    if (rec.iface !== null && rec.state.ifindex !== null && (speeds.rxMbps > 0 || speeds.txMbps > 0 || smartCap(rec.state.uuid) !== null)) applied.set(rec.state.uuid, { iface: rec.iface, ifindex: rec.state.ifindex });
  }
  const suspendInFlight = new Set<string>();
  /** Servers whose suspend call failed since it was last answered, with the count: said once, not every cycle. */
  const suspendFailures = new Map<string, number>();
  const timers: NodeJS.Timeout[] = [];
  let unwatch: (() => void) | undefined;
  let stopped = false;
  let queue: Promise<unknown> = Promise.resolve();
  let flushing: Promise<void> | undefined;
  const panelState: AgentStatus['panel'] = { registered: false, node_id: null, last_heartbeat_at: null, last_error: null };
  const databaseState: AgentStatus['database'] = { path: config.database.path, last_error: null, last_error_at: null };

  /** A failure of the store itself, said as one (with its file) rather than as the panel's or a cycle's; false for other errors. */
  function noteStoreError(err: unknown, what: string): boolean {
    if ((err as { code?: unknown } | null)?.code !== 'ERR_SQLITE_ERROR') return false;
    databaseState.last_error = errorMessage(err);
    databaseState.last_error_at = new Date(now()).toISOString();
    logger.error({ err: databaseState.last_error, database: config.database.path }, `${what} failed: the database ${config.database.path} refused it (${databaseState.last_error}); usage is not being recorded`);
    return true;
  }
  let heartbeatMs = durationMs(config.panel.heartbeat_interval);

  /** Runs `fn` after everything queued before it; state changes never interleave. */
  function serial<T>(fn: () => Promise<T> | T): Promise<T> {
    const next = queue.then(fn, fn);
    queue = next.catch(() => undefined);
    return next;
  }

  const tz = (): string => limits.timezone ?? config.timezone;

  // ---- meter -> account -> store -> enforce -------------------------------------------------
  async function cycle(): Promise<void> {
    const t = now();
    const ifaces = [...containers.values()].flatMap((c) => (c.iface ? [c.iface] : []));
    let counters = new Map<string, IfaceTraffic>();
    try {
      counters = await deps.containers.counters(ifaces);
    } catch (err) {
      logger.warn({ err: errorMessage(err) }, 'reading interface counters failed; this cycle counts nothing');
    }
    const drops = await capDrops();
    const smartChanged: SmartState[] = [];
    const smartEvents: SmartEventDraft[] = [];
    const hour = Math.floor(t / HOUR) * HOUR;
    const changed: ServerRecord[] = [];
    const hourly: HourlyDelta[] = [];
    const events: AgentEvent[] = [];
    // Servers in the limits set are known even before their container is seen.
    for (const uuid of new Set([...records.keys(), ...containers.keys(), ...limits.servers.keys()])) {
      const c = containers.get(uuid);
      const prev = records.get(uuid) ?? { state: newServerState(uuid), containerId: c?.containerId ?? '', online: false, iface: null, firstSeenAt: t, lastSeenAt: t };
      const counter = c?.iface ? counters.get(c.iface) : undefined;
      const reading = c && counter && c.ifindex !== null ? { ifindex: c.ifindex, rxBytes: counter.txBytes, txBytes: counter.rxBytes } : null;
      const r = accountServer(prev.state, reading, t, tz(), limits.servers.get(uuid));
      const rec: ServerRecord = {
        state: r.state,
        containerId: c?.containerId ?? prev.containerId,
        online: c !== undefined,
        iface: c?.iface ?? null,
        firstSeenAt: prev.firstSeenAt,
        lastSeenAt: c ? t : prev.lastSeenAt,
      };
      records.set(uuid, rec);
      changed.push(rec);
      hourly.push({ uuid, hour, rx: r.delta.rx, tx: r.delta.tx });
      events.push(...r.events);
      const watched = config.smart.enabled && limits.servers.get(uuid)?.smart === true;
      const before = smartStates.get(uuid);
      if (watched || before?.incident) {
        const smartReading = c && counter && c.ifindex !== null ? { at: t, ifindex: c.ifindex, bytes: counter.txBytes, packets: counter.txPackets, drops: (c.iface && drops.get(c.iface)) || 0 } : null;
        const wasAttacked = before?.incident != null;
        const step = smartStep(before ?? newSmartState(uuid), smartReading, t, watched, smartConfig, nextIncident);
        smartStates.set(uuid, step.state);
        // An attack's state (peaks, the hold-down's start) is written every cycle it lasts: few servers, and a restart resumes it.
        if (step.events.length > 0 || step.state.incident !== null || wasAttacked) smartChanged.push(step.state);
        for (const e of step.events) smartEvents.push(e);
      }
    }
    // Baselines drift every cycle: written every few minutes rather than 1,000 rows a cycle.
    const saveAll = t - smartSavedAt >= SMART_SAVE_MS;
    if (saveAll) smartSavedAt = t;
    store.saveCycle(changed, hourly, events, { states: saveAll ? [...smartStates.values()] : smartChanged, events: smartEvents });
    for (const e of events) logger.info({ server: e.server_uuid, event: e.type, period: e.period, direction: e.direction }, e.message);
    logSmartEvents(smartEvents);
    await enforce();
    for (const rec of records.values()) if (rec.state.suspend === 'pending') requestSuspend(rec.state.uuid);
    if (events.length > 0 && config.scheduler.enabled) void flushOutbox();
  }

  /** Makes the tc state match every running server's desired speeds (none with traffic control off); idempotent. */
  async function enforce(): Promise<void> {
    if (!deps.tc) return;
    const shapes: InterfaceShape[] = [];
    const removals: { iface: string; ifindex: number }[] = [];
    for (const [uuid, rec] of records) {
      const c = containers.get(uuid);
      const old = applied.get(uuid);
      if (old && discovered && (!c || c.iface !== old.iface)) {
        // The veth is gone (container stopped or restarted): its rules went with it.
        deps.tc.forget(old.iface);
        applied.delete(uuid);
      }
      if (!c?.iface || c.ifindex === null) continue;
      const speeds = config.traffic_control.enabled ? desiredSpeeds(rec.state, limits.servers.get(uuid)) : { rxMbps: 0, txMbps: 0 };
      // An attack's cap applies on top of the server's own speed cap: the tighter one wins.
      const cap = smartCap(uuid);
      const downBps = cap === null ? speeds.rxMbps * 1_000_000 : speeds.rxMbps > 0 ? Math.min(cap, speeds.rxMbps * 1_000_000) : cap;
      if (downBps === 0 && speeds.txMbps === 0) {
        if (applied.has(uuid)) removals.push({ iface: c.iface, ifindex: c.ifindex });
        continue;
      }
      shapes.push({
        iface: c.iface,
        ifindex: c.ifindex,
        down: downBps > 0 ? { rateBps: downBps } : null,
        up: speeds.txMbps > 0 ? { rateBps: speeds.txMbps * 1_000_000 } : null,
      });
    }
    if (removals.length > 0) {
      const r = await deps.tc.remove(removals);
      for (const f of r.failed) logger.warn({ iface: f.iface, error: f.error }, 'removing traffic-control rules failed');
      for (const rm of removals) {
        for (const [uuid, a] of applied) if (a.iface === rm.iface) applied.delete(uuid);
      }
    }
    if (shapes.length > 0) {
      const r = await deps.tc.apply(shapes);
      const failed = new Set(r.failed.map((f) => f.iface));
      const shaped = new Set(shapes.map((s) => s.iface));
      for (const f of r.failed) logger.warn({ iface: f.iface, error: f.error }, 'applying traffic-control rules failed; retried next cycle');
      for (const [uuid, c] of containers) {
        if (c.iface && c.ifindex !== null && shaped.has(c.iface) && !failed.has(c.iface)) applied.set(uuid, { iface: c.iface, ifindex: c.ifindex });
      }
      reportCapFailures(r.failed);
    }
  }

  /** An attack's cap that tc refused is an apply_failed event, once per cap (the rules are retried every cycle). */
  function reportCapFailures(failed: readonly { iface: string; error: string }[]): void {
    const states: SmartState[] = [];
    const events: SmartEventDraft[] = [];
    for (const f of failed) {
      for (const [uuid, c] of containers) {
        const st = smartStates.get(uuid);
        if (c.iface !== f.iface || !st) continue;
        const event = applyFailure(st, now(), f.error, smartConfig);
        if (!event) continue;
        states.push(st);
        events.push(event);
      }
    }
    if (events.length === 0) return;
    store.saveCycle([], [], [], { states, events });
    logSmartEvents(events);
  }

  function logSmartEvents(events: readonly SmartEventDraft[]): void {
    for (const e of events) {
      const fields = { server: e.server_uuid, event: e.type, level: e.level, incident: e.incident, pps: e.metrics.pps, bps: e.metrics.bps, ratio: e.metrics.ratio, cap_mbps: e.mitigation.cap_mbps };
      if (e.type === 'attack_detected' || e.type === 'attack_escalated' || e.type === 'apply_failed') logger.warn(fields, e.message);
      else logger.info(fields, e.message);
    }
  }

  /**
   * What the caps of attacked servers dropped so far, by veth (one `tc -s` read, only while some
   * server is capped): the detector counts dropped packets as arrived, or a capped attack would
   * look calm and the cap lift while it goes on.
   */
  async function capDrops(): Promise<Map<string, number>> {
    if (!deps.tc) return new Map();
    const capped = [...containers.values()].flatMap((c) => (c.iface && smartCap(c.uuid) !== null ? [c.iface] : []));
    if (capped.length === 0) return new Map();
    try {
      return await deps.tc.rootDrops(capped);
    } catch (err) {
      logger.warn({ err: errorMessage(err) }, 'reading the drop counters of capped servers failed; this cycle sees only what the caps let through');
      return new Map();
    }
  }

  function requestSuspend(uuid: string): void {
    if (suspendInFlight.has(uuid)) return;
    suspendInFlight.add(uuid);
    const combos = exceededList(records.get(uuid)?.state ?? newServerState(uuid)).join(', ');
    deps.panel
      .suspend(uuid, `bandwidth quota exceeded (${combos})`)
      .then(
        () => true,
        (err: unknown) => {
          if (err instanceof PanelError && !err.retryable) {
            logger.warn({ server: uuid, err: err.message }, 'panel refused the suspend call; throttling to 1 Mbit/s anyway');
            return true;
          }
          const failures = (suspendFailures.get(uuid) ?? 0) + 1;
          suspendFailures.set(uuid, failures);
          // The panel being down fails this every cycle for every pending server: warn once.
          if (failures === 1) logger.warn({ server: uuid, err: errorMessage(err) }, 'suspend call failed; retried every cycle until the panel answers');
          else logger.debug({ server: uuid, failures, err: errorMessage(err) }, 'suspend call failed again');
          return false;
        },
      )
      .then((answered) =>
        answered
          ? serial(async () => {
              const rec = records.get(uuid);
              if (!rec || rec.state.suspend !== 'pending') return;
              logger.info({ server: uuid, failed_calls: suspendFailures.get(uuid) ?? 0 }, 'panel answered the suspend call; throttling to 1 Mbit/s');
              suspendFailures.delete(uuid);
              const r = accountServer({ ...rec.state, suspend: 'answered' }, null, now(), tz(), limits.servers.get(uuid));
              const next = { ...rec, state: { ...r.state, rxRate: rec.state.rxRate, txRate: rec.state.txRate } };
              records.set(uuid, next);
              store.saveCycle([next], [], r.events);
              await enforce();
            })
          : undefined,
      )
      .catch((err: unknown) => logger.error({ err: errorMessage(err) }, 'suspend handling failed'))
      .finally(() => suspendInFlight.delete(uuid));
  }

  // ---- outbox ---------------------------------------------------------------------------
  /**
   * A batch the panel refused as invalid would block the queue for good, and one bad event would
   * take the valid ones with it: each goes again on its own, and only those the panel refuses
   * alone are dropped (logged with what they were). Any other failure stops here; what was not
   * settled yet stays queued for the next delivery.
   */
  async function sortOutRejected(items: OutboxItem[], batchError: PanelError): Promise<void> {
    const settled: number[] = [];
    try {
      for (const item of items) {
        let refusal = items.length === 1 ? batchError.message : null;
        if (items.length > 1) {
          try {
            await deps.panel.events([item.event]);
          } catch (err) {
            if (!(err instanceof PanelError && err.status === 422)) throw err;
            refusal = err.message;
          }
        }
        if (refusal !== null) logger.error({ err: refusal, event: item.event }, 'panel rejected a queued event as invalid; dropping it');
        settled.push(item.id);
      }
    } catch (err) {
      noteTokenRejected(err);
      logger.warn({ err: errorMessage(err), queued: store.outboxCount() - settled.length }, 'event delivery failed; retried later');
    }
    store.outboxDelete(settled);
  }

  async function flushOutbox(): Promise<void> {
    if (flushing) return flushing;
    flushing = (async () => {
      const items = store.outboxPeek(OUTBOX_BATCH);
      if (items.length === 0) return;
      try {
        await deps.panel.events(items.map((i) => i.event));
      } catch (err) {
        if (err instanceof PanelError && err.status === 422) {
          await sortOutRejected(items, err);
        } else {
          noteTokenRejected(err);
          logger.warn({ err: errorMessage(err), queued: store.outboxCount() }, 'event delivery failed; retried later');
        }
        return;
      }
      try {
        store.outboxDelete(items.map((i) => i.id));
        logger.debug({ delivered: items.length }, 'events delivered to the panel');
      } catch (err) {
        // The panel has them: only the local queue could not let go of them, so they go again.
        if (!noteStoreError(err, `removing ${items.length} delivered events from the queue`)) throw err;
      }
    })().finally(() => {
      flushing = undefined;
    });
    return flushing;
  }

  // ---- panel loop -----------------------------------------------------------------------
  function noteTokenRejected(err: unknown): void {
    if (err instanceof PanelError && err.status === 401) {
      logger.error(`token rejected: put the new token in ${deps.tokenFile} and restart`);
    } else if (err instanceof PanelError && err.status === 404 && err.code === 'ERR_NODE_NOT_FOUND') {
      logger.error(`this node was deleted in the panel: pair the agent again with a new node's token in ${deps.tokenFile} and restart`);
    }
    panelState.last_error = errorMessage(err);
  }

  let registering = false;
  let refreshing = false;
  let wakePanelLoop: (() => void) | undefined;

  /** Takes the panel's heartbeat interval; a change wakes the panel loop so it applies at once. */
  function adoptInterval(seconds: number): void {
    if (seconds <= 0 || seconds * 1000 === heartbeatMs) return;
    const was = heartbeatMs / 1000;
    heartbeatMs = seconds * 1000;
    if (panelState.registered) logger.info({ heartbeat_seconds: seconds, was }, 'heartbeat interval changed by the panel');
    wakePanelLoop?.();
  }

  /**
   * After new limits arrive (a push or a pull), registers again once: the settings change that
   * bumped config_version may also have changed the heartbeat interval, which only the register
   * answer carries (spec/1 §2.7). A failure is left to the next change or restart.
   */
  async function refreshRegistration(): Promise<void> {
    if (registering || refreshing || !panelState.registered || stopped) return;
    refreshing = true;
    try {
      const data = await deps.panel.register({ version: SERVICE_VERSION, hostname: hostname(), port: config.api.port, api_url: '' });
      adoptInterval(data.heartbeat_interval_seconds);
    } catch (err) {
      noteTokenRejected(err);
      logger.debug({ err: errorMessage(err) }, 'refreshing the registration failed');
    } finally {
      refreshing = false;
    }
  }

  async function register(): Promise<void> {
    registering = true;
    try {
      await registerUntilDone();
    } finally {
      registering = false;
    }
  }

  async function registerUntilDone(): Promise<void> {
    for (let attempt = 0; !stopped; attempt++) {
      try {
        const data = await deps.panel.register({ version: SERVICE_VERSION, hostname: hostname(), port: config.api.port, api_url: '' });
        panelState.registered = true;
        panelState.node_id = data.node_id;
        panelState.last_error = null;
        adoptInterval(data.heartbeat_interval_seconds);
        logger.info({ node_id: data.node_id, heartbeat_seconds: heartbeatMs / 1000, config_version: data.config_version }, 'registered with the panel');
        if (data.config_version !== limits.configVersion) await pullLimits();
        return;
      } catch (err) {
        noteTokenRejected(err);
        const wait = registerBackoffMs(attempt);
        logger.warn({ err: errorMessage(err), retry_in_ms: wait }, 'registration with the panel failed');
        await sleep(wait);
      }
    }
  }

  async function heartbeat(): Promise<void> {
    const s = summary();
    try {
      const data = await deps.panel.heartbeat({
        version: SERVICE_VERSION,
        containers: s.containers,
        rx_rate_bps: s.rx,
        tx_rate_bps: s.tx,
        throttled: s.throttled,
        quota_exceeded: s.exceeded,
      });
      panelState.last_heartbeat_at = new Date(now()).toISOString();
      panelState.last_error = null;
      if (data.config_version !== limits.configVersion) {
        logger.info({ ours: limits.configVersion, panel: data.config_version }, 'limits out of date; pulling them');
        await pullLimits();
      }
    } catch (err) {
      noteTokenRejected(err);
      logger.warn({ err: errorMessage(err) }, 'heartbeat failed');
    }
  }

  async function pullLimits(): Promise<void> {
    try {
      const payload = await deps.panel.limits();
      const r = await applyLimits(payload);
      logger.info({ config_version: payload.config_version, ...r }, 'limits pulled from the panel');
    } catch (err) {
      noteTokenRejected(err);
      logger.warn({ err: errorMessage(err) }, 'pulling limits failed');
    }
  }

  /**
   * Registers at once, while the first container scan may still be waiting on a hung Docker (its
   * own timeout), so the panel sees the node within a second of the start; heartbeats carry
   * container counts and so wait for that scan.
   */
  async function panelLoop(firstScan: Promise<void>): Promise<void> {
    await register();
    await firstScan;
    while (!stopped) {
      await heartbeat();
      if (config.scheduler.enabled) await flushOutbox();
      await new Promise<void>((resolve) => {
        wakePanelLoop = resolve;
        void sleep(heartbeatMs).then(resolve);
      });
      wakePanelLoop = undefined;
    }
  }

  // ---- discovery --------------------------------------------------------------------------
  async function rescan(): Promise<void> {
    try {
      const found = await deps.containers.scan();
      const next = new Map(found.map((c) => [c.uuid, c]));
      for (const [uuid, c] of next) {
        const old = containers.get(uuid);
        if (!old) logger.info({ server: uuid, container: c.containerId.slice(0, 12), iface: c.iface }, 'managing server container');
        else if (c.iface === null && old.iface !== null) logger.info({ server: uuid, was: old.iface }, 'server container lost its veth (stopping, restarting or disconnected from its network); not metered until it has one');
        else if (old.iface !== c.iface) logger.info({ server: uuid, iface: c.iface, was: old.iface }, 'server container has a new veth');
      }
      for (const uuid of containers.keys()) if (!next.has(uuid)) logger.info({ server: uuid }, 'server container no longer running');
      if (dockerState !== 'ok') logger.info({ containers: next.size }, 'container runtime reachable');
      dockerState = 'ok';
      if (deps.tc && config.traffic_control.enabled) {
        // A stopped container's veth (and so its IFB's reason to exist) is gone a moment after
        // the runtime reports it: the IFB goes with a scan a little later, not the hourly sweep.
        if ([...containers.values()].some((c) => c.iface && next.get(c.uuid)?.iface !== c.iface)) ifbSweepAt = now() + IFB_SWEEP_DELAY_MS;
        else if (ifbSweepAt !== null && now() >= ifbSweepAt) {
          ifbSweepAt = null;
          const swept = await deps.tc.sweepOrphanIfbs().catch((err: unknown) => {
            logger.warn({ err: errorMessage(err) }, 'IFB sweep failed; retried hourly');
            return 0;
          });
          if (swept > 0) logger.info({ swept }, 'removed IFB devices of stopped containers');
        }
        const fresh = [...next.values()].filter((c) => c.iface && c.ifindex !== null && containers.get(c.uuid)?.iface !== c.iface);
        if (fresh.length > 0) {
          const r = await deps.tc.prepare(fresh.map((c) => ({ iface: c.iface as string, ifindex: c.ifindex as number })));
          for (const f of r.failed) logger.warn({ iface: f.iface, error: f.error }, 'preparing the IFB device failed; retried when limits apply');
        }
      }
      const veths = (m: Map<string, ManagedContainer>): string => [...m.values()].map((c) => `${c.uuid}=${c.iface}`).sort().join(',');
      const moved = veths(next) !== veths(containers);
      containers = next;
      discovered = true;
      if (moved) void serial(enforce).catch((err: unknown) => logger.error({ err: errorMessage(err) }, 'enforcement failed'));
    } catch (err) {
      const msg = errorMessage(err);
      if (dockerState !== msg) logger.warn({ err: msg }, 'container runtime unavailable; retrying');
      dockerState = msg;
    }
  }

  // ---- queries ----------------------------------------------------------------------------
  function summary(): { containers: number; rx: number; tx: number; throttled: number; exceeded: number } {
    let rx = 0;
    let tx = 0;
    let throttled = 0;
    let exceeded = 0;
    for (const rec of records.values()) {
      rx += rec.state.rxRate;
      tx += rec.state.txRate;
      if (rec.state.throttled) throttled++;
      if (exceededList(rec.state).length > 0) exceeded++;
    }
    return { containers: containers.size, rx: Math.round(rx), tx: Math.round(tx), throttled, exceeded };
  }

  function stats(): ServerStatsRecord[] {
    const t = now();
    const keys = { day: periodKey(t, 'day', tz()), week: periodKey(t, 'week', tz()), month: periodKey(t, 'month', tz()) };
    const used = (rec: ServerRecord, combo: Combo): number => {
      const u = rec.state.usage[combo];
      return u && u.key === keys[combo.split('_')[1] as Period] ? u.bytes : 0;
    };
    return [...records.values()]
      .sort((a, b) => a.state.uuid.localeCompare(b.state.uuid))
      .map((rec) => ({
        uuid: rec.state.uuid,
        container_id: rec.containerId,
        online: containers.has(rec.state.uuid),
        rx_bytes_total: rec.state.rxTotal,
        tx_bytes_total: rec.state.txTotal,
        rx_rate_bps: rec.state.rxRate,
        tx_rate_bps: rec.state.txRate,
        rx_used_day_bytes: used(rec, 'rx_day'),
        rx_used_week_bytes: used(rec, 'rx_week'),
        rx_used_month_bytes: used(rec, 'rx_month'),
        tx_used_day_bytes: used(rec, 'tx_day'),
        tx_used_week_bytes: used(rec, 'tx_week'),
        tx_used_month_bytes: used(rec, 'tx_month'),
        throttled: rec.state.throttled,
        exceeded: exceededList(rec.state),
      }));
  }

  function history(uuid: string, period: Period, bucket: 'hour' | 'day'): { t: string; rx_bytes: number; tx_bytes: number }[] {
    const t = now();
    const zone = tz();
    const from = periodStart(t, period, zone);
    // Usage is kept per UTC hour, and an hour belongs to the day it starts in: in a zone offset
    // by half an hour the hour a day starts in is the previous day's, in both bucket sizes.
    const firstHour = Math.ceil(from / HOUR) * HOUR;
    const rows = store.hourly(uuid, firstHour);
    const points: { t: string; rx_bytes: number; tx_bytes: number }[] = [];
    if (bucket === 'hour') {
      const byHour = new Map(rows.map((r) => [r.hour, r]));
      for (let h = firstHour; h <= t; h += HOUR) {
        const r = byHour.get(h);
        points.push({ t: new Date(h).toISOString(), rx_bytes: r?.rx ?? 0, tx_bytes: r?.tx ?? 0 });
      }
      return points;
    }
    for (let d = from; d <= t; d = nextPeriodStart(d, 'day', zone)) {
      const end = nextPeriodStart(d, 'day', zone);
      let rx = 0;
      let tx = 0;
      for (const r of rows) {
        if (r.hour >= d && r.hour < end) {
          rx += r.rx;
          tx += r.tx;
        }
      }
      points.push({ t: new Date(d).toISOString(), rx_bytes: rx, tx_bytes: tx });
    }
    return points;
  }

  async function applyLimits(payload: Partial<LimitsPayload>): Promise<{ applied: number; failed: number }> {
    const n = normalizeLimits(payload);
    if (typeof n === 'string') throw new AppError('ERR_BAD_REQUEST', n, { status: 400 });
    return serial(async () => {
      const events = speedEvents(limits.servers, n.servers);
      const versionChanged = n.configVersion !== limits.configVersion;
      store.replaceLimits(n.configVersion, n.timezone, n.servers, events);
      limits = store.loadLimits();
      for (const f of n.failed) logger.warn({ index: f.index, reason: f.reason }, 'limits entry failed');
      logger.info({ config_version: n.configVersion, servers: n.servers.length, failed: n.failed.length, timezone: tz() }, 'limits replaced');
      await cycle();
      if (versionChanged) void refreshRegistration();
      return { applied: n.servers.length, failed: n.failed.length };
    });
  }

  /** speed_applied: a limits change gave a server different speed caps (see docs/decisions.md). */
  function speedEvents(old: Map<string, Limits>, next: readonly Limits[]): AgentEvent[] {
    const t = new Date(now()).toISOString();
    return next.flatMap((l) => {
      const before = old.get(l.uuid);
      const speeds = (x: Limits | undefined): string => (x && x.enabled ? `${x.rx_speed_mbps}/${x.tx_speed_mbps}` : '0/0');
      if (speeds(before) === speeds(l)) return [];
      return [
        {
          server_uuid: l.uuid,
          type: 'speed_applied' as const,
          period: null,
          direction: null,
          message: `speed caps set to ${l.enabled && l.rx_speed_mbps ? `${l.rx_speed_mbps} Mbit/s` : 'unlimited'} in, ${l.enabled && l.tx_speed_mbps ? `${l.tx_speed_mbps} Mbit/s` : 'unlimited'} out`,
          occurred_at: t,
        },
      ];
    });
  }

  async function unthrottle(uuid: string): Promise<boolean> {
    return serial(async () => {
      const rec = records.get(uuid);
      if (!rec) throw new AppError('ERR_NOT_FOUND', `unknown server ${uuid}`, { status: 404 });
      const { state, cleared } = clearCombos(rec.state);
      const next = { ...rec, state };
      records.set(uuid, next);
      store.saveCycle([next], [], []);
      if (cleared.length > 0) logger.info({ server: uuid, combos: cleared }, 'unthrottled by the panel until the periods reset');
      await enforce();
      return cleared.length > 0;
    });
  }

  async function cleanup(): Promise<void> {
    const t = now();
    const staleHours = config.cleanup.stale_server_hours;
    await serial(() => {
      const keep = new Set([...containers.keys(), ...limits.servers.keys()]);
      const forgotten = store.cleanup(staleHours > 0 ? t - staleHours * HOUR : null, t - HISTORY_KEEP_MS, keep, t - config.smart.events_retention_days * DAY);
      for (const uuid of forgotten) {
        records.delete(uuid);
        smartStates.delete(uuid);
        logger.info({ server: uuid }, `forgot server unseen for ${staleHours} h`);
      }
      if (config.cleanup.compact_db) store.compact();
    });
    if (deps.tc && config.traffic_control.enabled) {
      const swept = await deps.tc.sweepOrphanIfbs();
      if (swept > 0) logger.info({ swept }, 'removed IFB devices of vanished interfaces');
    }
  }

  function every(ms: number, fn: () => Promise<void>, what: string): void {
    let running = false;
    timers.push(
      setInterval(() => {
        if (running || stopped) return;
        running = true;
        fn()
          .then(() => {
            if (what === 'cycle') databaseState.last_error = databaseState.last_error_at = null;
          })
          .catch((err: unknown) => {
            if (!noteStoreError(err, what)) logger.error({ err: errorMessage(err) }, `${what} failed`);
          })
          .finally(() => {
            running = false;
          });
      }, ms),
    );
  }

  return {
    async start() {
      logger.info({ version: SERVICE_VERSION, servers: records.size, config_version: limits.configVersion, timezone: tz() }, 'node agent starting');
      if (deps.tc && config.traffic_control.enabled) await deps.tc.sweepOrphanIfbs().catch((err: unknown) => logger.warn({ err: errorMessage(err) }, 'IFB sweep failed'));
      const firstScan = rescan();
      void panelLoop(firstScan);
      await firstScan;
      unwatch = deps.containers.watch(() => void rescan());
      await serial(cycle);
      every(durationMs(config.docker.discovery_interval), rescan, 'discovery');
      every(pollMs, () => serial(cycle), 'cycle');
      if (config.scheduler.enabled) every(durationMs(config.scheduler.check_interval), flushOutbox, 'event delivery');
      if (config.cleanup.enabled) every(durationMs(config.cleanup.interval), cleanup, 'cleanup');
    },
    async stop() {
      stopped = true;
      for (const t of timers) clearInterval(t);
      unwatch?.();
      await queue;
      // The learned baselines since the last periodic write, so a restart detects against them.
      try {
        store.saveCycle([], [], [], { states: [...smartStates.values()], events: [] });
      } catch (err) {
        noteStoreError(err, 'saving the SMART baselines');
      }
    },
    knows: (uuid) => records.has(uuid),
    health: () => ({ status: 'ok', version: SERVICE_VERSION, containers: containers.size, uptime_seconds: Math.floor((now() - startedAt) / 1000) }),
    stats,
    history,
    applyLimits,
    unthrottle,
    status() {
      const s = summary();
      return {
        version: SERVICE_VERSION,
        uptime_seconds: Math.floor((now() - startedAt) / 1000),
        containers: s.containers,
        servers: records.size,
        throttled: s.throttled,
        quota_exceeded: s.exceeded,
        config_version: limits.configVersion,
        timezone: tz(),
        outbox: store.outboxCount(),
        docker: dockerState,
        panel: { ...panelState },
        database: { ...databaseState },
        traffic_control: config.traffic_control.enabled && deps.tc !== null,
        smart: {
          enabled: config.smart.enabled,
          watched: config.smart.enabled ? [...limits.servers.values()].filter((l) => l.smart).length : 0,
          attacked: [...smartStates.values()].filter((st) => st.incident !== null).length,
        },
      };
    },
    runCycle: () => serial(cycle),
    rescan,
    flushOutbox,
    smartEvents: (after, limit) => store.smartEvents(after, limit),
  };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/**
 * The container bandwidth daemon's engine (spec/3 §2.8, §3): discovery of running containers
 * with a host veth, HTB with the default rate/ceil/burst on each host veth in both directions,
 * daily usage per container in the store, quota evaluation on every poll (quota_warning once per
 * day, quota_exceeded -> exceeded speeds or no rules with disconnect_on_exceeded), the daily
 * reset by scheduler.reset_cron in `timezone`, the cron jobs (cleanup, history, health, webhook
 * retry) and the in-memory status ring.
 *
 * Directions are the container's: rx = down = into the container = the host veth's TX counter,
 * tx = up = out of it = the host veth's RX counter.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { BandwidthdConfig } from '../../src/contracts/types.ts';
import { errorMessage } from '../../src/core/app-error.ts';
import { SERVICE_VERSION } from '../../src/core/version.ts';
import { periodStart, localParts } from '../../src/lib/calendar.ts';
import { nextCronTime } from '../../src/lib/cron.ts';
import type { ContainerInfo, ContainerSource } from '../../src/lib/docker.ts';
import type { InterfaceShape, Shape, TrafficControl } from '../../src/lib/tc.ts';
import { MAX_BURST_SECONDS } from '../../src/lib/tc.ts';
import { durationMs, GIB } from '../../src/lib/units.ts';
import type { HostVeth, IfaceCounters } from '../../src/lib/veth.ts';
import type { Notifier } from './notifier.ts';
import type { BandwidthdStore, ContainerRow } from './store.ts';
import { makeDirs } from '../../src/lib/make-dirs.ts';

export const QUOTA_LABEL = 'bandwidth.daily_quota';
export const JOBS = ['reset', 'cleanup', 'history', 'health', 'webhook_retry'] as const;
export type JobName = (typeof JOBS)[number];
type Mode = 'default' | 'exceeded' | 'none';

export interface ContainerStatus {
  id: string;
  name: string;
  iface: string | null;
  rx_day_bytes: number;
  tx_day_bytes: number;
  quota_bytes: number;
  usage_pct: number;
  rx_mbps: number;
  tx_mbps: number;
  warned: boolean;
  exceeded: boolean;
  mode: Mode;
}

export interface Snapshot {
  at: string;
  containers: number;
  exceeded: number;
  rx_mbps: number;
  tx_mbps: number;
}

export interface DaemonStatus {
  version: string;
  pid: number;
  uptime_seconds: number;
  docker: string;
  timezone: string;
  last_reset_at: string;
  next_reset_at: string;
  containers: ContainerStatus[];
  /**
   * The notifier's counters since start (delivered, failed, dropped, and stored: deliveries that
   * went to the outbox) with queued now, and persisted: deliveries in the outbox now ("stored for
   * retry" in the text status).
   */
  webhooks: ReturnType<Notifier['stats']> & { persisted: number };
  jobs: Record<string, { next_at: string | null; last_at: string | null; last_result: string | null }>;
  history: Snapshot[];
}

export interface DaemonDeps {
  config: BandwidthdConfig;
  store: BandwidthdStore;
  source: ContainerSource;
  tc: TrafficControl;
  notifier: Notifier;
  logger: Logger;
  hostVethOf: (pid: number) => Promise<HostVeth | null>;
  readCounters: (ifaces: string[]) => Promise<Map<string, IfaceCounters>>;
  now?: () => number;
}

interface Managed {
  id: string;
  name: string;
  pid: number;
  iface: string;
  ifindex: number;
  quotaBytes: number;
  row: ContainerRow;
  rxBps: number;
  txBps: number;
  /** Rules last asked of tc; null before the first apply. */
  mode: Mode | null;
  tcFailed: boolean;
}

export interface Daemon {
  start(): Promise<void>;
  stop(): Promise<void>;
  status(): DaemonStatus;
  /** `bandwidth reset [CONTAINER]` (id, id prefix or name); returns the containers reset. */
  reset(container?: string): Promise<string[]>;
  /** Runs a job now (CLI, tests); returns what it did in one line. */
  runJob(name: JobName): Promise<string>;
  /** One discovery + poll + enforce pass (tests). */
  cycle(): Promise<void>;
  /**
   * Runs on SIGHUP with a config that passed every check: rates, quotas, time zone, jobs and
   * intervals take effect at once and every container's rules are re-applied.
   */
  reconfigure(next: BandwidthdConfig): Promise<void>;
}

/** The shortest container id prefix `reset` takes (a shorter one would match too much). */
export const MIN_ID_PREFIX = 4;

const mbit = (mbps: number): number => mbps * 1_000_000;

/** GB (GiB) to whole bytes; a positive amount is at least 1 byte, never 0 = no quota. Pure. */
const quotaBytes = (gb: number): number => (gb > 0 ? Math.max(1, Math.round(gb * GIB)) : 0);

/**
 * The quota of a container in bytes: its label (GB, GiB like the node agent; plain decimal
 * notation only, so `0x10` or `1e3` are refused with `bad`) or the default; 0 = none. Pure.
 */
export function quotaBytesOf(labels: Record<string, string>, defaultGb: number): { bytes: number; bad?: string } {
  const raw = labels[QUOTA_LABEL];
  if (raw !== undefined) {
    const text = raw.trim();
    const gb = Number(text);
    if (/^\d*\.?\d+$/.test(text) && Number.isFinite(gb)) return { bytes: quotaBytes(gb) };
    return { bytes: quotaBytes(defaultGb), bad: raw };
  }
  return { bytes: quotaBytes(defaultGb) };
}

/** A quota in GB for messages and the API: bytes / GiB without the float noise of the division, to 3 decimals (about 1 MiB). Pure. */
export function displayGb(bytes: number): number {
  return Math.round((bytes / GIB) * 1000) / 1000;
}

/** Outcome of the quota rules for one container's day so far. Pure. */
export function evaluateQuota(usage: number, quotaBytes: number, warningPercent: number, warned: boolean, exceeded: boolean): { warn: boolean; exceed: boolean; pct: number } {
  if (quotaBytes <= 0) return { warn: false, exceed: false, pct: 0 };
  const pct = (usage / quotaBytes) * 100;
  const exceed = !exceeded && pct >= 100;
  const warn = !warned && !exceed && !exceeded && warningPercent > 0 && pct >= warningPercent;
  return { warn, exceed, pct };
}

/** Built once at start by serve.ts; nothing runs until start(). */
export function createDaemon(deps: DaemonDeps): Daemon {
  const { store, tc, notifier, logger: log } = deps;
  // Replaced as a whole by reconfigure(); everything reads it at the time of use.
  let config = deps.config;
  const now = deps.now ?? Date.now;
  let tz = config.timezone;
  const warnPctOf = (c: BandwidthdConfig): number => (c.notifications.warning_threshold !== undefined ? c.notifications.warning_threshold * 100 : c.quota.warning_percent);
  let warnPct = warnPctOf(config);
  const managed = new Map<string, Managed>();
  /**
   * Containers once managed (by this run, or by an earlier one as the store says) that are not
   * managed now: their removal is still container_removed, their return no container_found.
   */
  const parked = new Map<string, { name: string; iface: string | null }>();
  let parkedFromStore = false;
  const vethCache = new Map<string, { pid: number; veth: HostVeth | null }>();
  const ring: Snapshot[] = [];
  const startedAt = now();
  let dockerState = 'not contacted yet';
  let dockerDown = false;
  let lastPollAt = 0;
  let timers: NodeJS.Timeout[] = [];
  let unwatch: (() => void) | undefined;
  let stopped = false;
  let busy: Promise<unknown> = Promise.resolve();
  const jobState: DaemonStatus['jobs'] = {};
  const cronOf = (c: BandwidthdConfig): Record<JobName, string> => ({
    reset: c.scheduler.reset_cron,
    cleanup: c.scheduler.cleanup_cron,
    history: c.scheduler.history_cron,
    health: c.scheduler.health_cron,
    webhook_retry: c.scheduler.webhook_retry_cron,
  });
  let jobCron = cronOf(config);
  const nextAt = new Map<JobName, number>();

  /** Everything that touches containers, counters or rules runs one at a time. */
  function serial<T>(fn: () => Promise<T>): Promise<T> {
    const p = busy.then(fn, fn);
    busy = p.catch(() => undefined);
    return p;
  }

  function shapeOf(m: Managed, mode: Mode): InterfaceShape | null {
    if (mode === 'none') return null;
    const b = config.bandwidth;
    const q = config.quota;
    const burstBytes = (rateMbps: number): number => Math.min(Math.round(mbit(b.default_burst_mbps) / 8), Math.floor((mbit(rateMbps) * (MAX_BURST_SECONDS - 1)) / 8));
    const dflt = (rate: number): Shape => ({ rateBps: mbit(rate), ceilBps: mbit(Math.max(rate, b.default_ceil_mbps)), burstBytes: Math.max(1, burstBytes(rate)) });
    if (mode === 'default') return { iface: m.iface, ifindex: m.ifindex, down: dflt(b.default_rx_mbps), up: dflt(b.default_tx_mbps) };
    return { iface: m.iface, ifindex: m.ifindex, down: { rateBps: mbit(q.exceeded_speed_rx_mbps) }, up: { rateBps: mbit(q.exceeded_speed_tx_mbps) } };
  }

  const wantedMode = (m: Managed): Mode => (m.row.exceeded ? (config.quota.disconnect_on_exceeded ? 'none' : 'exceeded') : 'default');

  /** Brings every managed interface to its wanted rules (all of them with `force`); returns the interfaces tc failed on. */
  async function enforce(force = false): Promise<Set<string>> {
    const apply: InterfaceShape[] = [];
    const remove: Managed[] = [];
    for (const m of managed.values()) {
      const want = wantedMode(m);
      if (!force && m.mode === want) continue;
      if (want === 'none') remove.push(m);
      else apply.push(shapeOf(m, want) as InterfaceShape);
      m.mode = want;
    }
    const failures: { iface: string; error: string }[] = [];
    // A tc that cannot even run (missing binary, time-out) fails every interface of the call.
    const attempt = async (ifaces: string[], fn: () => Promise<{ failed: { iface: string; error: string }[] }>): Promise<void> => {
      try {
        failures.push(...(await fn()).failed);
      } catch (err) {
        for (const iface of ifaces) failures.push({ iface, error: errorMessage(err) });
      }
    };
    if (apply.length > 0) await attempt(apply.map((s) => s.iface), () => tc.apply(apply));
    if (remove.length > 0) await attempt(remove.map((m) => m.iface), () => tc.remove(remove.map((m) => ({ iface: m.iface, ifindex: m.ifindex }))));
    const failedIfaces = new Set(failures.map((f) => f.iface));
    for (const m of managed.values()) {
      const f = failures.find((x) => x.iface === m.iface);
      if (f) {
        m.mode = null; // retried on the next poll
        if (!m.tcFailed) {
          m.tcFailed = true;
          log.error({ container: m.name, iface: m.iface }, `traffic control failed: ${f.error}`);
          notifier.notify('tc_failed', `tc failed on ${m.iface} (${m.name}): ${f.error}`, { container: m.name, interface: m.iface });
        }
      } else if (!failedIfaces.has(m.iface)) {
        m.tcFailed = false;
      }
    }
    return failedIfaces;
  }

  async function discover(): Promise<void> {
    let list: ContainerInfo[];
    try {
      // Stopped containers too (they cost no inspect): only one the engine no longer knows is removed.
      list = await deps.source.list();
      dockerState = 'connected';
      if (dockerDown) log.info('container runtime reachable again');
      dockerDown = false;
    } catch (err) {
      dockerState = `unreachable: ${errorMessage(err)}`;
      if (!dockerDown) {
        dockerDown = true;
        log.error(`container runtime error: ${errorMessage(err)}`);
        notifier.notify('docker_error', errorMessage(err), { endpoint: config.docker.endpoint });
      }
      return;
    }
    const t = now();
    const known = new Map(list.map((c) => [c.id, c]));
    // A veth the first listing of this run finds may predate it: its counters only set a baseline.
    // One found later was created since the last listing (a start, a restart, a reconnected
    // network) and holds this container's traffic alone, none of it counted yet: it counts from
    // zero, else every restart would let a poll interval of traffic go unmetered.
    const newVethBaseline = parkedFromStore ? 0 : null;
    if (!parkedFromStore) {
      // What an earlier run managed is no news at this start: a container still there is managed
      // again without container_found, one gone while the daemon was down is container_removed
      // below. A row without interface is one whose removal was already announced.
      parkedFromStore = true;
      for (const r of store.containers()) if (r.iface !== null) parked.set(r.id, { name: r.name, iface: r.iface });
    }
    // A veth can go while the pid stays (`docker network disconnect` + `connect` gives the
    // container a new one): a cached veth is trusted only while its interface exists.
    const live = await deps.readCounters([...vethCache.values()].flatMap((v) => (v.veth ? [v.veth.iface] : [])));
    const seen = new Set<string>();
    for (const c of list) {
      // A container in another's network namespace (`--network container:X`) has X's veth: its
      // traffic is X's, metered, quota-checked and shaped once, as X's.
      if (!c.running || c.pid <= 0 || c.networkMode.startsWith('container:')) continue;
      let cached = vethCache.get(c.id);
      if (!cached || cached.pid !== c.pid || cached.veth === null || !live.has(cached.veth.iface)) {
        cached = { pid: c.pid, veth: await deps.hostVethOf(c.pid).catch(() => null) };
        vethCache.set(c.id, cached);
      }
      const veth = cached.veth;
      if (!veth) continue;
      seen.add(c.id);
      const quota = quotaBytesOf(c.labels, config.quota.default_quota_gb);
      const old = managed.get(c.id);
      if (old && old.iface === veth.iface && old.ifindex === veth.ifindex) {
        old.quotaBytes = quota.bytes;
        old.name = c.name;
        if (old.row.name !== c.name) {
          // `docker rename`: stored at once, since a successor is found by the stored name. Under
          // the old one, a new container taking that name would inherit this one's day.
          old.row.name = c.name;
          store.upsert(old.row);
        }
        continue;
      }
      if (quota.bad !== undefined) log.warn({ container: c.name, value: quota.bad }, `label ${QUOTA_LABEL} is not a decimal number of GB at or above 0; the default quota applies`);
      if (old) tc.forget(old.iface);
      const prev = store.container(c.id);
      let row: ContainerRow;
      if (prev) {
        row = { ...prev, name: c.name, iface: veth.iface, last_rx: prev.iface === veth.iface ? prev.last_rx : newVethBaseline, last_tx: prev.iface === veth.iface ? prev.last_tx : newVethBaseline, last_seen_at: t };
      } else {
        row = { id: c.id, name: c.name, iface: veth.iface, rx_day: 0, tx_day: 0, last_rx: newVethBaseline, last_tx: newVethBaseline, warned: 0, exceeded: 0, first_seen_at: t, last_seen_at: t };
        // A container removed and created again under its name (`docker rm` + `run`, or a panel
        // that recreates a server's container on each start) keeps the day's usage and state:
        // else recreating it would be a fresh daily allowance. The old row hands them over.
        const before = store.predecessor(c.name, c.id);
        if (before && !list.some((other) => other.id === before.id && other.running)) {
          row = { ...row, rx_day: before.rx_day, tx_day: before.tx_day, warned: before.warned, exceeded: before.exceeded };
          store.upsert({ ...before, rx_day: 0, tx_day: 0, warned: 0, exceeded: 0 });
        }
      }
      store.upsert(row);
      managed.set(c.id, { id: c.id, name: c.name, pid: c.pid, iface: veth.iface, ifindex: veth.ifindex, quotaBytes: quota.bytes, row, rxBps: 0, txBps: 0, mode: null, tcFailed: false });
      if (!old) {
        const back = parked.delete(c.id);
        log.info({ container: c.name, id: c.id.slice(0, 12), iface: veth.iface, quota_bytes: quota.bytes }, back ? 'container managed again' : 'container found');
        if (!back) notifier.notify('container_found', `${c.name} is managed on ${veth.iface}`, { container: c.name, interface: veth.iface, quota_gb: displayGb(quota.bytes) });
      } else {
        log.info({ container: c.name, iface: veth.iface, was: old.iface }, 'container has a new host veth; its counters start from a new baseline');
      }
    }
    for (const [id, m] of managed) {
      if (seen.has(id)) continue;
      managed.delete(id);
      vethCache.delete(id);
      // The veth left with the container; only the cache entry and a possible IFB remain.
      tc.forget(m.iface);
      const still = known.get(id);
      if (still) {
        // spec/3 §6.2 has no event for a stop: container_removed waits until the container is gone.
        parked.set(id, { name: m.name, iface: m.iface });
        log.info({ container: m.name }, `container ${still.running ? 'lost its host veth' : 'stopped'}; managed again once it runs with one`);
      } else {
        removed(id, m.name, m.iface);
      }
    }
    for (const [id, p] of parked) {
      if (known.has(id)) continue;
      parked.delete(id);
      removed(id, p.name, p.iface);
    }
    for (const id of vethCache.keys()) if (!seen.has(id) && !managed.has(id)) vethCache.delete(id);
  }

  /** Announces a removal once: the row keeps its usage (a successor of the name takes it over) but loses its interface. */
  function removed(id: string, name: string, iface: string | null): void {
    const row = store.container(id);
    if (row) store.upsert({ ...row, iface: null });
    log.info({ container: name }, 'container removed');
    notifier.notify('container_removed', `${name} was removed`, { container: name, interface: iface });
  }

  async function poll(): Promise<void> {
    const t = now();
    const elapsed = lastPollAt > 0 ? (t - lastPollAt) / 1000 : 0;
    lastPollAt = t;
    const counters = await deps.readCounters([...managed.values()].map((m) => m.iface));
    // History buckets are history.rollup_interval long (default 1h), aligned to the epoch.
    const bucketMs = durationMs(config.history.rollup_interval);
    const hour = Math.floor(t / bucketMs) * bucketMs;
    const events: (() => void)[] = [];
    // The rows in memory take their new state even when the store refuses it (a full disk), and
    // enforce() shapes by them: a warning or an exceeded quota is told all the same.
    try {
      store.database.transaction(() => {
        for (const m of managed.values()) {
          const c = counters.get(m.iface);
          if (!c) continue;
          const rxRaw = c.txBytes; // host TX = into the container
          const txRaw = c.rxBytes;
          const r = m.row;
          // A counter that goes backwards was reset (new veth of the same name): count from zero.
          const dRx = r.last_rx === null ? 0 : rxRaw >= r.last_rx ? rxRaw - r.last_rx : rxRaw;
          const dTx = r.last_tx === null ? 0 : txRaw >= r.last_tx ? txRaw - r.last_tx : txRaw;
          m.rxBps = elapsed > 0 ? (dRx * 8) / elapsed : 0;
          m.txBps = elapsed > 0 ? (dTx * 8) / elapsed : 0;
          r.last_rx = rxRaw;
          r.last_tx = txRaw;
          r.rx_day += dRx;
          r.tx_day += dTx;
          r.last_seen_at = t;
          if ((dRx > 0 || dTx > 0) && config.history.enabled) store.addHourly(m.id, hour, dRx, dTx);
          const q = evaluateQuota(r.rx_day + r.tx_day, m.quotaBytes, warnPct, r.warned === 1, r.exceeded === 1);
          const dir = r.rx_day >= r.tx_day ? 'rx' : 'tx';
          const data = {
            container: m.name,
            interface: m.iface,
            direction: dir,
            current_mbps: Math.round((dir === 'rx' ? m.rxBps : m.txBps) / 10_000) / 100,
            limit_mbps: 0,
            usage_pct: Math.round(q.pct * 10) / 10,
            usage_bytes: r.rx_day + r.tx_day,
            quota_bytes: m.quotaBytes,
          };
          if (q.warn) {
            r.warned = 1;
            data.limit_mbps = dir === 'rx' ? config.bandwidth.default_rx_mbps : config.bandwidth.default_tx_mbps;
            events.push(() => {
              // Logged as the exceeded quota is: an operator without webhooks learns it from the log.
              log.info({ container: m.name, usage_bytes: data.usage_bytes, quota_bytes: m.quotaBytes }, `daily quota warning: ${data.usage_pct}% used`);
              notifier.notify('quota_warning', `${m.name} used ${data.usage_pct}% of its daily quota`, data);
            });
          }
          if (q.exceed) {
            r.exceeded = 1;
            r.warned = 1;
            data.limit_mbps = config.quota.disconnect_on_exceeded ? 0 : dir === 'rx' ? config.quota.exceeded_speed_rx_mbps : config.quota.exceeded_speed_tx_mbps;
            const what = config.quota.disconnect_on_exceeded ? 'all rate rules removed' : `throttled to ${config.quota.exceeded_speed_rx_mbps}/${config.quota.exceeded_speed_tx_mbps} Mbit/s`;
            events.push(() => {
              log.warn({ container: m.name, usage_bytes: data.usage_bytes, quota_bytes: m.quotaBytes }, `daily quota exceeded: ${what}`);
              notifier.notify('quota_exceeded', `${m.name} exceeded its daily quota: ${what}`, data);
            });
          }
          store.upsert(r);
        }
      });
    } finally {
      for (const e of events) e();
    }
  }

  async function cycleNow(): Promise<void> {
    await discover();
    await poll();
    await enforce();
  }

  function resetRows(rows: Managed[] | null): string[] {
    const names: string[] = [];
    store.database.transaction(() => {
      const all = rows ?? null;
      const targets: ContainerRow[] = all ? all.map((m) => m.row) : store.containers().map((r) => managed.get(r.id)?.row ?? r);
      for (const r of targets) {
        r.rx_day = 0;
        r.tx_day = 0;
        r.warned = 0;
        r.exceeded = 0;
        store.upsert(r);
        names.push(r.name);
      }
    });
    return names;
  }

  async function scheduledReset(): Promise<string> {
    const names = resetRows(null);
    store.setMeta('last_reset', String(now()));
    await enforce();
    log.info({ containers: names.length }, 'daily quota reset');
    return `daily counters reset for ${names.length} containers`;
  }

  async function cleanup(): Promise<string> {
    const cutoff = now() - config.cleanup.stale_container_hours * 3_600_000;
    let forgotten = 0;
    for (const r of store.containers()) {
      if (!managed.has(r.id) && r.last_seen_at < cutoff) {
        store.deleteContainer(r.id);
        forgotten++;
      }
    }
    let ifbs = 0;
    if (config.cleanup.remove_tc_rules) ifbs = await sweepIfbs();
    if (config.cleanup.compact_db) store.database.compact();
    const text = `forgot ${forgotten} stale containers, removed ${ifbs} orphan IFB devices${config.cleanup.compact_db ? ', compacted the store' : ''}`;
    if (forgotten > 0 || ifbs > 0) notifier.notify('cleanup', text, { containers: forgotten, ifbs });
    return text;
  }

  /**
   * The history job: prunes rows past retention and, with export_enabled, exports the day before
   * `dueAt` (in `timezone`): yesterday when run on time, or the day a run missed while the daemon
   * was stopped would have exported. Records a run that succeeded for that catch-up (one that
   * failed counts as missed at the next start).
   */
  async function history(dueAt = now()): Promise<string> {
    const t = now();
    const removed = store.deleteHourlyBefore(t - config.history.retention_days * 86_400_000);
    let exported = '';
    if (config.history.export_enabled) {
      const today = periodStart(dueAt, 'day', tz);
      const yesterday = periodStart(today - 1, 'day', tz);
      const rows = store.hourly(yesterday, today);
      const p = localParts(yesterday, tz);
      const day = `${p.year}-${String(p.month).padStart(2, '0')}-${String(p.day).padStart(2, '0')}`;
      makeDirs(config.history.export_path);
      const base = join(config.history.export_path, `usage-${day}`);
      const csvCell = (s: string): string => (/[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s);
      const csv = ['start,container_id,container,rx_bytes,tx_bytes', ...rows.map((r) => [new Date(r.hour).toISOString(), r.container, csvCell(r.name), r.rx_bytes, r.tx_bytes].join(','))].join('\n') + '\n';
      await writeFile(`${base}.csv`, csv);
      await writeFile(`${base}.json`, JSON.stringify({ day, timezone: tz, bucket: config.history.rollup_interval, rows: rows.map((r) => ({ start: new Date(r.hour).toISOString(), container_id: r.container, container: r.name, rx_bytes: r.rx_bytes, tx_bytes: r.tx_bytes })) }, null, 2) + '\n');
      exported = `, exported ${rows.length} rows to ${base}.csv/.json`;
    }
    store.setMeta('last_history', String(t));
    return `removed ${removed} history rows older than ${config.history.retention_days} days${exported}`;
  }

  async function health(): Promise<string> {
    const wanted = [...managed.values()].filter((m) => m.mode !== null && m.mode !== 'none').map((m) => shapeOf(m, m.mode as Mode) as InterfaceShape);
    const problems = await tc.verify(wanted);
    for (const p of problems) {
      log.warn({ iface: p.iface }, `rules not as applied (${p.problem}); repairing`);
      await tc.remove([{ iface: p.iface, ifindex: p.ifindex }]);
      const m = [...managed.values()].find((x) => x.iface === p.iface);
      if (m) m.mode = null;
    }
    if (problems.length === 0) return `all ${wanted.length} interfaces as applied`;
    const failedIfaces = await enforce();
    const failed = problems.filter((p) => failedIfaces.has(p.iface)).length;
    return `repaired ${problems.length - failed} of ${wanted.length} interfaces${failed > 0 ? `, ${failed} failed` : ''}`;
  }

  async function webhookRetry(): Promise<string> {
    const r = await notifier.retryStored();
    return `delivered ${r.delivered} stored webhooks, ${r.left} left`;
  }

  const jobs: Record<JobName, () => Promise<string>> = { reset: scheduledReset, cleanup, history: () => history(), health, webhook_retry: webhookRetry };

  /** Runs a job (or `fn`, a variant of it) with its logging, error event and status; returns its outcome. */
  async function runJob(name: JobName, fn: () => Promise<string> = jobs[name]): Promise<string> {
    const started = new Date(now()).toISOString();
    // The retry pass waits on webhook endpoints and touches no container, counter or rule: it runs
    // beside the serial work so that a dead endpoint never delays polling, quotas or the CLI.
    const work = name === 'webhook_retry' ? fn() : serial(fn);
    const text = await work.catch((err: unknown) => {
      log.error({ job: name }, `job failed: ${errorMessage(err)}`);
      notifier.notify('error', `job ${name} failed: ${errorMessage(err)}`, { job: name });
      throw err;
    });
    jobState[name] = { next_at: jobState[name]?.next_at ?? null, last_at: started, last_result: text };
    if (name !== 'webhook_retry' || !text.startsWith('delivered 0 ')) log.info({ job: name }, text);
    return text;
  }

  function enabledJobs(): JobName[] {
    // The daily reset is what makes the quota daily: it runs even with scheduler.enabled false.
    if (!config.scheduler.enabled) return ['reset'];
    return JOBS.filter((j) => (j === 'cleanup' ? config.cleanup.enabled : j === 'history' ? config.history.enabled : true));
  }

  /** Sets a job's next run; null: it will not run (disabled). */
  function setNext(job: JobName, at: number | null): void {
    if (at === null) nextAt.delete(job);
    else nextAt.set(job, at);
    jobState[job] = { next_at: at === null ? null : new Date(at).toISOString(), last_at: jobState[job]?.last_at ?? null, last_result: jobState[job]?.last_result ?? null };
  }

  function planNext(job: JobName, from: number): void {
    setNext(job, nextCronTime(jobCron[job], tz, new Date(from)).getTime());
  }

  /** At start and on reconfigure: every job planned from `from`, and a disabled one shown with next_at null. */
  function planJobs(from: number): void {
    const on = enabledJobs();
    for (const job of JOBS) {
      if (on.includes(job)) planNext(job, from);
      else setNext(job, null);
    }
  }

  function tick(): void {
    const t = now();
    for (const job of enabledJobs()) {
      const at = nextAt.get(job);
      if (at === undefined || t < at) continue;
      planNext(job, t);
      // cleanup.interval is the least time between two scheduled cleanups, whatever the cron says.
      const last = jobState[job]?.last_at;
      if (job === 'cleanup' && last && t - Date.parse(last) < durationMs(config.cleanup.interval)) continue;
      void runJob(job).catch(() => undefined);
    }
  }

  /**
   * At start: the due time of the last history run that fell due while the daemon was stopped
   * (after the run recorded last), or undefined when none did or there is nothing to export. Only
   * the day the export covers matters, so the search goes back one local day at a time (one cron
   * evaluation each) instead of through every run of a frequent cron.
   */
  function missedHistoryRun(t: number): number | undefined {
    const recorded = store.meta('last_history');
    if (recorded === undefined) store.setMeta('last_history', String(t));
    if (recorded === undefined || !config.history.export_enabled || !enabledJobs().includes('history')) return undefined;
    const last = Number(recorded);
    for (let end = t, dayStart = periodStart(t, 'day', tz); end > last; end = dayStart - 1, dayStart = periodStart(dayStart - 1, 'day', tz)) {
      const due = nextCronTime(jobCron.history, tz, new Date(Math.max(last, dayStart - 1))).getTime();
      if (due <= end) return due;
    }
    return undefined;
  }

  function snapshot(): void {
    let rx = 0;
    let tx = 0;
    let exceeded = 0;
    for (const m of managed.values()) {
      rx += m.rxBps;
      tx += m.txBps;
      if (m.row.exceeded) exceeded++;
    }
    ring.push({ at: new Date(now()).toISOString(), containers: managed.size, exceeded, rx_mbps: Math.round(rx / 10_000) / 100, tx_mbps: Math.round(tx / 10_000) / 100 });
    while (ring.length > config.status.history_size) ring.shift();
  }

  /**
   * Runs `fn` every `ms`. A failure (the store refusing writes on a full disk, say) is an `error`
   * event, logged and sent once while it repeats, as an engine outage is, since it would repeat at
   * every poll; its end is logged.
   */
  function every(task: string, ms: number, fn: () => unknown): void {
    let failure: string | undefined;
    const t = setInterval(() => {
      if (stopped) return;
      void Promise.resolve()
        .then(fn)
        .then(
          () => {
            if (failure !== undefined) log.info({ task }, 'periodic task works again');
            failure = undefined;
          },
          (err: unknown) => {
            if (errorMessage(err) === failure) return;
            failure = errorMessage(err);
            log.error({ task }, `periodic task failed: ${failure}`);
            notifier.notify('error', `${task} failed: ${failure}`, { task });
          },
        );
    }, ms);
    timers.push(t);
  }

  function startTimers(): void {
    for (const t of timers) clearInterval(t);
    timers = [];
    unwatch?.();
    unwatch = undefined;
    every('poll', durationMs(config.bandwidth.poll_interval), () => serial(async () => (await poll(), await enforce())));
    every('discovery', durationMs(config.docker.discovery_interval), () => serial(async () => (await discover(), await enforce())));
    every('scheduler', durationMs(config.scheduler.check_interval), tick);
    every('status snapshot', durationMs(config.status.update_interval), snapshot);
    if (config.docker.watch_events) unwatch = deps.source.watch(() => void serial(async () => (await discover(), await enforce())));
  }

  /** Deletes IFB devices whose interface is gone; a failure is logged and counts as none deleted. */
  function sweepIfbs(): Promise<number> {
    return tc.sweepOrphanIfbs().catch((err: unknown) => (log.warn(`IFB sweep failed: ${errorMessage(err)}`), 0));
  }

  function find(key: string): Managed[] {
    const k = key.toLowerCase();
    return [...managed.values()].filter((m) => m.id === k || m.name === key || (k.length >= MIN_ID_PREFIX && m.id.startsWith(k)));
  }

  return {
    async start() {
      const t = now();
      const last = Number(store.meta('last_reset') ?? t);
      if (store.meta('last_reset') === undefined) store.setMeta('last_reset', String(t));
      // A reset that fell due while the daemon was down happens now, before quotas are judged.
      if (nextCronTime(config.scheduler.reset_cron, tz, new Date(last)).getTime() <= t) {
        log.info('a daily reset fell due while the daemon was stopped; resetting now');
        resetRows(null);
        store.setMeta('last_reset', String(t));
      }
      // Likewise the last history export that fell due meanwhile: that day's file would otherwise
      // never be written. Only the last one: earlier days of a long outage are left alone.
      const missed = missedHistoryRun(t);
      if (missed !== undefined) {
        log.info({ job: 'history', due_at: new Date(missed).toISOString() }, 'a history export fell due while the daemon was stopped; exporting now');
        await runJob('history', () => history(missed)).catch(() => undefined);
      }
      planJobs(t);
      await sweepIfbs();
      // A failing first cycle (no counters, say) is logged; the timers below keep trying.
      await serial(cycleNow).catch((err: unknown) => log.error(`first cycle failed: ${errorMessage(err)}`));
      startTimers();
      snapshot();
      // Deliveries stored by an earlier run go out now rather than at the next retry job.
      if (config.webhook.persist_queue && store.outboxCount() > 0) void runJob('webhook_retry').catch(() => undefined);
    },
    async stop() {
      stopped = true;
      for (const t of timers) clearInterval(t);
      timers = [];
      unwatch?.();
      await busy;
      // IFBs of containers that left since the last apply would otherwise wait for the next start.
      await sweepIfbs();
    },
    status() {
      const last = Number(store.meta('last_reset') ?? startedAt);
      return {
        version: SERVICE_VERSION,
        pid: process.pid,
        uptime_seconds: Math.round((now() - startedAt) / 1000),
        docker: dockerState,
        timezone: tz,
        last_reset_at: new Date(last).toISOString(),
        // The planned run: counted from the last reset, a reset_cron changed by a reload can give a time already past.
        next_reset_at: new Date(nextAt.get('reset') ?? nextCronTime(config.scheduler.reset_cron, tz, new Date(last))).toISOString(),
        containers: [...managed.values()].map((m) => ({
          id: m.id,
          name: m.name,
          iface: m.iface,
          rx_day_bytes: m.row.rx_day,
          tx_day_bytes: m.row.tx_day,
          quota_bytes: m.quotaBytes,
          usage_pct: m.quotaBytes > 0 ? Math.round(((m.row.rx_day + m.row.tx_day) / m.quotaBytes) * 1000) / 10 : 0,
          rx_mbps: Math.round(m.rxBps / 10_000) / 100,
          tx_mbps: Math.round(m.txBps / 10_000) / 100,
          warned: m.row.warned === 1,
          exceeded: m.row.exceeded === 1,
          mode: m.mode ?? wantedMode(m),
        })),
        webhooks: { ...notifier.stats(), persisted: store.outboxCount() },
        jobs: jobState,
        history: ring.slice(-20),
      };
    },
    reset(container) {
      return serial(async () => {
        let targets: Managed[] | null = null;
        if (container !== undefined) {
          targets = find(container);
          if (targets.length === 0) {
            const hint = container.length < MIN_ID_PREFIX ? ` (a name matches whole; an id prefix needs at least ${MIN_ID_PREFIX} characters)` : '';
            throw Object.assign(new Error(`no managed container ${container}${hint}`), { code: 'ERR_NOT_FOUND', status: 404 });
          }
        }
        const names = resetRows(targets);
        await enforce();
        log.info({ containers: names }, 'counters reset by bandwidth reset');
        notifier.notify('reset', container ? `counters of ${names.join(', ')} reset` : `counters of all ${names.length} containers reset`, { containers: names.join(', ') });
        return names;
      });
    },
    runJob: (name) => runJob(name),
    cycle: () => serial(cycleNow),
    reconfigure(next) {
      return serial(async () => {
        config = next;
        tz = next.timezone;
        warnPct = warnPctOf(next);
        jobCron = cronOf(next);
        planJobs(now());
        while (ring.length > next.status.history_size) ring.shift();
        if (!stopped) startTimers();
        await discover();
        await enforce(true);
      });
    },
  };
}

/**
 * Node agent benchmark (issue: one cycle for 1,000 servers under 50 ms of CPU, PUT /limits for
 * 1,000 servers with the tc work under 1 s, RSS under 80 MiB). Runs inside a network namespace
 * made by scripts/bench.ts that holds 1,000 veth pairs, so /proc/net/dev, sysfs and tc see only
 * those. The agent is the real one (store, accounting, tc library); only discovery is replaced by
 * a fixed list of the 1,000 interfaces, since Docker is not what is measured. Everything else
 * `serve` runs is there: the node API on loopback, the local admin socket's API and the panel
 * client (its panel unreachable, so it keeps retrying its registration).
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getHeapSpaceStatistics } from 'node:v8';
import type { ManagedContainer } from '../../roles/node-agent/agent.ts';
import type { PanelClient } from '../../roles/node-agent/panel-client.ts';
import { useAgentMemoryProfile } from '../../roles/node-agent/memory-profile.ts';

const N = Number(process.argv[2] ?? 1000);
const CYCLES = 20;
/** 20 times the default 5,000 packets/s floor: level 3. */
const FLOOD_PPS = 100_000;
/** When the synthetic flood started (performance.now()), null before. */
let flood: number | null = null;

/** A /proc/self/status field (kB) in MiB. */
function statusMib(field: string): number {
  const kb = new RegExp(`^${field}:\\s+([0-9]+) kB`, 'm').exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
  return Math.round(Number(kb ?? 0) / 1024);
}

function uuid(i: number): string {
  return `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
}

async function main(): Promise<void> {
  // As `bandwidth-node serve` does, before the agent's modules are loaded.
  useAgentMemoryProfile();
  const { default: pino } = await import('pino');
  const { readCounters } = await import('../../src/lib/veth.ts');
  const { createTrafficControl } = await import('../../src/lib/tc.ts');
  const { createAgent } = await import('../../roles/node-agent/agent.ts');
  const { openAgentStore } = await import('../../roles/node-agent/store.ts');
  const { createNodeApi } = await import('../../roles/node-agent/api.ts');
  const { createPanelClient } = await import('../../roles/node-agent/panel-client.ts');
  const { validateNodeAgentConfig } = await import('../../src/contracts/validators.js');
  const dir = mkdtempSync(join(tmpdir(), 'hk-bench-agent-'));
  const config = { panel: { url: 'http://127.0.0.1:9', token_file: '/dev/null' }, database: { path: join(dir, 'agent.db') }, scheduler: { enabled: false }, cleanup: { enabled: false } };
  if (!validateNodeAgentConfig(config)) throw new Error('bench config invalid');
  const ifindex = (name: string): number => Number(readFileSync(`/sys/class/net/${name}/ifindex`, 'utf8').trim());
  const containers: ManagedContainer[] = [];
  for (let i = 0; i < N; i++) {
    const iface = `hkbh${i}`;
    containers.push({ uuid: uuid(i), containerId: `c${i}`, name: uuid(i), iface, ifindex: ifindex(iface) });
  }
  const logger = pino({ level: process.env['BENCH_LOG'] ?? 'warn' });
  const store = openAgentStore(config.database);
  const panel: PanelClient = createPanelClient({ url: config.panel.url, token: 'ab'.repeat(32) });
  const agent = createAgent({
    config,
    store,
    logger,
    panel,
    tokenFile: '/dev/null',
    tc: createTrafficControl({ logger }),
    containers: {
      scan: async () => containers,
      watch: () => () => undefined,
      // The real reading, plus a synthetic flood into the first server once `flood` is set (a
      // namespace with no traffic has none to detect): its packets at FLOOD_PPS since the start.
      counters: async (ifaces) => {
        const m = await readCounters(ifaces);
        const c = m.get('hkbh0');
        if (flood !== null && c) c.txPackets += Math.round(((performance.now() - flood) / 1000) * FLOOD_PPS);
        return m;
      },
    },
  });
  const api = createNodeApi(agent, { token: () => 'ab'.repeat(32), logger });
  await api.listen({ host: '127.0.0.1', port: 0 });
  const local = createNodeApi(agent, { logger });
  await local.listen({ path: join(dir, 'agent.sock') });
  let t = performance.now();
  await agent.rescan(); // discovery of 1,000 new containers: prepares their IFB devices
  const discoveryMs = performance.now() - t;
  await agent.runCycle(); // first sight of every server

  const limits = (speed: number) => ({
    config_version: speed,
    timezone: 'UTC',
    servers: containers.map((c) => ({ uuid: c.uuid, enabled: true, rx_speed_mbps: speed, tx_speed_mbps: speed, rx_quota_day_gb: 100, exceed_action: 'throttle' as const, throttle_rx_mbps: 5, throttle_tx_mbps: 5 })),
  });
  t = performance.now();
  const c0 = process.cpuUsage();
  const first = await agent.applyLimits(limits(100));
  const applyFirstMs = performance.now() - t;
  const applyFirstCpu = process.cpuUsage(c0);
  t = performance.now();
  await agent.applyLimits(limits(200));
  const applyChangeMs = performance.now() - t;

  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
  /** CPU and wall medians of CYCLES cycles, in ms. */
  const cycles = async (): Promise<{ cpu: number; wall: number }> => {
    const cpu: number[] = [];
    const wall: number[] = [];
    for (let i = 0; i < CYCLES; i++) {
      const c0 = process.cpuUsage();
      const w0 = performance.now();
      await agent.runCycle();
      wall.push(performance.now() - w0);
      const c = process.cpuUsage(c0);
      cpu.push((c.user + c.system) / 1000);
    }
    return { cpu: median(cpu), wall: median(wall) };
  };
  const plain = await cycles();
  // The same cycles with SMART on for every server (the limits unchanged otherwise), then a flood
  // on one of them: how many cycles until it is an event.
  await agent.applyLimits({ ...limits(200), config_version: 201, servers: limits(200).servers.map((x) => ({ ...x, smart: true })) });
  const smart = await cycles();
  flood = performance.now();
  let detectionCycles = 0;
  while (agent.smartEvents(0, 1).events.length === 0 && detectionCycles < 10) {
    await new Promise((r) => setTimeout(r, 200));
    await agent.runCycle();
    detectionCycles++;
  }
  flood = null;
  // Then the agent runs as `serve` runs it for a few seconds (its cycles, the panel client's
  // registration retries) before its memory is read.
  await agent.start();
  await new Promise((r) => setTimeout(r, 5000));
  (globalThis as { gc?: () => void }).gc?.();
  const result = {
    servers: N,
    applied: first.applied,
    discovery_ms: Math.round(discoveryMs),
    put_limits_first_ms: Math.round(applyFirstMs),
    // The agent's own CPU in it (the rest is tc and the kernel).
    put_limits_first_agent_cpu_ms: Math.round((applyFirstCpu.user + applyFirstCpu.system) / 1000),
    put_limits_change_ms: Math.round(applyChangeMs),
    cycle_cpu_ms_median: Number(plain.cpu.toFixed(1)),
    cycle_wall_ms_median: Number(plain.wall.toFixed(1)),
    cycle_smart_cpu_ms_median: Number(smart.cpu.toFixed(1)),
    cycle_smart_wall_ms_median: Number(smart.wall.toFixed(1)),
    smart_overhead_pct: Number((((smart.cpu - plain.cpu) / plain.cpu) * 100).toFixed(1)),
    smart_detection_cycles: detectionCycles,
    rss_mib: Math.round(process.memoryUsage().rss / 1024 / 1024),
    // File-backed pages (the Node executable's code and data) and anonymous memory (heaps).
    rss_file_mib: statusMib('RssFile'),
    rss_anon_mib: statusMib('RssAnon'),
    new_space_mib: Math.round((getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.space_size ?? 0) / 1024 / 1024),
    heap_used_mib: Math.round(process.memoryUsage().heapUsed / 1024 / 1024),
  };
  await agent.stop();
  await Promise.all([api.close(), local.close()]);
  store.close();
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});

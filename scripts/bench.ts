/**
 * `npm run bench` / `make bench`: runs the benchmarks and writes their results, with the machine
 * and the date, to docs/benchmarks.md. Benchmarks never run as part of `make test`.
 *
 * node-agent: 1,000 veth pairs in a private network namespace (hkbench-<pid>), the agent's
 * cycle and PUT /limits measured inside it (scripts/bench/node-agent.ts).
 * proxy: osproxy against nginx in front of the same origin (scripts/bench/proxy.ts).
 * panel: the bandwidth addon's node-facing API and admin JSON (scripts/bench/panel.ts).
 *
 * `node scripts/bench.ts [node-agent] [proxy] [panel]` runs only the named sections (all without
 * arguments); each section replaces only its own part of docs/benchmarks.md.
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, dirname } from 'node:path';
import { build } from 'esbuild';
import { machine, waitForQuietKernel, writeSection } from './bench/report.ts';
import { panelBench } from './bench/panel.ts';
import { proxyBench } from './bench/proxy.ts';
import { freePort } from '../test/integration/hostkit-process.ts';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const N = 1000;
const AGENT_UNIT = join(ROOT, 'docs', 'bandwidth-node.service');

function sh(cmd: string, args: string[], input?: string): string {
  return execFileSync(cmd, args, { encoding: 'utf8', ...(input === undefined ? {} : { input }), stdio: ['pipe', 'pipe', 'inherit'] });
}

/** Bundled like the shipped executable (no type stripping at run time), so RSS is the real one. */
async function bundle(entry: string): Promise<string> {
  const out = join(ROOT, '.cache', 'bench', `${basename(entry, '.ts')}.cjs`);
  await build({ entryPoints: [entry], outfile: out, bundle: true, platform: 'node', format: 'cjs', target: 'node24', minifyWhitespace: true, legalComments: 'none', logLevel: 'warning' });
  return out;
}

/** The `Environment=` assignments of docs/bandwidth-node.service (`KEY=value` each). */
function unitEnvironment(): string[] {
  const unit = readFileSync(AGENT_UNIT, 'utf8');
  return [...unit.matchAll(/^Environment=(\S+)$/gm)].map((m) => m[1] as string);
}

async function nodeAgent(): Promise<Record<string, number>> {
  const script = await bundle(join(ROOT, 'scripts', 'bench', 'node-agent.ts'));
  const ns = `hkbench-${process.pid}`;
  sh('ip', ['netns', 'add', ns]);
  try {
    const lines: string[] = [];
    for (let i = 0; i < N; i++) lines.push(`link add hkbh${i} type veth peer name hkbc${i}`, `link set hkbh${i} up`, `link set hkbc${i} up`);
    sh('ip', ['-n', ns, '-batch', '-'], `${lines.join('\n')}\n`);
    // The agent runs with the memory settings its systemd unit ships.
    const out = sh('ip', ['netns', 'exec', ns, 'env', ...unitEnvironment(), process.execPath, '--expose-gc', script, String(N)]);
    return JSON.parse(out.trim().split('\n').pop() ?? '{}') as Record<string, number>;
  } finally {
    sh('ip', ['netns', 'del', ns]);
  }
}

/**
 * RSS of the built executable running `bandwidth-node serve` with the unit's settings, idle (no
 * containers, the panel unreachable), after it settled: what the executable itself costs. Its
 * file-backed part depends on how the executable came into the page cache: on a fault the kernel
 * maps the cached neighbours of the page too, and a file read whole with read() (a checksum, a
 * copy) sits in large folios that are mapped whole. Both runs start with the file dropped from
 * the cache; `faulted` lets the process page it in itself, as after a boot, otherwise it is read
 * whole first.
 */
async function idleExecutableRss(faulted: boolean): Promise<{ rss: number; anon: number; file: number }> {
  const exe = join(ROOT, 'dist', `hostkit-linux-${process.arch}`);
  // GNU dd with count=0 and nocache drops the whole file from the page cache; cat reads it all in.
  sh('dd', [`if=${exe}`, 'iflag=nocache', 'count=0', 'status=none']);
  if (!faulted) execFileSync('cat', [exe], { stdio: ['ignore', 'ignore', 'inherit'] });
  const dir = mkdtempSync(join(tmpdir(), 'hk-bench-idle-'));
  try {
    const token = join(dir, 'token');
    writeFileSync(token, randomBytes(32).toString('hex'), { mode: 0o600 });
    const config = join(dir, 'config.yaml');
    writeFileSync(config, `panel: { url: "http://127.0.0.1:9", token_file: "${token}" }\ndatabase: { path: "${join(dir, 'agent.db')}" }\ngeneral: { socket_path: "${join(dir, 'agent.sock')}" }\napi: { listen: 127.0.0.1, port: ${await freePort()} }\nscheduler: { enabled: false }\ncleanup: { enabled: false }\n`);
    const env = Object.fromEntries(unitEnvironment().map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
    const child = spawn(exe, ['node-agent', 'serve', '--config', config], { env: { ...process.env, ...env }, stdio: 'ignore' });
    try {
      await new Promise((r) => setTimeout(r, 6000));
      const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
      const mib = (field: string): number => Math.round(Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) / 1024);
      return { rss: mib('VmRSS'), anon: mib('RssAnon'), file: mib('RssFile') };
    } finally {
      // Gone before the next run drops the file from the cache (mapped pages are not dropped).
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function nodeAgentBench(): Promise<void> {
  const date = new Date().toISOString().slice(0, 10);
  process.stdout.write(`bench: node agent, ${N} servers in a network namespace...\n`);
  const r = await nodeAgent();
  process.stdout.write(`${JSON.stringify(r)}\n`);
  const idle = await idleExecutableRss(true);
  const idleWarm = await idleExecutableRss(false);
  process.stdout.write(`${JSON.stringify({ idle_executable: idle, idle_executable_read_whole_first: idleWarm })}\n`);
  const body = [
    '',
    `${date}, ${machine()}.`,
    '',
    '| measure | result | target |',
    '|---|---|---|',
    `| one cycle (meter + account + store + enforce), ${N} servers, CPU median of 20 | ${r['cycle_cpu_ms_median']} ms (wall ${r['cycle_wall_ms_median']} ms) | < 50 ms CPU |`,
    `| the same cycle with SMART detection on for all ${N} servers, CPU median of 20 (wall ${r['cycle_smart_wall_ms_median']} ms): ${r['smart_overhead_pct']}% over the cycle without it | ${r['cycle_smart_cpu_ms_median']} ms | at most 10% over |`,
    `| cycles from the start of a flood (100,000 packets/s added to one server's real counters) to its \`attack_detected\` event | ${r['smart_detection_cycles']} | at most 2 |`,
    `| discovery of ${N} new containers (prepares their ${N} IFB devices and ingress qdiscs) | ${r['discovery_ms']} ms | |`,
    `| PUT /limits for ${N} servers, first limits on them (${N * 2} HTB trees, ${N} ingress redirects; ${r['put_limits_first_agent_cpu_ms']} ms of it the agent's own CPU, the rest tc and the kernel) | ${r['put_limits_first_ms']} ms | < 1 s |`,
    `| PUT /limits for ${N} servers, every speed changed | ${r['put_limits_change_ms']} ms | < 1 s |`,
    `| agent RSS after the runs and 5 s of running as \`serve\` runs it (node API and local socket listening, panel client retrying), with the memory settings of docs/bandwidth-node.service (${unitEnvironment().join(', ')}) and the V8 flags the agent sets on itself: ${r['rss_file_mib']} MiB of Node's own executable pages (a bare idle \`node\` maps 34 MiB of them), ${r['rss_anon_mib']} MiB anonymous (V8's young generation ${r['new_space_mib']} MiB, live heap after a full GC ${r['heap_used_mib']} MiB); the agent runs bundled like the executable, on the plain node binary | ${r['rss_mib']} MiB | < 80 MiB |`,
    `| RSS of the built executable, \`bandwidth-node serve\` idle (no containers, panel unreachable) with the same settings, the executable paged in by the process itself (as after a boot): ${idle.file} MiB file-backed (node's code and read-only data the agent's work touches, and the bundle), ${idle.anon} MiB anonymous | ${idle.rss} MiB | < 80 MiB |`,
    `| the same after the executable was read whole with read() before the start (a checksum or copy at install): the page cache then holds it in large folios, which the kernel maps whole on each fault (clean, shared pages it takes back under memory pressure): ${idleWarm.file} MiB file-backed, ${idleWarm.anon} MiB anonymous | ${idleWarm.rss} MiB | |`,
    '',
  ].join('\n');
  writeSection('Node agent', body);
  process.stdout.write(`bench: results written to docs/benchmarks.md\n`);
}

const SECTIONS: Record<string, () => Promise<void>> = {
  'node-agent': nodeAgentBench,
  proxy: async () => {
    process.stdout.write('bench: reverse proxy against nginx...\n');
    await proxyBench();
  },
  panel: async () => {
    process.stdout.write('bench: panel bandwidth addon...\n');
    await panelBench();
  },
};

async function main(): Promise<void> {
  const wanted = process.argv.slice(2);
  const unknown = wanted.filter((w) => !(w in SECTIONS));
  if (unknown.length > 0) throw new Error(`unknown benchmark section(s) ${unknown.join(', ')}; known: ${Object.keys(SECTIONS).join(', ')}`);
  for (const name of wanted.length === 0 ? Object.keys(SECTIONS) : wanted) {
    await waitForQuietKernel();
    await SECTIONS[name]?.();
  }
}

await main();

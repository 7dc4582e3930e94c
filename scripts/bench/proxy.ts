/**
 * `node scripts/bench/proxy.ts`: osproxy against nginx (`proxy_pass` with upstream keep-alive),
 * side by side in one run on this machine, both in front of the same origin (an nginx serving a
 * 100 B and a 1 MiB file), with one worker each and with every core each. wrk measures
 * requests/s and p50/p99 latency; the results replace the "## Proxy" section of
 * docs/benchmarks.md and nothing else. Every listener is on 127.0.0.1; runs are short (5 s after
 * a 5 s warm-up) since the machine is shared. The 100 B one-worker case also runs a bare Node.js
 * relay (relay.ts), and reports each server's CPU time per request, to show what the runtime
 * itself costs. The 100 B case runs once more at equal load (each connection pausing after every
 * response), for the latency both servers give at the same request rate.
 *
 * osproxy is the executable `make build` made (dist/hostkit-linux-x64; `make bench` builds it).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Bench } from 'tinybench';
import { createAclTest } from '../../roles/proxy/acl.ts';
import { freePort } from '../../test/integration/hostkit-process.ts';
import { machine, writeSection } from './report.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const HOST = 'bench.test';
// The site with every protection on (rate limits too high to fire, 1,000 ACL entries, WAF with body inspection).
const GUARDED = 'guarded.test';
// A browser's request headers, so the bot score has no reason to challenge wrk.
const BROWSER_HEADERS = [
  'User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36',
  'Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8',
  'Accept-Language: en-US,en;q=0.9',
  'Accept-Encoding: gzip, deflate, br',
];
// 1 KiB urlencoded form body: what WAF body inspection reads.
const FORM_BODY = `name=alice&comment=${'lorem+ipsum+dolor+sit+amet+'.repeat(37).slice(0, 1000)}`;
const TOKEN = 'bench-token-0123456789abcdef';
const DURATION = '5s';
/** Each server's warm-up per case: V8 keeps optimizing osproxy's data plane for several seconds. */
const WARMUP = '5s';
/**
 * Measured runs per server and case, the servers taking turns (which one goes first alternates);
 * the median counts. Five, because on a shared machine three let one slow moment pick the median.
 */
const ROUNDS = 5;
const CONNECTIONS = 32;
/**
 * The equal-load rows: each connection waits this long after every response (wrk's `delay`), so
 * both servers get about the same request rate, well below what either serves at most.
 */
const THINK_MS = 1;
const EXE = join(ROOT, 'dist', 'hostkit-linux-x64');
const RELAY = join(ROOT, 'scripts', 'bench', 'relay.ts');
const CORES = availableParallelism();

function nginxConf(dir: string, name: string, server: string, upstream = '', workers = 1): string {
  const file = join(dir, `${name}.conf`);
  writeFileSync(
    file,
    `worker_processes ${workers};
user root;
pid ${dir}/${name}.pid;
error_log ${dir}/${name}-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/${name}-body;
  proxy_temp_path ${dir}/${name}-proxy;
  ${upstream}
  server {
${server}
  }
}
`,
  );
  return file;
}

/** Starts a process and resolves once `port` accepts connections. */
async function startAndWait(cmd: string, args: string[], port: number): Promise<ChildProcess> {
  const child = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'inherit'] });
  const deadline = Date.now() + 20_000;
  for (;;) {
    const up = await new Promise<boolean>((resolve) => {
      const s = createServer();
      s.once('error', () => resolve(true));
      s.listen(port, '127.0.0.1', () => s.close(() => resolve(false)));
    });
    if (up) return child;
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`${cmd} did not start listening on ${port}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

interface WrkResult {
  rps: number;
  /** Latency percentiles, in milliseconds. */
  p50: number;
  p99: number;
  /** The server's CPU time per request, in µs (all its threads and processes); NaN when not measured. */
  cpuUs: number;
}

interface Load {
  host: string;
  path: string;
  headers?: readonly string[];
  /** A wrk Lua script (the POST body). */
  script?: string;
}

// Clock ticks per second of /proc/PID/stat's CPU times.
const CLOCK_TICKS = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());

/** CPU time (user + system, in ticks) of a process's threads and its child processes' (nginx's workers). */
function cpuTicks(pid: number): number {
  const own = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the parenthesised command name; utime and stime are the 14th and 15th fields.
  const fields = own.slice(own.lastIndexOf(')') + 2).split(' ');
  let ticks = Number(fields[11]) + Number(fields[12]);
  const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
  for (const child of children === '' ? [] : children.split(' ')) ticks += cpuTicks(Number(child));
  return ticks;
}

/** A run of wrk against a server; with `pid`, the server's CPU time per request too. */
function wrk(port: number, load: Load, duration: string, pid?: number): WrkResult {
  const before = pid === undefined ? 0 : cpuTicks(pid);
  const { host, path } = load;
  const args = ['-t1', `-c${CONNECTIONS}`, `-d${duration}`, '--latency', '-H', `Host: ${host}`];
  for (const h of load.headers ?? []) args.push('-H', h);
  if (load.script) args.push('-s', load.script);
  const out = execFileSync('wrk', [...args, `http://127.0.0.1:${port}${path}`], { encoding: 'utf8' });
  const rps = Number(/Requests\/sec:\s+([0-9.]+)/.exec(out)?.[1] ?? 0);
  if (/Non-2xx/.test(out)) throw new Error(`wrk saw errors on :${port}${path}:\n${out}`);
  const p50 = latencyMs(/^\s+50%\s+(\S+)/m.exec(out)?.[1] ?? '?');
  const p99 = latencyMs(/^\s+99%\s+(\S+)/m.exec(out)?.[1] ?? '?');
  const cpuUs = pid === undefined ? Number.NaN : ((cpuTicks(pid) - before) * 1e6) / CLOCK_TICKS / (rps * Number.parseFloat(duration));
  return { rps, p50, p99, cpuUs };
}

/** wrk's latency figure (`795.00us`, `1.23ms`, `1.01s`) in milliseconds. */
function latencyMs(figure: string): number {
  const m = /^([0-9.]+)(us|ms|s)$/.exec(figure);
  if (!m) throw new Error(`wrk printed a latency of ${figure}`);
  return Number(m[1]) * (m[2] === 'us' ? 1e-3 : m[2] === 's' ? 1e3 : 1);
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

/** Each column's median over a server's runs: one slow moment moves none of them. */
function summarize(runs: readonly WrkResult[]): WrkResult {
  if (runs.length === 0) throw new Error('no wrk runs');
  return {
    rps: median(runs.map((r) => r.rps)),
    p50: median(runs.map((r) => r.p50)),
    p99: median(runs.map((r) => r.p99)),
    cpuUs: median(runs.map((r) => r.cpuUs)),
  };
}

/** `p50 / p99` of a summary, for the tables. */
function latencies(r: WrkResult): string {
  return `${r.p50.toFixed(2)}ms / ${r.p99.toFixed(2)}ms`;
}

/** A blacklist of `n` distinct /24s in 10.0.0.0/8 (never the loopback wrk comes from). */
function aclEntries(n: number): string[] {
  return Array.from({ length: n }, (_, i) => `10.${(i >>> 8) & 255}.${i & 255}.0/24`);
}

/** In-process cost of one ACL lookup with 10 and 100,000 entries (tinybench); table rows. */
export async function aclLookupRows(): Promise<string[]> {
  // More distinct addresses than the matcher remembers, so every lookup searches; and a few
  // repeat clients, which the memo answers.
  const fresh = Array.from({ length: 65_536 }, (_, i) => `${10 + (i % 3)}.${(i * 7) & 255}.${(i >> 8) & 255}.${i & 255}`);
  const repeat = fresh.slice(0, 16);
  const bench = new Bench({ time: 500 });
  const sizes = [10, 1_000, 100_000];
  const names: [string, string][] = [];
  for (const n of sizes) {
    const t0 = performance.now();
    const test = createAclTest({ whitelist: [], blacklist: aclEntries(n) });
    const compileMs = performance.now() - t0;
    if (!test) throw new Error('empty ACL');
    let i = 0;
    let j = 0;
    const name = `${n.toLocaleString('en-US')} entries (compiled in ${compileMs.toFixed(1)} ms)`;
    names.push([`${name} new`, `${name} repeat`]);
    bench.add(`${name} new`, () => {
      test(fresh[i++ & 65_535] as string);
    });
    bench.add(`${name} repeat`, () => {
      test(repeat[j++ & 15] as string);
    });
  }
  await bench.run();
  const ns = (name: string): number => {
    const r = bench.tasks.find((t) => t.name === name)?.result;
    if (r?.state !== 'completed') throw new Error(`ACL lookup bench ${name}: ${r?.state ?? 'no result'}`);
    // latency.mean is in milliseconds.
    return Math.round(r.latency.mean * 1e6);
  };
  return names.map(([a, b]) => `| ${a.slice(0, -' new'.length)} | ${ns(a)} | ${ns(b)} |`);
}

/**
 * The equal-load row of one worker count: nginx and osproxy take turns under the paced load, and
 * each one's medians over the runs are reported (the servers are warm from the cases before).
 */
function pacedRow(workers: string, nginxPort: number, osproxyPort: number, load: Load): string {
  const nginxRuns: WrkResult[] = [];
  const osproxyRuns: WrkResult[] = [];
  const turns: [number, WrkResult[]][] = [
    [nginxPort, nginxRuns],
    [osproxyPort, osproxyRuns],
  ];
  for (let round = 0; round < ROUNDS; round++) {
    for (const [port, runs] of round % 2 === 0 ? turns : [...turns].reverse()) runs.push(wrk(port, load, DURATION));
  }
  const [n, o] = [summarize(nginxRuns), summarize(osproxyRuns)];
  process.stdout.write(`bench: 100 B at equal load, ${workers} worker(s): nginx ${JSON.stringify(n)}, osproxy ${JSON.stringify(o)}\n`);
  return `| ${workers} | ${Math.round(n.rps)} | ${Math.round(o.rps)} | ${latencies(n)} | ${latencies(o)} | ${(o.p99 / n.p99).toFixed(2)}x |`;
}

/**
 * An osproxy root: the plain bench site, and the guarded site with every check on and evaluated
 * for each request, none refusing: WAF families and body inspection, bot score, challenge auto,
 * auto-mitigation, connection limits, rate limits far above the load, and a 1,000-entry blacklist
 * the client is not on.
 */
function writeOsproxyRoot(root: string, o: { proxyPort: number; adminPort: number; originPort: number; workers: number }): void {
  mkdirSync(join(root, 'sites.d'), { recursive: true });
  writeFileSync(
    join(root, 'config.yaml'),
    `listen_http: ["127.0.0.1:${o.proxyPort}"]\nlisten_https: []\nlog_level: warn\nworkers: ${o.workers}\nadmin:\n  listen: "127.0.0.1:${o.adminPort}"\n  tokens: [{ name: bench, token: ${TOKEN}, role: readonly }]\n`,
  );
  // All of wrk's load comes from one address: the default per-IP rate limit would refuse it, and
  // wrk's bare requests (no User-Agent, no Accept) score as a bot.
  writeFileSync(
    join(root, 'sites.d', 'bench.yaml'),
    `id: bench\nhostnames: [${HOST}]\norigin: { url: "http://127.0.0.1:${o.originPort}" }\nprotection: { rate_limit: { enabled: false }, bot: { enabled: false } }\n`,
  );
  writeFileSync(
    join(root, 'sites.d', 'guarded.yaml'),
    JSON.stringify({
      id: 'guarded',
      hostnames: [GUARDED],
      origin: { url: `http://127.0.0.1:${o.originPort}` },
      protection: {
        acl: { blacklist: aclEntries(1000) },
        rate_limit: { per_ip: { requests: 1_000_000_000, window_secs: 60 }, per_site: { requests: 1_000_000_000, window_secs: 10 } },
        connections: { per_ip: 1000, per_site: 10_000 },
        waf: { sqli: true, xss: true, path_traversal: true, rce: true, scanner_block: true, bad_bot: true, inspect_body: true },
        bot: { enabled: true },
        challenge: { mode: 'auto' },
        auto_mitigation: { enabled: true },
      },
    }),
  );
}

/** Runs the proxy benchmark and writes its section; called by scripts/bench.ts or on its own. */
export async function proxyBench(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'hk-proxy-bench-'));
  const children: ChildProcess[] = [];
  // Interrupted (Ctrl-C, a timeout): the servers it started and its scratch directory go too.
  const interrupted = (): void => {
    for (const c of children) c.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
    process.exit(130);
  };
  process.once('SIGINT', interrupted).once('SIGTERM', interrupted);
  try {
    mkdirSync(join(dir, 'www'));
    writeFileSync(join(dir, 'www', 'small'), Buffer.alloc(100, 'a'));
    writeFileSync(join(dir, 'www', 'large'), Buffer.alloc(1024 * 1024, 'b'));
    const postScript = join(dir, 'post.lua');
    writeFileSync(postScript, `wrk.method = "POST"\nwrk.body = "${FORM_BODY}"\nwrk.headers["Content-Type"] = "application/x-www-form-urlencoded"\n`);
    const pacedScript = join(dir, 'paced.lua');
    writeFileSync(pacedScript, `function delay()\n  return ${THINK_MS}\nend\n`);
    if (!existsSync(EXE)) throw new Error(`${EXE} is missing: run make build (make bench does)`);
    const originPort = await freePort();
    // `/form` answers POSTs (a static location would refuse them with 405).
    const originConf = nginxConf(dir, 'origin', `    listen 127.0.0.1:${originPort};\n    root ${dir}/www;\n    location /form { return 200 "ok"; }`, '', CORES);
    children.push(await startAndWait('nginx', ['-c', originConf, '-g', 'daemon off;'], originPort));

    // One nginx and one osproxy with a single worker, and one of each with a worker per core.
    interface Server {
      port: number;
      pid: number;
    }
    const pairs: { workers: string; nginx: Server; osproxy: Server; relay?: Server }[] = [];
    const started = async (cmd: string, args: string[], port: number): Promise<Server> => {
      const child = await startAndWait(cmd, args, port);
      children.push(child);
      return { port, pid: child.pid ?? 0 };
    };
    for (const [label, nginxWorkers, osproxyWorkers] of [['1', 1, 1], [`all (${CORES})`, CORES, 0]] as const) {
      const [nginxPort, proxyPort, adminPort] = [await freePort(), await freePort(), await freePort()];
      const nginxProxyConf = nginxConf(
        dir,
        `proxy-${nginxWorkers}`,
        `    listen 127.0.0.1:${nginxPort};\n    location / { proxy_pass http://origin; proxy_http_version 1.1; proxy_set_header Connection ""; }`,
        `upstream origin { server 127.0.0.1:${originPort}; keepalive 32; }`,
        nginxWorkers,
      );
      const nginx = await started('nginx', ['-c', nginxProxyConf, '-g', 'daemon off;'], nginxPort);
      const root = join(dir, `osproxy-${osproxyWorkers}`);
      writeOsproxyRoot(root, { proxyPort, adminPort, originPort, workers: osproxyWorkers });
      const osproxy = await started(EXE, ['proxy', '--root', root], proxyPort);
      // The runtime's yardstick runs on one thread: it goes with the one-worker rows.
      if (nginxWorkers === 1) {
        const relayPort = await freePort();
        const relay = await started(process.execPath, [RELAY, String(relayPort), String(originPort)], relayPort);
        pairs.push({ workers: label, nginx, osproxy, relay });
      } else pairs.push({ workers: label, nginx, osproxy });
    }

    const rows: string[] = [];
    const osproxyRps = new Map<string, number>();
    const cases: [string, Load, Load][] = [
      ['100 B', { host: HOST, path: '/small' }, { host: HOST, path: '/small' }],
      ['1 MiB', { host: HOST, path: '/large' }, { host: HOST, path: '/large' }],
      ['100 B, every protection on', { host: HOST, path: '/small', headers: BROWSER_HEADERS }, { host: GUARDED, path: '/small', headers: BROWSER_HEADERS }],
      ['POST 1 KiB form, every protection on', { host: HOST, path: '/form', headers: BROWSER_HEADERS, script: postScript }, { host: GUARDED, path: '/form', headers: BROWSER_HEADERS, script: postScript }],
    ];
    const relayRows: string[] = [];
    const pacedRows: string[] = [];
    for (const pair of pairs) {
      for (const [label, nginxLoad, proxyLoad] of cases) {
        // Taking turns spreads the machine's slow moments over the servers.
        const targets: [string, Server, Load][] = [
          ['nginx', pair.nginx, nginxLoad],
          ['osproxy', pair.osproxy, proxyLoad],
        ];
        if (pair.relay && label === '100 B') targets.push(['bare Node.js relay', pair.relay, nginxLoad]);
        const runs = new Map<string, WrkResult[]>(targets.map(([name]) => [name, []]));
        for (const [, server, load] of targets) wrk(server.port, load, WARMUP);
        for (let round = 0; round < ROUNDS; round++) {
          for (const [name, server, load] of round % 2 === 0 ? targets : [...targets].reverse()) runs.get(name)?.push(wrk(server.port, load, DURATION, server.pid));
        }
        const medians = new Map([...runs].map(([name, r]) => [name, summarize(r)]));
        for (const [name, r] of medians) {
          process.stdout.write(`bench: ${label}, ${pair.workers} worker(s), through ${name}: ${JSON.stringify(r)} (req/s of the ${ROUNDS} runs: ${(runs.get(name) ?? []).map((x) => Math.round(x.rps)).join(', ')})\n`);
        }
        const n = medians.get('nginx') as WrkResult;
        const o = medians.get('osproxy') as WrkResult;
        osproxyRps.set(`${pair.workers} ${label}`, o.rps);
        rows.push(`| ${label} | ${pair.workers} | ${Math.round(n.rps)} | ${Math.round(o.rps)} | ${(o.rps / n.rps).toFixed(2)}x | ${latencies(n)} | ${latencies(o)} | ${(o.p99 / n.p99).toFixed(2)}x |`);
        if (pair.relay && label === '100 B') {
          for (const [name, r] of medians) relayRows.push(`| ${name} | ${Math.round(r.rps)} | ${(r.rps / n.rps).toFixed(2)}x | ${r.cpuUs.toFixed(1)} | ${latencies(r)} |`);
        }
      }
      pacedRows.push(pacedRow(pair.workers, pair.nginx.port, pair.osproxy.port, { host: HOST, path: '/small', script: pacedScript }));
    }
    const checksCost = 1 - (osproxyRps.get('1 100 B, every protection on') ?? 0) / (osproxyRps.get('1 100 B') ?? 1);
    const aclRows = await aclLookupRows();
    const body = [
      '',
      `${new Date().toISOString().slice(0, 10)}, ${machine()}. \`node scripts/bench/proxy.ts\` (the built executable): wrk -t1 -c${CONNECTIONS}, per case a ${WARMUP} warm-up of each server, then ${ROUNDS} runs of ${DURATION} each with nginx and osproxy taking turns (which goes first alternates), each column the median of a server's runs; same nginx origin (static files, a worker per core) behind both, nginx with \`proxy_pass\` and \`keepalive 32\`; "workers" is nginx's \`worker_processes\` and osproxy's \`workers\` (all: \`workers: 0\`). wrk, the origin and the proxies share the ${CORES} cores, so the all-cores rows measure how each shares a full machine rather than ${CORES}x one core. Target: osproxy at least 0.8x nginx's requests/s with the same worker count, p99 within 1.5x. On this shared virtual machine single runs of the same row vary by up to a third (nginx too), hence the medians; compare rows of one benchmark run.`,
      '',
      '| body | workers | nginx req/s | osproxy req/s | osproxy / nginx | nginx p50 / p99 | osproxy p50 / p99 | osproxy p99 / nginx p99 |',
      '|---|---|---|---|---|---|---|---|',
      ...rows,
      '',
      `The runtime's share, 100 B, one worker, the same runs: the three servers took turns, and each one's CPU time (all its threads and processes) over each run is divided by the requests it served. The bare Node.js relay (scripts/bench/relay.ts) is the least any proxy on node's sockets does per request (one origin connection per client, a head passed on with one header changed, no checks, no pooling, no events); it is a yardstick, not a product. How far it stays from nginx is what the runtime costs before osproxy does any of its work.`,
      '',
      '| server | req/s | x nginx | CPU µs per request | p50 / p99 |',
      '|---|---|---|---|---|',
      ...relayRows,
      '',
      `Latency at equal load, 100 B: the same ${CONNECTIONS} connections, each waiting ${THINK_MS} ms after every response (wrk's \`delay\`), so both servers get about the same request rate, well below what either serves at most; ${ROUNDS} runs of ${DURATION} each, the servers taking turns, medians as above. The rows above run every server flat out, where a closed loop's latency follows its throughput (32 requests always in flight) and wrk, the origin and the proxy compete for the cores; these rows are the latency a request sees at the same load.`,
      '',
      '| workers | nginx req/s | osproxy req/s | nginx p50 / p99 | osproxy p50 / p99 | osproxy p99 / nginx p99 |',
      '|---|---|---|---|---|---|',
      ...pacedRows,
      '',
      `"Every protection on": nginx proxies plainly, osproxy's site has every check on and evaluated per request without refusing any: WAF families with body inspection, bot score, challenge \`auto\`, auto-mitigation, connection limits, rate limits far above the load, a 1,000-entry blacklist. Target: at least 0.7x nginx. ${checksCost > 0 ? `The checks themselves cost osproxy ${Math.round(checksCost * 100)}% of its plain 100 B rate (one worker).` : `With the checks on, osproxy served ${Math.round((1 - checksCost) * 100)}% of its plain 100 B rate (one worker): what they cost is below this machine's run-to-run spread.`}`,
      '',
      'ACL lookup cost, in process (tinybench, 500 ms per case; `/24` entries, blacklist mode): an address seen for the first time (65,536 distinct ones, more than a matcher remembers), and a repeat client (16 addresses, answered from the matcher\'s memo of its last 1,024):',
      '',
      '| blacklist | ns per lookup, new address | ns per lookup, repeat client |',
      '|---|---|---|',
      ...aclRows,
      '',
    ].join('\n');
    writeSection('Proxy', body);
    process.stdout.write('bench: results written to the "## Proxy" section of docs/benchmarks.md\n');
  } finally {
    process.off('SIGINT', interrupted).off('SIGTERM', interrupted);
    for (const c of children.reverse()) c.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 500));
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await proxyBench();

/**
 * `node scripts/bench/proxy.ts`: osproxy against nginx (`proxy_pass` with upstream keep-alive),
 * side by side in one run on this machine, both in front of the same origin (an nginx serving a
 * 100 B and a 1 MiB file), one worker each. wrk measures requests/s and p50/p99 latency; the
 * results replace the "## Proxy" section of docs/benchmarks.md and nothing else. Every listener
 * is on 127.0.0.1; runs are short (5 s after a 1 s warm-up) since the machine is shared.
 *
 * osproxy runs from an esbuild bundle of src/main.ts, the code the executable embeds.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { machine, writeSection } from './report.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const HOST = 'bench.test';
const TOKEN = 'bench-token-0123456789abcdef';
const DURATION = '5s';
const CONNECTIONS = 32;

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

function nginxConf(dir: string, name: string, server: string, upstream = ''): string {
  const file = join(dir, `${name}.conf`);
  writeFileSync(
    file,
    `worker_processes 1;
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
  p50: string;
  p99: string;
}

function wrk(port: number, path: string, duration: string): WrkResult {
  const out = execFileSync('wrk', ['-t1', `-c${CONNECTIONS}`, `-d${duration}`, '--latency', '-H', `Host: ${HOST}`, `http://127.0.0.1:${port}${path}`], { encoding: 'utf8' });
  const rps = Number(/Requests\/sec:\s+([0-9.]+)/.exec(out)?.[1] ?? 0);
  const p50 = /^\s+50%\s+(\S+)/m.exec(out)?.[1] ?? '?';
  const p99 = /^\s+99%\s+(\S+)/m.exec(out)?.[1] ?? '?';
  if (/Non-2xx/.test(out)) throw new Error(`wrk saw errors on :${port}${path}:\n${out}`);
  return { rps, p50, p99 };
}



/** Runs the proxy benchmark and writes its section; called by scripts/bench.ts or on its own. */
export async function proxyBench(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'hk-proxy-bench-'));
  const children: ChildProcess[] = [];
  try {
    mkdirSync(join(dir, 'www'));
    writeFileSync(join(dir, 'www', 'small'), Buffer.alloc(100, 'a'));
    writeFileSync(join(dir, 'www', 'large'), Buffer.alloc(1024 * 1024, 'b'));
    const [originPort, nginxPort, proxyPort, adminPort] = [await freePort(), await freePort(), await freePort(), await freePort()];

    const originConf = nginxConf(dir, 'origin', `    listen 127.0.0.1:${originPort};\n    root ${dir}/www;`);
    children.push(await startAndWait('nginx', ['-c', originConf, '-g', 'daemon off;'], originPort));
    const nginxProxyConf = nginxConf(
      dir,
      'proxy',
      `    listen 127.0.0.1:${nginxPort};\n    location / { proxy_pass http://origin; proxy_http_version 1.1; proxy_set_header Connection ""; }`,
      `upstream origin { server 127.0.0.1:${originPort}; keepalive 32; }`,
    );
    children.push(await startAndWait('nginx', ['-c', nginxProxyConf, '-g', 'daemon off;'], nginxPort));

    const bundle = join(ROOT, '.cache', 'bench', 'hostkit.cjs');
    await build({ entryPoints: [join(ROOT, 'src', 'main.ts')], outfile: bundle, bundle: true, platform: 'node', format: 'cjs', target: 'node24', external: ['cpu-features', '*.node'], logLevel: 'warning' });
    const root = join(dir, 'osproxy');
    mkdirSync(join(root, 'sites.d'), { recursive: true });
    writeFileSync(
      join(root, 'config.yaml'),
      `listen_http: ["127.0.0.1:${proxyPort}"]\nlisten_https: []\nlog_level: warn\nadmin:\n  listen: "127.0.0.1:${adminPort}"\n  tokens: [{ name: bench, token: ${TOKEN}, role: readonly }]\n`,
    );
    // All of wrk's load comes from one address: the default per-IP rate limit would refuse it.
    writeFileSync(
      join(root, 'sites.d', 'bench.yaml'),
      `id: bench\nhostnames: [${HOST}]\norigin: { url: "http://127.0.0.1:${originPort}" }\nprotection: { rate_limit: { enabled: false } }\n`,
    );
    children.push(await startAndWait(process.execPath, [bundle, 'proxy', '--root', root], proxyPort));

    const rows: string[] = [];
    for (const [label, path] of [['100 B', '/small'], ['1 MiB', '/large']] as const) {
      const results: Record<string, WrkResult> = {};
      for (const [name, port] of [['nginx', nginxPort], ['osproxy', proxyPort]] as const) {
        wrk(port, path, '1s');
        results[name] = wrk(port, path, DURATION);
        process.stdout.write(`bench: ${label} through ${name}: ${JSON.stringify(results[name])}\n`);
      }
      const n = results['nginx'] as WrkResult;
      const o = results['osproxy'] as WrkResult;
      rows.push(`| ${label} | 1 | ${Math.round(n.rps)} | ${Math.round(o.rps)} | ${(o.rps / n.rps).toFixed(2)}x | ${n.p50} / ${n.p99} | ${o.p50} / ${o.p99} |`);
    }
    const body = [
      '',
      `${new Date().toISOString().slice(0, 10)}, ${machine()}. \`node scripts/bench/proxy.ts\`: wrk -t1 -c${CONNECTIONS} for ${DURATION} after a 1 s warm-up, same nginx origin (static files) behind both, nginx with \`proxy_pass\` and \`keepalive 32\`, one worker each; wrk, the origin and both proxies share the machine. Target: osproxy at least 0.8x nginx's requests/s, p99 within 1.5x.`,
      '',
      '| body | workers | nginx req/s | osproxy req/s | osproxy / nginx | nginx p50 / p99 | osproxy p50 / p99 |',
      '|---|---|---|---|---|---|---|',
      ...rows,
      '',
      'All-cores rows are missing: osproxy does not run workers on every core yet (issue 7 item 10).',
      '',
    ].join('\n');
    writeSection('Proxy', body);
    process.stdout.write('bench: results written to the "## Proxy" section of docs/benchmarks.md\n');
  } finally {
    for (const c of children.reverse()) c.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 500));
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await proxyBench();

/**
 * `make run`: starts every role that has a daemon, on loopback, from the built executable, with
 * configs written under .cache/run/ from embedded defaults, and prints where to look. Ctrl-C
 * stops them all.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const RUN = join(ROOT, '.cache', 'run');
const EXE = join(ROOT, 'dist', `hostkit-linux-${process.arch === 'arm64' ? 'arm64' : 'x64'}`);
const AGENT_PORT = 8480;
const PROXY_HTTP = '127.0.0.1:8081';
const PROXY_ADMIN = '127.0.0.1:9090';
const PANEL_URL = 'http://127.0.0.1:8080';

function say(text: string): void {
  process.stdout.write(`${text}\n`);
}

function start(name: string, args: string[], env: NodeJS.ProcessEnv = {}): ChildProcess {
  const child = spawn(EXE, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  const prefix = (d: Buffer): void => {
    for (const line of d.toString().split('\n').filter(Boolean)) say(`[${name}] ${line}`);
  };
  child.stdout?.on('data', prefix);
  child.stderr?.on('data', prefix);
  child.on('exit', (code, signal) => say(`[${name}] exited (${signal ?? code})`));
  return child;
}

function main(): void {
  mkdirSync(RUN, { recursive: true });
  const tokenFile = join(RUN, 'node-token');
  if (!existsSync(tokenFile)) writeFileSync(tokenFile, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
  const agentConfig = join(RUN, 'node-agent.yaml');
  writeFileSync(
    agentConfig,
    stringify({
      general: { socket_path: join(RUN, 'bandwidth-node.sock') },
      logging: { file: join(RUN, 'bandwidth-node.log'), format: 'text' },
      database: { path: join(RUN, 'bandwidth-node.db') },
      api: { listen: '127.0.0.1', port: AGENT_PORT },
      panel: { url: PANEL_URL, token_file: tokenFile },
      traffic_control: { enabled: process.getuid?.() === 0 },
    }),
  );
  // The proxy fronts the node agent's API as an example site: http://localhost:8081/api/v1/health.
  const proxyRoot = join(RUN, 'proxy');
  mkdirSync(join(proxyRoot, 'sites.d'), { recursive: true });
  const adminTokenFile = join(RUN, 'proxy-admin-token');
  if (!existsSync(adminTokenFile)) writeFileSync(adminTokenFile, `${randomBytes(24).toString('hex')}\n`, { mode: 0o600 });
  const adminToken = readFileSync(adminTokenFile, 'utf8').trim();
  writeFileSync(
    join(proxyRoot, 'config.yaml'),
    stringify({ listen_http: [PROXY_HTTP], listen_https: [], admin: { listen: PROXY_ADMIN, tokens: [{ name: 'make-run', token: adminToken, role: 'admin' }] } }),
  );
  const site = join(proxyRoot, 'sites.d', 'node-agent.yaml');
  if (!existsSync(site)) writeFileSync(site, stringify({ hostnames: ['localhost', '127.0.0.1'], origin: { url: `http://127.0.0.1:${AGENT_PORT}` } }));
  // The container daemon shapes every container of the engine it talks to, so make run points it at
  // a socket of its own where no engine runs: it starts, serves its CLI and waits for an engine.
  const bandwidthdConfig = join(RUN, 'bandwidthd.yaml');
  writeFileSync(
    bandwidthdConfig,
    stringify({
      general: { socket_path: join(RUN, 'bandwidth.sock'), lock_file: join(RUN, 'bandwidth.lock'), pid_file: join(RUN, 'bandwidth.pid') },
      logging: { file: join(RUN, 'bandwidth.log'), format: 'text' },
      database: { path: join(RUN, 'bandwidth.db') },
      docker: { endpoint: `unix://${join(RUN, 'no-engine.sock')}` },
      history: { export_path: join(RUN, 'exports') },
    }),
  );
  const children = [
    start('node-agent', ['node-agent', 'serve', '--config', agentConfig]),
    start('proxy', ['proxy', '--root', proxyRoot]),
    start('bandwidthd', ['bandwidthd', 'serve', '--config', bandwidthdConfig]),
  ];
  const token = readFileSync(tokenFile, 'utf8').trim();
  say(
    [
      '',
      'hostkit is running on loopback:',
      `  node agent API   http://127.0.0.1:${AGENT_PORT}/api/v1/health   (bearer token: ${token})`,
      `  node agent CLI   ${EXE} node-agent status --config ${agentConfig}`,
      `  reverse proxy    http://localhost:${PROXY_HTTP.split(':')[1]}/api/v1/health   (site files in ${proxyRoot}/sites.d, hot-reloaded)`,
      `  proxy admin API  http://${PROXY_ADMIN}/api/v1/sites   (bearer token: ${adminToken})`,
      `  container daemon ${EXE} bandwidthd status --config ${bandwidthdConfig}   (set docker.endpoint to an engine to shape its containers)`,
      `  logs             ${RUN}/*.log`,
      `The agent registers with the panel at ${PANEL_URL} once the panel role exists; until then it retries and keeps serving.`,
      'Ctrl-C stops everything.',
      '',
    ].join('\n'),
  );
  const stop = (): void => {
    for (const c of children) c.kill('SIGTERM');
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

main();

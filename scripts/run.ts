/**
 * `make run`: starts every role that has a daemon, on loopback, from the built executable, with
 * configs written under .cache/run/ from embedded defaults, and prints where to look. Ctrl-C
 * stops them all.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
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

/** Resolves once the panel answers HTTP, or has exited, or after 30 s: the caller starts the rest either way. */
async function panelAnswers(panel: ChildProcess): Promise<void> {
  for (let i = 0; i < 300 && panel.exitCode === null && panel.signalCode === null; i++) {
    try {
      await fetch(PANEL_URL, { redirect: 'manual', signal: AbortSignal.timeout(1000) });
      return;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

function start(name: string, args: string[], env: NodeJS.ProcessEnv = {}): ChildProcess {
  // A process group of its own: Ctrl-C reaches only make and this script, which then sends each
  // service one SIGTERM. A second signal (the terminal's SIGINT, then this script's SIGTERM) would
  // make a service that is still shutting down exit at once, leaving its lock and counters behind.
  const child = spawn(EXE, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env }, detached: true });
  const prefix = (d: Buffer): void => {
    for (const line of d.toString().split('\n').filter(Boolean)) say(`[${name}] ${line}`);
  };
  child.stdout?.on('data', prefix);
  child.stderr?.on('data', prefix);
  child.on('exit', (code, signal) => say(`[${name}] exited (${signal ?? code})`));
  return child;
}

/**
 * The panel's config, and on the first run its first administrator (password printed this once)
 * and a node for the local agent whose pairing token becomes the agent's token file.
 */
function preparePanel(tokenFile: string): string {
  const config = join(RUN, 'panel.yaml');
  writeFileSync(
    config,
    stringify({
      listen: PANEL_URL.replace('http://', ''),
      base_url: PANEL_URL,
      data_dir: join(RUN, 'panel'),
      volumes_dir: join(RUN, 'volumes'),
      logging: { file: join(RUN, 'panel.log'), format: 'text' },
    }),
  );
  const marker = join(RUN, 'panel', 'first-admin');
  if (!existsSync(marker)) {
    const panel = (...args: string[]): string => execFileSync(EXE, ['panel', ...args, '--config', config], { encoding: 'utf8' });
    const admin = JSON.parse(panel('user', 'create', '--username', 'admin', '--email', 'admin@localhost', '--admin', '--json')) as { meta: { password: string } };
    const node = JSON.parse(panel('node', 'create', '--name', 'local', '--fqdn', '127.0.0.1', '--port', String(AGENT_PORT), '--json')) as { meta: { pairing_token: string } };
    writeFileSync(tokenFile, `${node.meta.pairing_token}\n`, { mode: 0o600 });
    writeFileSync(marker, 'admin\n');
    say(`\nfirst panel administrator: admin / ${admin.meta.password}   (printed once; 2FA enrolment follows the first login)\n`);
  } else {
    say(`\npanel administrator: admin   (its password was printed on the first run; a new one: ${EXE} panel user password --user admin --config ${config})\n`);
  }
  return config;
}

async function main(): Promise<void> {
  mkdirSync(RUN, { recursive: true });
  const tokenFile = join(RUN, 'node-token');
  const panelConfig = preparePanel(tokenFile);
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
  // Its clients are programs, not browsers, so the site turns the bot check off (with it on, curl
  // is answered 403 by rule `bot`); every other protection keeps its default.
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
  if (!existsSync(site)) writeFileSync(site, stringify({ hostnames: ['localhost', '127.0.0.1'], origin: { url: `http://127.0.0.1:${AGENT_PORT}` }, protection: { bot: { enabled: false } } }));
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
  const panel = start('panel', ['panel', 'serve', '--config', panelConfig]);
  // The agent reports to the panel from its first second: started together, its first report
  // fails and it logs that the panel is unreachable.
  await panelAnswers(panel);
  const children = [
    panel,
    start('node-agent', ['node-agent', 'serve', '--config', agentConfig]),
    start('proxy', ['proxy', '--root', proxyRoot]),
    start('bandwidthd', ['bandwidthd', 'serve', '--config', bandwidthdConfig]),
  ];
  const token = readFileSync(tokenFile, 'utf8').trim();
  say(
    [
      '',
      'hostkit is running on loopback:',
      `  panel            ${PANEL_URL}/auth/login   (client API ${PANEL_URL}/api/client, application API e.g. ${PANEL_URL}/api/application/users)`,
      `  panel CLI        ${EXE} panel --help   (e.g. panel key create --user admin --type application --config ${panelConfig})`,
      `  node agent API   http://127.0.0.1:${AGENT_PORT}/api/v1/health   (bearer token: ${token})`,
      `  node agent CLI   ${EXE} node-agent status --config ${agentConfig}`,
      `  reverse proxy    http://localhost:${PROXY_HTTP.split(':')[1]}/api/v1/health   (site files in ${proxyRoot}/sites.d, hot-reloaded)`,
      `  proxy admin API  http://${PROXY_ADMIN}/api/v1/sites   (bearer token: ${adminToken})`,
      `  container daemon ${EXE} bandwidthd status --config ${bandwidthdConfig}   (set docker.endpoint to an engine to shape its containers)`,
      `  logs             ${RUN}/*.log`,
      'Ctrl-C stops everything.',
      '',
    ].join('\n'),
  );
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    for (const c of children) c.kill('SIGTERM');
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  process.on('SIGHUP', stop);
  // `make` killed on its own (a signal to it alone, not to the terminal's process group) does not
  // pass the signal on: the services stop when this script's parent is gone.
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) stop();
  }, 1000).unref();
}

await main();

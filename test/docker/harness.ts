/**
 * A private Docker engine for tests: its own dockerd (vfs storage, no iptables, no default bridge)
 * with data, exec root, socket and log under /tmp/hostkit-docker-<name>, an image imported from
 * the host's static busybox (no registry is reachable), and helpers for networks and containers.
 * Every caller passes its own name, so test files running at the same time never share a daemon.
 *
 * When the machine cannot run dockerd (not root, not installed, the daemon dies or never answers)
 * `startDocker` throws an Error whose message starts with `docker unavailable:` and says why; the
 * test file fails with it (`make test` installs Docker, so a missing engine is never a pass).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { constants, openSync, closeSync } from 'node:fs';
import { access, mkdir, readFile, rm, symlink, writeFile, copyFile, chmod } from 'node:fs/promises';
import { join, dirname } from 'node:path';
import { promisify } from 'node:util';
import Dockerode from 'dockerode';

const execFileP = promisify(execFile);

const DOCKER_UNAVAILABLE = 'docker unavailable:';
export const TEST_IMAGE = 'hostkit-busybox:test';
const READY_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 20_000;

export interface TestNetwork {
  id: string;
  name: string;
  subnet: string;
  /** The host's address on the network (the bridge), first address of the subnet. */
  gateway: string;
  /** Host interface of the bridge, `br-<id12>`. */
  bridge: string;
}

export interface TestContainer {
  id: string;
  name: string;
  /** Host PID of the container's init at start. */
  pid: number;
  /** Address on `network`, or '' without a network. */
  ip: string;
}

export interface RunContainerOptions {
  name: string;
  labels?: Record<string, string>;
  /** Name given to createNetwork; without it the container gets `--network none`. */
  network?: string;
  /** Default: sleep for a day. */
  cmd?: string[];
}

export interface DockerHarness {
  name: string;
  baseDir: string;
  socketPath: string;
  /** `unix://<socketPath>`, the form createContainerSource takes. */
  endpoint: string;
  docker: Dockerode;
  image: string;
  createNetwork(name: string, subnet: string): Promise<TestNetwork>;
  runContainer(opts: RunContainerOptions): Promise<TestContainer>;
  /** `docker exec` through the CLI; never rejects on a non-zero exit, only on a timeout. */
  exec(container: string, cmd: string[], opts?: { timeoutMs?: number }): Promise<{ code: number; stdout: string; stderr: string }>;
  /** Any docker CLI command against this engine; rejects on a non-zero exit. */
  cli(args: string[]): Promise<string>;
  /** Removes what this harness created, stops its dockerd, deletes its directory. Idempotent. */
  stop(): Promise<void>;
}

/**
 * The command of a persistent TCP sink: every connection to `port` is read to EOF and discarded.
 * `-ll` keeps listening after a client leaves (plain `nc -l` exits at its stdin's EOF), `-e` gives
 * each connection its own `cat >/dev/null`. The shell runs inside the container, not on the host.
 */
export function sinkCommand(port: number): string[] {
  return [
    'sh',
    '-c',
    `printf '#!/bin/sh\\ncat >/dev/null\\n' >/tmp/sink && chmod +x /tmp/sink && exec nc -ll -p ${port} -e /tmp/sink`,
  ];
}

/** Resolves when `p` settles or after `ms`, whichever is first; the timer never outlives it. */
async function within(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([p, new Promise((r) => (timer = setTimeout(r, ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

function unavailable(reason: string): Error {
  return new Error(`${DOCKER_UNAVAILABLE} ${reason}`);
}

async function firstExecutable(paths: string[]): Promise<string | undefined> {
  for (const p of paths) {
    try {
      await access(p, constants.X_OK);
      return p;
    } catch {
      // try the next one
    }
  }
  return undefined;
}

async function tail(file: string, lines = 25): Promise<string> {
  try {
    return (await readFile(file, 'utf8')).trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function waitGone(pid: number, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (!alive(pid)) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return !alive(pid);
}

/**
 * A dockerd left behind by a crashed run of the same name is stopped first; it is recognised by
 * its pidfile and by our data root in its command line, so nothing else is ever signalled.
 */
async function stopStale(pidFile: string, dataRoot: string): Promise<void> {
  let pid: number;
  try {
    pid = Number.parseInt((await readFile(pidFile, 'utf8')).trim(), 10);
  } catch {
    return;
  }
  if (!Number.isSafeInteger(pid) || pid <= 1) return;
  let cmdline: string;
  try {
    cmdline = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').join(' ');
  } catch {
    return;
  }
  if (!cmdline.includes('dockerd') || !cmdline.includes(`--data-root ${dataRoot}`)) return;
  process.kill(pid, 'SIGTERM');
  if (!(await waitGone(pid, STOP_TIMEOUT_MS))) process.kill(pid, 'SIGKILL');
}

async function mountsUnder(dir: string): Promise<string[]> {
  const text = await readFile('/proc/self/mounts', 'utf8').catch(() => '');
  return text
    .split('\n')
    .map((l) => l.split(' ')[1] ?? '')
    .filter((m) => m === dir || m.startsWith(`${dir}/`));
}

/** First host address of an IPv4 CIDR, which Docker gives the bridge by default. */
function gatewayOf(subnet: string): string {
  const m = /^(\d+)\.(\d+)\.(\d+)\.(\d+)\/(\d+)$/.exec(subnet);
  if (m === null) throw new Error(`subnet must be an IPv4 CIDR, got "${subnet}"`);
  const octets = [m[1], m[2], m[3], m[4]].map(Number);
  const bits = Number(m[5]);
  const n = octets.reduce((acc, o) => acc * 256 + o, 0);
  const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
  const g = ((n & mask) >>> 0) + 1;
  return [g >>> 24, (g >>> 16) & 255, (g >>> 8) & 255, g & 255].join('.');
}

/**
 * Builds the busybox rootfs (one link per applet at its usual path, `busybox --list-full`) and
 * imports it. Runs once per engine; a data root that already has the image keeps it.
 */
async function ensureImage(docker: Dockerode, baseDir: string, cli: (args: string[]) => Promise<string>): Promise<void> {
  try {
    await docker.getImage(TEST_IMAGE).inspect();
    return;
  } catch {
    // not there yet
  }
  const busybox = await firstExecutable(['/usr/bin/busybox', '/bin/busybox']);
  if (busybox === undefined) throw unavailable('busybox not found (apt-get install busybox-static)');
  const root = join(baseDir, 'rootfs');
  await rm(root, { recursive: true, force: true });
  for (const d of ['bin', 'sbin', 'usr/bin', 'usr/sbin', 'tmp', 'etc', 'root', 'proc', 'sys', 'dev']) {
    await mkdir(join(root, d), { recursive: true });
  }
  await chmod(join(root, 'tmp'), 0o1777);
  await copyFile(busybox, join(root, 'bin/busybox'));
  await chmod(join(root, 'bin/busybox'), 0o755);
  const { stdout } = await execFileP(busybox, ['--list-full']);
  for (const applet of stdout.split('\n').map((l) => l.trim())) {
    // `linuxrc` (no directory) is only for an initrd
    if (!applet.includes('/') || applet === 'bin/busybox') continue;
    await mkdir(join(root, dirname(applet)), { recursive: true });
    await symlink('/bin/busybox', join(root, applet)).catch(() => undefined);
  }
  await writeFile(join(root, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
  await writeFile(join(root, 'etc/group'), 'root:x:0:\n');
  const tarball = join(baseDir, 'rootfs.tar');
  await execFileP('tar', ['-C', root, '-cf', tarball, '.']);
  await cli([
    'import',
    '-c', 'ENV PATH=/usr/sbin:/usr/bin:/sbin:/bin',
    '-c', 'CMD ["sh"]',
    tarball,
    TEST_IMAGE,
  ]);
  await rm(root, { recursive: true, force: true });
  await rm(tarball, { force: true });
}

/**
 * Called once per test file (in `before`). Starts a private dockerd named `opts.name` (default
 * `p<pid>`; lowercase letters, digits, dashes, at most 24 so the socket path stays short), waits
 * until it answers, clears leftovers of a crashed earlier run of the same name, makes sure the
 * busybox image exists, and returns the harness. Throws `docker unavailable: ...` when the machine
 * cannot run the engine.
 */
/**
 * A CA, a server certificate for 127.0.0.1 and a client certificate in `dir` (the client's as
 * cert.pem, key.pem, ca.pem: the layout docker.tls_cert_path expects). Runs openssl.
 */
async function makeTlsFiles(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  const ssl = (args: string[]): Promise<unknown> => execFileP('openssl', args, { cwd: dir });
  await ssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca-key.pem', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=hostkit-test-ca']);
  await writeFile(join(dir, 'server.ext'), 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
  await writeFile(join(dir, 'client.ext'), 'extendedKeyUsage=clientAuth\n');
  await ssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server-key.pem', '-out', 'server.csr', '-subj', '/CN=127.0.0.1']);
  await ssl(['x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca-key.pem', '-CAcreateserial', '-out', 'server-cert.pem', '-days', '2', '-extfile', 'server.ext']);
  await ssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'key.pem', '-out', 'client.csr', '-subj', '/CN=hostkit-test-client']);
  await ssl(['x509', '-req', '-in', 'client.csr', '-CA', 'ca.pem', '-CAkey', 'ca-key.pem', '-CAcreateserial', '-out', 'cert.pem', '-days', '2', '-extfile', 'client.ext']);
}

/**
 * Starts a private dockerd. With `tlsPort`, it also listens on tcp://127.0.0.1:<tlsPort> with
 * mutual TLS; the client files are in `<baseDir>/tls` (cert.pem, key.pem, ca.pem).
 */
export async function startDocker(opts: { name?: string; tlsPort?: number } = {}): Promise<DockerHarness> {
  const name = opts.name ?? `p${process.pid}`;
  if (!/^[a-z0-9][a-z0-9-]{0,23}$/.test(name)) throw new Error(`harness name must match [a-z0-9-]{1,24}, got "${name}"`);
  if (process.getuid?.() !== 0) throw unavailable('dockerd needs root; run the docker tests as root');
  const dockerd = await firstExecutable(['/usr/sbin/dockerd', '/usr/bin/dockerd', '/usr/local/bin/dockerd', '/usr/local/sbin/dockerd']);
  if (dockerd === undefined) throw unavailable('dockerd not installed (apt-get install docker.io busybox-static)');
  // The Debian CLI matches the Debian engine; any newer CLI negotiates down just as well.
  const cliFound = await firstExecutable(['/usr/bin/docker', '/usr/local/bin/docker']);
  if (cliFound === undefined) throw unavailable('docker CLI not installed (apt-get install docker.io)');
  const cliPath: string = cliFound;

  const baseDir = `/tmp/hostkit-docker-${name}`;
  const dataRoot = join(baseDir, 'data');
  const execRoot = join(baseDir, 'exec');
  const socketPath = join(baseDir, 'd.sock');
  const pidFile = join(baseDir, 'd.pid');
  const logFile = join(baseDir, 'dockerd.log');
  const configFile = join(baseDir, 'daemon.json');
  const endpoint = `unix://${socketPath}`;

  await stopStale(pidFile, dataRoot);
  await mkdir(dataRoot, { recursive: true });
  await mkdir(execRoot, { recursive: true });
  await mkdir(join(baseDir, 'cli'), { recursive: true });
  await rm(socketPath, { force: true });
  // Our own (empty) daemon.json, so the machine's /etc/docker/daemon.json cannot change the setup.
  await writeFile(configFile, '{}\n');

  const tlsDir = join(baseDir, 'tls');
  const tlsArgs: string[] = [];
  if (opts.tlsPort !== undefined) {
    await makeTlsFiles(tlsDir);
    tlsArgs.push('-H', `tcp://127.0.0.1:${opts.tlsPort}`, '--tlsverify', '--tlscacert', join(tlsDir, 'ca.pem'), '--tlscert', join(tlsDir, 'server-cert.pem'), '--tlskey', join(tlsDir, 'server-key.pem'));
  }
  const args = [
    ...tlsArgs,
    '--config-file', configFile,
    '--data-root', dataRoot,
    '--exec-root', execRoot,
    '-H', endpoint,
    '--pidfile', pidFile,
    '--storage-driver=vfs',
    '--iptables=false',
    '--ip-masq=false',
    '--bridge=none',
    '--shutdown-timeout=2',
  ];
  const logFd = openSync(logFile, 'w');
  let child: ChildProcess;
  try {
    child = spawn(dockerd, args, { stdio: ['ignore', logFd, logFd] });
  } finally {
    closeSync(logFd);
  }
  let exited: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  let spawnError: Error | undefined;
  const exitPromise = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => {
      exited = { code, signal };
      resolve();
    });
    child.once('error', (err) => {
      spawnError = err;
      exited ??= { code: null, signal: null };
      resolve();
    });
  });
  // If the test process dies without stop(), dockerd still gets its SIGTERM and shuts down cleanly.
  const onExit = (): void => {
    if (exited === undefined) child.kill('SIGTERM');
  };
  process.once('exit', onExit);

  const docker = new Dockerode({ socketPath, host: undefined, timeout: 30_000 });
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (exited !== undefined) {
      process.removeListener('exit', onExit);
      const why = spawnError !== undefined ? spawnError.message : `exited with ${exited.code ?? exited.signal}`;
      throw unavailable(`dockerd ${why} before answering on ${socketPath}; log ${logFile}:\n${await tail(logFile)}`);
    }
    try {
      await docker.ping();
      break;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGTERM');
      await within(exitPromise, 5000);
      process.removeListener('exit', onExit);
      throw unavailable(`dockerd did not answer on ${socketPath} within ${READY_TIMEOUT_MS / 1000} s; log ${logFile}:\n${await tail(logFile)}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }

  async function cli(cliArgs: string[], timeoutMs = 60_000): Promise<string> {
    const env: NodeJS.ProcessEnv = { ...process.env, DOCKER_CONFIG: join(baseDir, 'cli') };
    delete env.DOCKER_HOST;
    delete env.DOCKER_CONTEXT;
    const { stdout } = await execFileP(cliPath, ['-H', endpoint, ...cliArgs], { env, timeout: timeoutMs, maxBuffer: 16 << 20 });
    return stdout;
  }

  const createdContainers = new Set<string>();
  const createdNetworks = new Set<string>();
  let stopping: Promise<void> | undefined;

  async function removeAll(containers: Iterable<string>, networks: Iterable<string>): Promise<void> {
    await Promise.all(
      [...containers].map((id) => docker.getContainer(id).remove({ force: true }).catch(() => undefined)),
    );
    // Removing the network is what deletes its br-* interface from the host.
    for (const id of networks) await docker.getNetwork(id).remove().catch(() => undefined);
  }

  async function stop(): Promise<void> {
    stopping ??= (async () => {
      if (exited === undefined) {
        // Killed containers first: a busybox `sleep` as PID 1 would ignore dockerd's SIGTERM.
        await removeAll(createdContainers, createdNetworks);
        child.kill('SIGTERM');
        await within(exitPromise, STOP_TIMEOUT_MS);
        if (exited === undefined) {
          child.kill('SIGKILL');
          await exitPromise;
        }
      }
      process.removeListener('exit', onExit);
      // A mount left under the directory (crash) must not be deleted through: keep it for a look.
      if ((await mountsUnder(baseDir)).length === 0) await rm(baseDir, { recursive: true, force: true }).catch(() => undefined);
    })();
    return stopping;
  }

  try {
    // Leftovers of an earlier run with this name: this engine is private, so all of it is ours.
    const stale = await docker.listContainers({ all: true });
    const nets = (await docker.listNetworks()).filter((n) => !['bridge', 'host', 'none'].includes(n.Name));
    await removeAll(stale.map((c) => c.Id), nets.map((n) => n.Id));
    await ensureImage(docker, baseDir, (a) => cli(a));
  } catch (err) {
    await stop();
    throw err;
  }

  return {
    name,
    baseDir,
    socketPath,
    endpoint,
    docker,
    image: TEST_IMAGE,
    cli: (a) => cli(a),
    stop,

    async createNetwork(netName: string, subnet: string): Promise<TestNetwork> {
      const gateway = gatewayOf(subnet);
      const net = await docker.createNetwork({
        Name: netName,
        Driver: 'bridge',
        CheckDuplicate: true,
        IPAM: { Driver: 'default', Config: [{ Subnet: subnet, Gateway: gateway }] },
        Labels: { 'hostkit.test': name },
      });
      createdNetworks.add(net.id);
      return { id: net.id, name: netName, subnet, gateway, bridge: `br-${net.id.slice(0, 12)}` };
    },

    async runContainer(o: RunContainerOptions): Promise<TestContainer> {
      const c = await docker.createContainer({
        name: o.name,
        Image: TEST_IMAGE,
        Cmd: o.cmd ?? ['sleep', '86400'],
        Labels: o.labels ?? {},
        StopTimeout: 2,
        HostConfig: {
          NetworkMode: o.network ?? 'none',
          // docker-init as PID 1 forwards SIGTERM, so stop/restart take milliseconds, not the timeout
          Init: true,
        },
      });
      createdContainers.add(c.id);
      await c.start();
      const info = await c.inspect();
      const ip = o.network === undefined ? '' : (info.NetworkSettings.Networks[o.network]?.IPAddress ?? '');
      return { id: c.id, name: o.name, pid: info.State.Pid, ip };
    },

    async exec(container: string, cmd: string[], eo: { timeoutMs?: number } = {}) {
      try {
        const stdout = await cli(['exec', container, ...cmd], eo.timeoutMs ?? 30_000);
        return { code: 0, stdout, stderr: '' };
      } catch (err) {
        const e = err as { code?: unknown; stdout?: string; stderr?: string; killed?: boolean };
        if (typeof e.code !== 'number' || e.killed === true) throw err;
        return { code: e.code, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
      }
    },
  };
}

/**
 * Runs hostkit the way an operator does: the built executable (dist/hostkit-linux-x64) when it
 * exists — `make test` builds it before the integration suites — else `node src/main.ts` during
 * development. Daemons are spawned with their output captured for assertions and diagnostics.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const EXE = join(ROOT, 'dist', 'hostkit-linux-x64');

let installedExe: string | undefined;

/**
 * A copy of the executable any user can run, as an installed one in /usr/local/bin is: a service
 * user cannot reach into a checkout under a private directory (`mktemp -d` makes it 0700).
 */
function exeForAnyUser(): string {
  if (installedExe === undefined) {
    const dir = mkdtempSync('/tmp/hostkit-exe-');
    chmodSync(dir, 0o755);
    installedExe = join(dir, 'hostkit-linux-x64');
    copyFileSync(EXE, installedExe);
    chmodSync(installedExe, 0o755);
    process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  }
  return installedExe;
}

/**
 * argv prefix that runs `hostkit`, or the program name `name` (a link, busybox style) when given:
 * the built executable (a copy any user can run for `asUser`), or the sources when there is none
 * or `env` (the child's) sets HOSTKIT_FROM_SOURCE.
 */
export function hostkitArgv(linkDir?: string, name?: string, env: NodeJS.ProcessEnv = process.env, asUser = false): string[] {
  if (existsSync(EXE) && !env['HOSTKIT_FROM_SOURCE']) {
    if (asUser) return [exeForAnyUser()];
    if (!name || !linkDir) return [EXE];
    mkdirSync(linkDir, { recursive: true });
    const link = join(linkDir, name);
    if (!existsSync(link)) symlinkSync(EXE, link);
    return [link];
  }
  const roleOf: Record<string, string> = { 'bandwidth-node': 'node-agent', bandwidth: 'bandwidthd', osproxy: 'proxy' };
  return [process.execPath, join(ROOT, 'src', 'main.ts'), ...(name ? [roleOf[name] ?? name] : [])];
}

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a hostkit command to completion; `user` runs it as that uid and gid. */
export function runHostkit(args: string[], opts: { env?: NodeJS.ProcessEnv; name?: string; linkDir?: string; user?: { uid: number; gid: number } } = {}): RunResult {
  const env = { ...process.env, ...opts.env };
  const [cmd, ...pre] = hostkitArgv(opts.linkDir, opts.name, env, opts.user !== undefined);
  const r = spawnSync(cmd as string, [...pre, ...args], { encoding: 'utf8', env, timeout: 60_000, ...opts.user });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

export interface Daemon {
  child: ChildProcess;
  output(): string;
  /** Resolves when the combined output matches, rejects after timeoutMs with the output so far. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<string>;
  /** SIGTERM (or the given signal) and wait for the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts a long-running hostkit command; `user` runs it as that uid and gid (a service user). */
export function startHostkit(args: string[], opts: { env?: NodeJS.ProcessEnv; name?: string; linkDir?: string; user?: { uid: number; gid: number } } = {}): Daemon {
  const env = { ...process.env, ...opts.env };
  const [cmd, ...pre] = hostkitArgv(opts.linkDir, opts.name, env, opts.user !== undefined);
  const child = spawn(cmd as string, [...pre, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'], ...opts.user });
  let out = '';
  const listeners = new Set<() => void>();
  const onData = (d: Buffer): void => {
    out += d.toString();
    for (const l of listeners) l();
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code, sig) => resolve(code ?? (sig ? 128 : null))));
  return {
    child,
    output: () => out,
    waitFor(pattern, timeoutMs = 20_000) {
      return new Promise((resolve, reject) => {
        const check = (): void => {
          const m = pattern.exec(out);
          if (m) {
            listeners.delete(check);
            clearTimeout(timer);
            resolve(m[0]);
          }
        };
        const timer = setTimeout(() => {
          listeners.delete(check);
          reject(new Error(`timed out waiting for ${pattern}; output so far:\n${out.slice(-4000)}`));
        }, timeoutMs);
        listeners.add(check);
        check();
        void exited.then(() => {
          if (listeners.has(check)) {
            listeners.delete(check);
            clearTimeout(timer);
            reject(new Error(`process exited while waiting for ${pattern}; output:\n${out.slice(-4000)}`));
          }
        });
      });
    },
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/**
 * A TCP port on 127.0.0.1 that was free a moment ago, for daemons whose config needs a port
 * number up front (a small race, acceptable in tests).
 */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

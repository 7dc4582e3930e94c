/**
 * A real panel for tests: a config in a temp dir (data_dir, volumes_dir, a free port, optional
 * SMTP settings), the built executable's `panel serve`, and helpers for its CLI and its APIs.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFile } from 'node:child_process';
import { freePort, hostkitArgv, runHostkit, startHostkit, type Daemon, type RunResult } from '../hostkit-process.ts';

export interface TestPanel {
  dir: string;
  url: string;
  config: string;
  volumesDir: string;
  daemon: Daemon;
  /** Runs `hostkit panel ...args --config <this config>`. */
  cli(...args: string[]): RunResult;
  /** The same without blocking this process (for tests that serve something the CLI talks to). */
  cliAsync(...args: string[]): Promise<RunResult>;
  /** Creates a user through the CLI; returns its id. */
  createUser(username: string, opts?: { admin?: boolean; password?: string }): number;
  /** Creates an API key through the CLI; returns the key. */
  createKey(user: string, type: 'client' | 'application'): string;
  /** A JSON request with a bearer key; returns status and parsed body (or text). */
  api(key: string, method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<{ status: number; body: unknown; text: string }>;
  stop(): Promise<void>;
}

export interface TestPanelOptions {
  mail?: { host: string; port: number };
  /** More top-level config lines (YAML). */
  extra?: string;
  /** More environment variables of the panel process (e.g. OPS_BULK_SYNC). */
  env?: NodeJS.ProcessEnv;
}

/** Starts a panel and waits until it listens. */
export async function startPanel(opts: TestPanelOptions = {}): Promise<TestPanel> {
  const dir = mkdtempSync(join(tmpdir(), 'hk-panel-'));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const volumesDir = join(dir, 'volumes');
  const config = join(dir, 'panel.yaml');
  const mail = opts.mail === undefined ? '' : `mail:\n  host: 127.0.0.1\n  port: ${opts.mail.port}\n  from: panel@example.test\n`;
  writeFileSync(config, `listen: 127.0.0.1:${port}\nbase_url: ${url}\ndata_dir: ${join(dir, 'data')}\nvolumes_dir: ${volumesDir}\n${mail}${opts.extra ?? ''}logging:\n  console: true\n  level: info\n`);
  const daemon = startHostkit(['panel', 'serve', '--config', config], opts.env === undefined ? {} : { env: opts.env });
  await daemon.waitFor(/panel listening/);
  const cli = (...args: string[]): RunResult => runHostkit(['panel', ...args, '--config', config]);
  const must = (r: RunResult): RunResult => {
    if (r.code !== 0) throw new Error(`hostkit exited ${r.code}: ${r.stderr}${r.stdout}`);
    return r;
  };
  return {
    dir,
    url,
    config,
    volumesDir,
    daemon,
    cli,
    cliAsync: (...args) =>
      new Promise((resolve) => {
        const [cmd, ...pre] = hostkitArgv();
        execFile(cmd as string, [...pre, 'panel', ...args, '--config', config], { encoding: 'utf8', timeout: 60_000 }, (err, stdout, stderr) =>
          resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : 1, stdout, stderr }),
        );
      }),
    createUser(username, o = {}) {
      const r = must(cli('user', 'create', '--username', username, '--email', `${username}@example.test`, '--password', o.password ?? 'correct horse battery', ...(o.admin === true ? ['--admin'] : []), '--json'));
      return (JSON.parse(r.stdout) as { attributes: { id: number } }).attributes.id;
    },
    createKey(user, type) {
      const r = must(cli('key', 'create', '--user', user, '--type', type, '--json'));
      return (JSON.parse(r.stdout) as { meta: { secret_token: string } }).meta.secret_token;
    },
    async api(key, method, path, body, headers = {}) {
      const res = await fetch(`${url}${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, accept: 'application/json', ...(body !== undefined && typeof body !== 'string' ? { 'content-type': 'application/json' } : {}), ...headers },
        ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
      });
      const text = await res.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // a file's contents or an empty 204
      }
      return { status: res.status, body: parsed, text };
    },
    async stop() {
      await daemon.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

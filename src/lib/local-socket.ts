/**
 * The local admin socket every daemon serves its CLI on: a unix socket of mode 0600 (root only
 * when the daemon runs as root), and the client the CLI commands use to call it.
 */
import { request } from 'node:http';
import { chmodSync, existsSync, lstatSync, unlinkSync } from 'node:fs';
import { connect } from 'node:net';
import { dirname } from 'node:path';
import { makeDirs } from './make-dirs.ts';

/**
 * Prepares `path` for listening: refuses when another daemon answers on it or when it is not a
 * socket, removes a stale socket left by a crash, creates the directory. Runs once at daemon
 * start, before listen().
 */
// sun_path holds 108 bytes on Linux, the last one a NUL.
const MAX_SOCKET_PATH_BYTES = 107;

/** What is wrong with a socket path before anything listens on it (also `check`'s), or undefined. */
export function socketPathProblem(path: string): string | undefined {
  if (Buffer.byteLength(path) > MAX_SOCKET_PATH_BYTES) return `${path} is too long for a unix socket (at most ${MAX_SOCKET_PATH_BYTES} bytes)`;
  // Only a socket is ever removed: a typo must not delete a token file or a database.
  if (existsSync(path) && !lstatSync(path).isSocket()) return `${path} exists and is not a socket: the socket path must name a file of its own`;
  return undefined;
}

export async function claimSocketPath(path: string, what: string): Promise<void> {
  const problem = socketPathProblem(path);
  if (problem !== undefined) throw new Error(problem);
  if (existsSync(path)) {
    const alive = await new Promise<boolean>((resolve) => {
      const s = connect(path);
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (alive) throw new Error(`another ${what} is already running (it answers on ${path})`);
    unlinkSync(path);
  }
  makeDirs(dirname(path));
}

/** Restricts a freshly listening socket to its owner. */
export function restrictSocket(path: string): void {
  chmodSync(path, 0o600);
}

/**
 * One JSON request to a daemon's local socket; returns the envelope's data or throws an Error
 * with a message an operator can act on (daemon not running, permission denied, API error).
 */
export function localRequest<T>(socketPath: string, method: 'GET' | 'POST', path: string, what: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, method, path, headers: { accept: 'application/json' }, timeout: 30_000 }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => {
        let body: { success?: boolean; data?: T; error?: string } | undefined;
        try {
          body = JSON.parse(text) as typeof body;
        } catch {
          body = undefined;
        }
        if (body?.success) resolve(body.data as T);
        else reject(new Error(body?.error ?? `${what} answered HTTP ${res.statusCode}`));
      });
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', (err: NodeJS.ErrnoException) => {
      const why =
        err.code === 'ENOENT'
          ? `${what} is not running (no socket at ${socketPath})`
          : err.code === 'ECONNREFUSED'
            ? `${what} is not running (nothing listens on ${socketPath}: a socket left by a stopped daemon)`
            : err.code === 'ENOTSOCK'
              ? `${socketPath} is not a socket: check general.socket_path`
              : err.code === 'EACCES'
            ? `permission denied on ${socketPath}: run as root`
            : `cannot reach ${what} on ${socketPath}: ${err.message}`;
      reject(new Error(why));
    });
    req.end();
  });
}

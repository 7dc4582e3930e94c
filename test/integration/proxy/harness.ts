/**
 * What the proxy's integration tests share: a project root in a temporary directory, the proxy
 * started as an operator starts it (`hostkit proxy --root DIR`), echo origins on 127.0.0.1 port 0,
 * self-signed certificates made with openssl, and HTTP(S) clients that set Host and SNI freely.
 * Every listener is on 127.0.0.1; every client connection is fresh (no agent), so one test's
 * keep-alive state never leaks into the next.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import { freePort, startHostkit, type Daemon } from '../hostkit-process.ts';

export const ADMIN_TOKEN = 'admin-token-0123456789abcdef';
export const OPERATOR_TOKEN = 'operator-token-0123456789ab';
export const READONLY_TOKEN = 'readonly-token-0123456789ab';

/** A port that was free a moment ago (the proxy's config cannot say port 0). */
export { freePort };

/** Day-long windows aligned to the epoch: a test straddles a boundary only when it runs at midnight UTC. */
export const DAY = 86_400;
/** Rate limits high enough that the checks a test does not target never fire. */
export const QUIET_RATE = { per_ip: { requests: 100_000, window_secs: DAY }, per_site: { requests: 100_000, window_secs: DAY } };

/**
 * A site `<id>.test` behind a trusted 127.0.0.1 (clients pick their IP with X-Forwarded-For), with
 * quiet rate limits under the given protection settings.
 */
export function protectedSite(id: string, originUrl: string, protection: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id,
    hostnames: [`${id}.test`],
    origin: { url: originUrl },
    client_ip: { trusted_proxies: ['127.0.0.1'], forward_mode: 'x_forwarded_for' },
    protection: { rate_limit: QUIET_RATE, ...protection },
  };
}

export interface ProxyRoot {
  dir: string;
  sitesDir: string;
  httpPort: number;
  httpsPort: number;
  adminPort: number;
  adminBase: string;
  /** Writes `sites.d/<name>` (YAML text or an object). */
  writeSite(name: string, site: string | Record<string, unknown>): void;
  writeGlobal(extra?: Record<string, unknown>): void;
}

/** A root with config.yaml (three tokens, one per role) and the given site files. */
export async function makeRoot(opts: { global?: Record<string, unknown>; sites?: Record<string, string | Record<string, unknown>> } = {}): Promise<ProxyRoot> {
  const dir = mkdtempSync(join(tmpdir(), 'hk-proxy-'));
  const sitesDir = join(dir, 'sites.d');
  mkdirSync(sitesDir);
  const [httpPort, httpsPort, adminPort] = [await freePort(), await freePort(), await freePort()];
  const root: ProxyRoot = {
    dir,
    sitesDir,
    httpPort,
    httpsPort,
    adminPort,
    adminBase: `http://127.0.0.1:${adminPort}/api/v1`,
    writeSite(name, site) {
      writeFileSync(join(sitesDir, name), typeof site === 'string' ? site : stringify(site));
    },
    writeGlobal(extra = {}) {
      writeFileSync(
        join(dir, 'config.yaml'),
        stringify({
          listen_http: [`127.0.0.1:${httpPort}`],
          listen_https: [`127.0.0.1:${httpsPort}`],
          log_level: 'debug',
          // One data-plane worker unless a test asks for more (workers.test.ts): the recent-events
          // ring is in arrival order, and events of two workers a moment apart may arrive swapped,
          // while many tests read "the last event" after each request.
          workers: 1,
          admin: {
            listen: `127.0.0.1:${adminPort}`,
            tokens: [
              { name: 'root', token: ADMIN_TOKEN, role: 'admin' },
              { name: 'ops', token: OPERATOR_TOKEN, role: 'operator' },
              { name: 'viewer', token: READONLY_TOKEN, role: 'readonly' },
            ],
          },
          ...extra,
        }),
      );
    },
  };
  root.writeGlobal(opts.global);
  for (const [name, site] of Object.entries(opts.sites ?? {})) root.writeSite(name, site);
  return root;
}

/** Starts `hostkit proxy --root DIR` (serve is the default command) and waits until it listens. */
export async function startProxy(root: ProxyRoot, opts: { env?: NodeJS.ProcessEnv; args?: string[] } = {}): Promise<Daemon> {
  const proxy = startHostkit(opts.args ?? ['proxy', '--root', root.dir], { env: { RUST_LOG: '', ...opts.env } });
  await proxy.waitFor(/"msg":"osproxy started"/);
  return proxy;
}

/** What an echo origin saw of one request. */
export interface SeenRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  bodyBytes: number;
  bodySha256: string;
  /** True when the request body ended cleanly (false: the proxy cut it). */
  complete: boolean;
  /** The port of the origin that saw it. */
  port: number;
}

export interface Origin {
  url: string;
  port: number;
  seen: SeenRequest[];
  /** Resolves with the next request the origin finishes reading (or sees cut); rejects after timeoutMs. */
  next(timeoutMs?: number): Promise<SeenRequest>;
  close(): Promise<void>;
}

/**
 * An origin that answers each request with JSON describing it. Paths: `/bytes/N` answers N bytes
 * (streamed in 64 KiB chunks); `/slow/MS` answers after MS milliseconds; `/headers` answers with
 * hop-by-hop headers the proxy must drop.
 */
export async function startOrigin(listenPort = 0): Promise<Origin> {
  const seen: SeenRequest[] = [];
  const waiters: ((r: SeenRequest) => void)[] = [];
  const record = (r: SeenRequest): void => {
    seen.push(r);
    waiters.shift()?.(r);
  };
  let port = 0;
  const server: Server = createHttpServer((req: IncomingMessage, res: ServerResponse) => {
    const hash = createHash('sha256');
    let bytes = 0;
    req.on('data', (c: Buffer) => {
      bytes += c.length;
      hash.update(c);
    });
    const done = (complete: boolean): SeenRequest => {
      const r: SeenRequest = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, rawHeaders: req.rawHeaders, bodyBytes: bytes, bodySha256: hash.digest('hex'), complete, port };
      record(r);
      return r;
    };
    let finished = false;
    req.on('close', () => {
      if (!finished && !req.complete) {
        finished = true;
        done(false);
      }
    });
    req.on('end', () => {
      finished = true;
      const r = done(true);
      const url = req.url ?? '';
      const bytesMatch = /^\/bytes\/([0-9]+)/.exec(url);
      const slow = /^\/slow\/([0-9]+)/.exec(url);
      if (bytesMatch) {
        let left = Number(bytesMatch[1]);
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        const chunk = Buffer.alloc(65536, 7);
        const pump = (): void => {
          while (left > 0) {
            const n = Math.min(left, chunk.length);
            left -= n;
            if (!res.write(chunk.subarray(0, n))) {
              res.once('drain', pump);
              return;
            }
          }
          res.end();
        };
        pump();
      } else if (slow) {
        setTimeout(() => res.end(JSON.stringify(r)), Number(slow[1]));
      } else if (url.startsWith('/headers')) {
        res.writeHead(200, { 'content-type': 'text/plain', connection: 'keep-alive, x-hop', 'keep-alive': 'timeout=5', 'x-hop': 'secret', 'x-kept': 'yes', 'set-cookie': ['a=1', 'b=2'], 'strict-transport-security': 'max-age=5' });
        res.end('ok');
      } else {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(r));
      }
    });
  });
  await new Promise<void>((r) => server.listen(listenPort, '127.0.0.1', r));
  port = (server.address() as { port: number }).port;
  const actual = port;
  return {
    url: `http://127.0.0.1:${actual}`,
    port: actual,
    seen,
    next: (timeoutMs = 5_000) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('the origin saw no request')), timeoutMs);
        waiters.push((r) => {
          clearTimeout(timer);
          resolve(r);
        });
      }),
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

export interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  text: string;
}

export interface RequestOptions {
  port: number;
  host?: string;
  path?: string;
  method?: string;
  headers?: Record<string, string | string[]>;
  body?: Buffer | string;
  /** HTTPS: the SNI name (default: the Host without port) and the CA to trust. */
  tls?: { servername?: string; ca: string | Buffer };
}

/**
 * What a browser sends besides Host: sites score bots by default (spec/3 §2.5 `bot.enabled`), and
 * a bare client would be challenged.
 */
export const BROWSER_HEADERS: Readonly<Record<string, string>> = {
  'user-agent': 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36',
  accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8',
  'accept-language': 'en-US,en;q=0.9',
  'accept-encoding': 'gzip, deflate',
};

/**
 * `headers` on top of a browser's, unless they name their own User-Agent: a test that does
 * controls every header (bot-score tests).
 */
export function withBrowserHeaders<T extends string | string[]>(headers: Record<string, T> = {}): Record<string, T | string> {
  return Object.keys(headers).some((k) => k.toLowerCase() === 'user-agent') ? { ...headers } : { ...BROWSER_HEADERS, ...headers };
}

/** One request on a fresh connection, with a browser's headers (see withBrowserHeaders); resolves with the whole response. */
export function request(opts: RequestOptions): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | string[]> = withBrowserHeaders(opts.headers);
    if (opts.host !== undefined) headers['host'] = opts.host;
    const common = { host: '127.0.0.1', port: opts.port, path: opts.path ?? '/', method: opts.method ?? 'GET', headers, agent: false as const };
    const req = opts.tls
      ? httpsRequest({ ...common, ca: opts.tls.ca, servername: opts.tls.servername ?? (opts.host ?? '').replace(/:[0-9]+$/, '') })
      : httpRequest(common);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const body = Buffer.concat(chunks);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text: body.toString() });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** The JSON an echo origin answered with. */
export function seenOf(reply: Reply): SeenRequest {
  return JSON.parse(reply.text) as SeenRequest;
}

/** The port of the echo origin that answered, or 0 when the proxy answered itself. */
export function servedBy(reply: Reply): number {
  return reply.status === 200 && reply.headers['content-type'] === 'application/json' ? seenOf(reply).port : 0;
}

/** A self-signed certificate for `names` (first one is the CN), made with openssl. */
export async function makeCert(dir: string, base: string, names: string[]): Promise<{ cert: string; key: string; pem: string }> {
  const cert = join(dir, `${base}.crt`);
  const key = join(dir, `${base}.key`);
  await promisify(execFile)('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
    '-keyout', key, '-out', cert, '-subj', `/CN=${names[0]}`, '-addext', `subjectAltName=${names.map((n) => `DNS:${n}`).join(',')}`,
  ]);
  return { cert, key, pem: readFileSync(cert, 'utf8') };
}

export interface ApiReply {
  status: number;
  // The tests read many response shapes; each asserts the fields it uses.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: { success: boolean; data: any; error: string | null; meta: { version: string; code?: string } };
}

/** A call to the admin API. */
export async function api(root: ProxyRoot, method: string, path: string, opts: { token?: string | null; host?: string; body?: unknown } = {}): Promise<ApiReply> {
  const headers: Record<string, string> = {};
  const token = opts.token === undefined ? ADMIN_TOKEN : opts.token;
  if (token !== null) headers['authorization'] = `Bearer ${token}`;
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  const reply = await request({
    port: root.adminPort,
    path: `/api/v1${path}`,
    method,
    headers,
    ...(opts.host !== undefined ? { host: opts.host } : {}),
    ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
  });
  return { status: reply.status, body: JSON.parse(reply.text) as ApiReply['body'] };
}

/** Polls `check` every 50 ms until it returns true; fails after `timeoutMs`. */
export async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

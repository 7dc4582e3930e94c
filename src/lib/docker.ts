/**
 * The container runtime as a source of containers: list, inspect, follow the event stream, and
 * map a container to the server UUID it belongs to. Shared by the node agent (spec/1 §2.10) and the
 * container daemon (spec/3 §2.8). The engine is allowed to be down: every call then rejects with
 * an AppError `ERR_DOCKER_UNAVAILABLE` naming the endpoint, and the event watcher keeps retrying,
 * so a caller logs and carries on serving what it already knows.
 *
 * The engine is spoken to directly (four GET endpoints over node:http), not through dockerode:
 * dockerode loads gRPC, protobuf and an SSH client at require time, about 30 MiB of memory in
 * every process that watches containers (docs/decisions.md "The executable's memory").
 */
import { readFile } from 'node:fs/promises';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { AppError, errorMessage } from '../core/app-error.ts';

export interface ContainerInfo {
  id: string;
  /** Without the engine's leading slash. */
  name: string;
  labels: Record<string, string>;
  running: boolean;
  /** Host PID of the container's init process; 0 when not running. */
  pid: number;
  /**
   * The engine's HostConfig.NetworkMode: `default`, `bridge`, `host`, `none`, a network name, or
   * `container:<id>` when the container joins another container's network namespace.
   */
  networkMode: string;
}

export type ContainerAction = 'start' | 'die' | 'destroy' | 'rename';

export interface ContainerEvent {
  action: ContainerAction;
  id: string;
  /** The container's name at the time of the event (the new name for `rename`). */
  name?: string;
}

export interface ListOptions {
  /**
   * Keeps only the containers it accepts, decided on the cheap list data. Only kept, running
   * containers are inspected (the list endpoint does not carry the PID), so a filter such as
   * `(c) => serverUuidOf(c) !== null` saves one request per unrelated container.
   */
  where?: (c: Omit<ContainerInfo, 'pid'>) => boolean;
}

export interface ContainerSource {
  /** All containers (running or not) that pass `where`. */
  list(opts?: ListOptions): Promise<ContainerInfo[]>;
  /** Follows start/die/destroy/rename of containers until the returned function is called. */
  watch(onEvent: (e: ContainerEvent) => void): () => void;
  /** One container by id or name; null when the engine does not know it. */
  inspect(id: string): Promise<ContainerInfo | null>;
  /** The negotiated API version, e.g. `1.41`. */
  version(): Promise<string>;
}

export interface ContainerSourceOptions {
  /** `unix:///var/run/docker.sock` or `tcp://host:port`. */
  endpoint: string;
  /** Ceiling for version negotiation (spec default 1.44). */
  apiVersion?: string;
  /** tcp only: directory holding cert.pem, key.pem and ca.pem; the engine's certificate is verified. */
  tls?: { certPath: string };
  logger: Logger;
  /** Per request (not for the event stream). */
  requestTimeoutMs?: number;
}

const DEFAULT_CEILING = '1.44';
const ACTIONS: readonly ContainerAction[] = ['start', 'die', 'destroy', 'rename'];
const RETRY_MIN_MS = 500;
const RETRY_MAX_MS = 30_000;
/** A stream that lived this long counts as healthy, so the next outage starts at the short delay. */
const HEALTHY_STREAM_MS = 10_000;
const INSPECT_CONCURRENCY = 8;

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Label keys checked before all others, in this order. */
export const SERVER_UUID_LABELS: readonly string[] = ['hostkit.server_uuid'];

/**
 * Runs wherever a container must be tied to a server (discovery, events). Returns the server UUID
 * (lowercase) or null when the container is not managed (spec/1 §2.10).
 *
 * Order: (1) the container name, because that is how Pterodactyl Wings names a server's container
 * (name = server UUID; its labels are only `Service=Pterodactyl`, `ContainerType=server_process`,
 * and its installer container `<uuid>_installer` therefore stays unmanaged); (2) the label
 * `hostkit.server_uuid`, an explicit claim for panels that name containers otherwise; (3) any other
 * label whose value is UUID-shaped, keys in code-unit sorted order so the answer never depends on
 * the engine's map order. Only the exact 8-4-4-4-12 hex shape counts, whole value, any case.
 */
export function serverUuidOf(info: Pick<ContainerInfo, 'name' | 'labels'>): string | null {
  const name = info.name.startsWith('/') ? info.name.slice(1) : info.name;
  if (UUID_RE.test(name)) return name.toLowerCase();
  for (const key of SERVER_UUID_LABELS) {
    const v = info.labels[key];
    if (v !== undefined && UUID_RE.test(v)) return v.toLowerCase();
  }
  for (const key of Object.keys(info.labels).sort()) {
    const v = info.labels[key];
    if (v !== undefined && UUID_RE.test(v)) return v.toLowerCase();
  }
  return null;
}

interface Endpoint {
  /** For messages: the endpoint as configured. */
  text: string;
  socketPath?: string;
  host?: string;
  port?: number;
}

function parseEndpoint(endpoint: string): Endpoint {
  if (endpoint.startsWith('unix://')) {
    const socketPath = endpoint.slice('unix://'.length);
    if (socketPath.startsWith('/')) return { text: endpoint, socketPath };
  } else if (endpoint.startsWith('tcp://')) {
    try {
      const u = new URL(endpoint);
      if (u.hostname !== '' && (u.pathname === '' || u.pathname === '/')) {
        return { text: endpoint, host: u.hostname.replace(/^\[(.*)\]$/, '$1'), port: Number(u.port || 2375) };
      }
    } catch {
      // falls through to the error below
    }
  }
  throw new AppError('ERR_CONFIG', `docker.endpoint must be unix:///path/to/socket or tcp://host:port, got "${endpoint}"`);
}

function parseApiVersion(v: string): [number, number] | undefined {
  const m = /^v?(\d+)\.(\d+)$/.exec(v.trim());
  return m?.[1] === undefined || m[2] === undefined ? undefined : [Number(m[1]), Number(m[2])];
}

function compareApi(a: [number, number], b: [number, number]): number {
  return a[0] - b[0] || a[1] - b[1];
}

/** The engine's answers this module reads (Engine API, any version since 1.24). */
interface EngineVersion {
  Version?: string;
  ApiVersion?: string;
  MinAPIVersion?: string;
}
interface EngineContainer {
  Id: string;
  Names: string[];
  Labels?: Record<string, string> | null;
  State?: string;
  HostConfig?: { NetworkMode?: string };
}
interface EngineInspect {
  Id: string;
  Name: string;
  Config?: { Labels?: Record<string, string> | null };
  State?: { Running?: boolean; Pid?: number };
  HostConfig?: { NetworkMode?: string };
}

/** An HTTP error answer of the engine (its JSON `message` when it sent one). */
class EngineHttpError extends Error {
  readonly statusCode: number;
  readonly json: { message?: unknown } | undefined;
  constructor(statusCode: number, body: string) {
    let json: { message?: unknown } | undefined;
    try {
      json = JSON.parse(body) as { message?: unknown };
    } catch {
      json = undefined;
    }
    super(typeof json?.message === 'string' ? json.message : body.trim().slice(0, 200) || `HTTP ${statusCode}`);
    this.statusCode = statusCode;
    this.json = json;
  }
}

/** How to reach the engine: a unix socket, or TCP with or without TLS. */
interface Transport {
  socketPath?: string;
  host?: string;
  port?: number;
  tls?: { cert: Buffer; key: Buffer; ca: Buffer };
}

/**
 * One GET to the engine; resolves with the response once its status is 2xx (the body unread), or
 * rejects with EngineHttpError or the socket's error. `timeoutMs` bounds the wait for an answer
 * and for each later pause in it; undefined: none (the event stream idles between events).
 */
function engineGet(t: Transport, path: string, timeoutMs: number | undefined): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const common = { method: 'GET', path, headers: { accept: 'application/json' }, agent: false as const };
    const req = t.tls
      ? httpsRequest({ ...common, host: t.host, port: t.port, cert: t.tls.cert, key: t.tls.key, ca: t.tls.ca })
      : httpRequest(t.socketPath !== undefined ? { ...common, socketPath: t.socketPath } : { ...common, host: t.host, port: t.port });
    if (timeoutMs !== undefined) {
      req.setTimeout(timeoutMs, () => req.destroy(Object.assign(new Error(`no answer within ${timeoutMs} ms`), { code: 'ETIMEDOUT' })));
    }
    req.on('error', reject);
    req.on('response', (res) => {
      const status = res.statusCode ?? 0;
      if (status >= 200 && status < 300) {
        resolve(res);
        return;
      }
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        // An error answer is a short JSON message; more than this is not read into memory.
        if (body.length < 64 * 1024) body += c;
      });
      res.on('end', () => reject(new EngineHttpError(status, body)));
      res.on('error', reject);
    });
    req.end();
  });
}

/** One GET whose JSON answer is read whole. */
async function engineJson<T>(t: Transport, path: string, timeoutMs: number): Promise<T> {
  const res = await engineGet(t, path, timeoutMs);
  let body = '';
  res.setEncoding('utf8');
  for await (const chunk of res) body += chunk as string;
  return JSON.parse(body) as T;
}

interface Client {
  transport: Transport;
  /** `/v1.44`: the prefix of every versioned path. */
  prefix: string;
  apiVersion: string;
}

/**
 * Called once per process per runtime endpoint, at role start. Returns the source; nothing is
 * contacted until the first call. Throws AppError `ERR_CONFIG` only for an endpoint that is not a
 * unix or tcp URI.
 */
export function createContainerSource(opts: ContainerSourceOptions): ContainerSource {
  const ep = parseEndpoint(opts.endpoint);
  const ceilingText = opts.apiVersion ?? DEFAULT_CEILING;
  const ceiling = parseApiVersion(ceilingText);
  if (ceiling === undefined) throw new AppError('ERR_CONFIG', `docker.api_version must look like 1.44, got "${ceilingText}"`);
  const timeout = opts.requestTimeoutMs ?? 15_000;
  const log = opts.logger;

  function unavailable(err: unknown, what: string): AppError {
    const code = (err as { code?: unknown } | null)?.code;
    let reason = errorMessage(err);
    if (code === 'ENOENT' && ep.socketPath !== undefined) reason = `no socket at ${ep.socketPath} (is the engine running?)`;
    else if (code === 'ECONNREFUSED') reason = 'connection refused (is the engine running?)';
    else if (code === 'EACCES') reason = `permission denied on ${ep.socketPath ?? ep.text}`;
    else if (code === 'ECONNRESET') reason = `the connection was reset (${reason})`;
    return new AppError('ERR_DOCKER_UNAVAILABLE', `container engine unreachable at ${ep.text} (${what}): ${reason}`, {
      status: 503,
      cause: err,
    });
  }

  /** Maps anything an engine call throws to one AppError with a message an operator can act on. */
  function toAppError(err: unknown, what: string): AppError {
    if (err instanceof AppError) return err;
    const e = err as { statusCode?: unknown; json?: { message?: unknown } } | null;
    if (typeof e?.statusCode === 'number') {
      const detail = typeof e.json?.message === 'string' ? e.json.message : errorMessage(err);
      return new AppError('ERR_DOCKER', `container engine at ${ep.text} refused ${what}: HTTP ${e.statusCode} ${detail}`, {
        status: 502,
        cause: err,
      });
    }
    // No HTTP answer at all (ENOENT, ECONNREFUSED, socket hang up, TLS failure, timeout): whatever
    // the cause, there is no usable engine behind the endpoint.
    return unavailable(err, what);
  }

  async function transport(): Promise<Transport> {
    if (ep.socketPath !== undefined) return { socketPath: ep.socketPath };
    if (opts.tls === undefined) return { host: ep.host, port: ep.port };
    const dir = opts.tls.certPath;
    let pem: [Buffer, Buffer, Buffer];
    try {
      pem = await Promise.all([
        readFile(join(dir, 'cert.pem')),
        readFile(join(dir, 'key.pem')),
        readFile(join(dir, 'ca.pem')),
      ]);
    } catch (err) {
      throw new AppError('ERR_DOCKER_TLS', `cannot read TLS files (cert.pem, key.pem, ca.pem) in ${dir}: ${errorMessage(err)}`, {
        status: 503,
        cause: err,
      });
    }
    return { host: ep.host, port: ep.port, tls: { cert: pem[0], key: pem[1], ca: pem[2] } };
  }

  async function negotiate(): Promise<Client> {
    const t = await transport();
    let v: EngineVersion;
    try {
      v = await engineJson<EngineVersion>(t, '/version', timeout);
    } catch (err) {
      throw toAppError(err, 'GET /version');
    }
    const engine = parseApiVersion(String(v.ApiVersion));
    if (engine === undefined || ceiling === undefined) {
      throw new AppError('ERR_DOCKER', `container engine at ${ep.text} reported an unreadable API version "${String(v.ApiVersion)}"`);
    }
    const chosen = compareApi(engine, ceiling) < 0 ? engine : ceiling;
    const min = v.MinAPIVersion === undefined ? undefined : parseApiVersion(v.MinAPIVersion);
    if (min !== undefined && compareApi(chosen, min) < 0) {
      throw new AppError(
        'ERR_DOCKER',
        `container engine at ${ep.text} needs API ${v.MinAPIVersion} or newer; docker.api_version ceiling is ${ceilingText}`,
      );
    }
    const apiVersion = `${chosen[0]}.${chosen[1]}`;
    log.info({ endpoint: ep.text, engine: v.Version, engineApi: v.ApiVersion, apiVersion }, 'container engine connected');
    return { transport: t, prefix: `/v${apiVersion}`, apiVersion };
  }

  // One negotiation shared by concurrent callers; dropped when the engine goes away, because the
  // engine that comes back may be another version.
  let negotiated: Promise<Client> | undefined;
  function client(): Promise<Client> {
    if (negotiated === undefined) {
      const p: Promise<Client> = negotiate().catch((err: unknown) => {
        if (negotiated === p) negotiated = undefined;
        throw err;
      });
      negotiated = p;
    }
    return negotiated;
  }
  function forget(err: unknown): void {
    if (err instanceof AppError && err.code === 'ERR_DOCKER_UNAVAILABLE') negotiated = undefined;
  }

  async function call<T>(what: string, fn: (c: Client) => Promise<T>): Promise<T> {
    const c = await client();
    try {
      return await fn(c);
    } catch (err) {
      const app = toAppError(err, what);
      forget(app);
      throw app;
    }
  }

  function fromInspect(d: EngineInspect): ContainerInfo {
    const running = d.State?.Running === true;
    return {
      id: d.Id,
      name: d.Name.replace(/^\//, ''),
      labels: { ...(d.Config?.Labels ?? {}) },
      running,
      pid: running ? (d.State?.Pid ?? 0) : 0,
      networkMode: d.HostConfig?.NetworkMode ?? 'default',
    };
  }

  async function inspect(id: string): Promise<ContainerInfo | null> {
    try {
      return fromInspect(await call(`inspect ${id}`, (c) => engineJson<EngineInspect>(c.transport, `${c.prefix}/containers/${encodeURIComponent(id)}/json`, timeout)));
    } catch (err) {
      if (err instanceof AppError && (err.cause as { statusCode?: unknown } | undefined)?.statusCode === 404) return null;
      throw err;
    }
  }

  async function list(lopts: ListOptions = {}): Promise<ContainerInfo[]> {
    const rows = await call('list containers', (c) => engineJson<EngineContainer[]>(c.transport, `${c.prefix}/containers/json?all=1`, timeout));
    const picked = rows
      .map((r) => ({
        id: r.Id,
        // Legacy links add names like /other/alias; the container's own name has one slash.
        name: (r.Names.find((n) => n.lastIndexOf('/') === 0) ?? r.Names[0] ?? '').replace(/^\//, ''),
        labels: { ...(r.Labels ?? {}) },
        running: r.State === 'running',
        networkMode: r.HostConfig?.NetworkMode ?? 'default',
      }))
      .filter((r) => lopts.where?.(r) ?? true);
    const out: (ContainerInfo | null)[] = new Array(picked.length).fill(null);
    let next = 0;
    async function worker(): Promise<void> {
      while (next < picked.length) {
        const i = next++;
        const r = picked[i];
        if (r === undefined) continue;
        // Gone between list and inspect: simply not there any more.
        out[i] = r.running ? await inspect(r.id) : { ...r, pid: 0 };
      }
    }
    await Promise.all(Array.from({ length: Math.min(INSPECT_CONCURRENCY, picked.length) }, worker));
    return out.filter((c): c is ContainerInfo => c !== null);
  }

  function watch(onEvent: (e: ContainerEvent) => void): () => void {
    let stopped = false;
    let stream: IncomingMessage | undefined;
    let timer: NodeJS.Timeout | undefined;
    let delay = RETRY_MIN_MS;
    let outage = false;
    // timeNano of the last delivered event: a reconnect asks the engine for what it buffered since
    // then (whole seconds, the API's resolution) and drops what was already delivered.
    let lastNano: bigint | undefined;

    function deliver(line: string): void {
      let ev: {
        Type?: string; Action?: string; status?: string; id?: string; timeNano?: number | string;
        Actor?: { ID?: string; Attributes?: Record<string, string> };
      };
      try {
        ev = JSON.parse(line) as typeof ev;
      } catch {
        log.debug({ line: line.slice(0, 200) }, 'unreadable container event skipped');
        return;
      }
      const action = (ev.Action ?? ev.status) as ContainerAction;
      if ((ev.Type !== undefined && ev.Type !== 'container') || !ACTIONS.includes(action)) return;
      const id = ev.Actor?.ID ?? ev.id;
      if (id === undefined) return;
      if (ev.timeNano !== undefined) {
        const t = BigInt(ev.timeNano);
        if (lastNano !== undefined && t <= lastNano) return;
        lastNano = t;
      }
      const name = ev.Actor?.Attributes?.name;
      try {
        onEvent(name === undefined ? { action, id } : { action, id, name: name.replace(/^\//, '') });
      } catch (err) {
        log.error({ err }, 'container event handler failed');
      }
    }

    function retry(err: unknown): void {
      if (stopped) return;
      const msg = errorMessage(err);
      if (!outage) log.warn({ endpoint: ep.text, retry_in_ms: delay }, `container event stream lost: ${msg}`);
      else log.debug({ endpoint: ep.text, retry_in_ms: delay }, `container event stream still down: ${msg}`);
      outage = true;
      timer = setTimeout(connect, delay);
      delay = Math.min(delay * 2, RETRY_MAX_MS);
    }

    async function connect(): Promise<void> {
      timer = undefined;
      if (stopped) return;
      let s: IncomingMessage;
      try {
        let query = `filters=${encodeURIComponent(JSON.stringify({ type: ['container'], event: [...ACTIONS] }))}`;
        if (lastNano !== undefined) query += `&since=${lastNano / 1_000_000_000n}`;
        s = await call('GET /events', (c) => engineGet(c.transport, `${c.prefix}/events?${query}`, undefined));
      } catch (err) {
        retry(err);
        return;
      }
      if (stopped) {
        s.destroy();
        return;
      }
      stream = s;
      const connectedAt = Date.now();
      if (outage) log.info({ endpoint: ep.text }, 'container event stream reconnected');
      outage = false;
      let buf = '';
      let ended = false;
      const end = (err?: unknown): void => {
        if (ended) return;
        ended = true;
        if (stream === s) stream = undefined;
        if (stopped) return;
        negotiated = undefined;
        if (Date.now() - connectedAt >= HEALTHY_STREAM_MS) delay = RETRY_MIN_MS;
        retry(err ?? new Error('engine closed the stream'));
      };
      s.setEncoding('utf8');
      s.on('data', (chunk: string) => {
        buf += chunk;
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl).trim();
          buf = buf.slice(nl + 1);
          if (line !== '') deliver(line);
        }
      });
      s.on('error', (err: unknown) => end(err));
      s.on('end', () => end());
      s.on('close', () => end());
    }

    void connect();
    return () => {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
      stream?.destroy();
      stream = undefined;
    };
  }

  return {
    list,
    watch,
    inspect,
    version: async () => (await client()).apiVersion,
  };
}

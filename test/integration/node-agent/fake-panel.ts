/**
 * A small panel node-facing API (spec/1 §4.2, §5, §7) for testing the node agent before the
 * real panel addon exists: bearer token, JSON content type, envelope without meta.code on
 * success, 422 ERR_VALIDATION naming the first failing field (checked with the contract's
 * generated validators), 404 ERR_UNKNOWN_SERVER, idempotent suspend. It records every call.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { validateEventsRequest, validateHeartbeatRequest, validateRegisterRequest, validateSuspendRequest } from '../../../src/contracts/validators.js';
import type { SchemaValidator } from '../../../src/core/config-loader.ts';
import { firstFailure } from '../../../src/lib/api-envelope.ts';
import type { EnforcementEvent, LimitsPayload } from '../../../src/contracts/types.ts';

export interface PanelCall {
  method: string;
  path: string;
  body: unknown;
  at: number;
}

export interface FakePanel {
  url: string;
  token: string;
  calls: PanelCall[];
  events: EnforcementEvent[];
  suspended: Set<string>;
  /** The limits served by GET /limits; config_version is what heartbeats answer. */
  limits: LimitsPayload;
  heartbeatSeconds: number;
  /** When set, every request gets this status (simulates an outage: 503, or a token reset: 401). */
  failWith: number | null;
  /** Server UUIDs that belong to this node (suspend of others is 404 ERR_UNKNOWN_SERVER). */
  servers: Set<string>;
  /**
   * A rule beyond the contract's (a stricter panel's): the events it names make their whole batch
   * a 422, as a panel validating a batch does.
   */
  refuseEvent: ((e: EnforcementEvent) => boolean) | null;
  close(): Promise<void>;
  waitFor(pred: (p: FakePanel) => boolean, timeoutMs?: number): Promise<void>;
}

const VERSION = '1.0.0';

function send(res: ServerResponse, status: number, data: unknown, code?: string, error?: string): void {
  const body =
    status < 400
      ? { success: true, data, error: null, meta: { version: VERSION } }
      : { success: false, data: null, error: error ?? 'error', meta: { version: VERSION, ...(code ? { code } : {}) } };
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

/** Starts the fake panel on 127.0.0.1 (port 0) with the given pairing token. */
export async function startFakePanel(token: string): Promise<FakePanel> {
  const panel: FakePanel = {
    url: '',
    token,
    calls: [],
    events: [],
    suspended: new Set(),
    limits: { config_version: 0, timezone: 'UTC', servers: [] },
    heartbeatSeconds: 60,
    failWith: null,
    servers: new Set(),
    refuseEvent: null,
    close: async () => undefined,
    waitFor: async () => undefined,
  };

  const handle = (req: IncomingMessage, res: ServerResponse, raw: string): void => {
    const path = (req.url ?? '').replace(/^\/api\/bandwidth\/node/, '');
    if (panel.failWith !== null) return send(res, panel.failWith, null, panel.failWith === 401 ? 'ERR_UNAUTHORIZED' : 'ERR_INTERNAL', 'forced failure');
    if (req.headers.authorization !== `Bearer ${panel.token}`) return send(res, 401, null, 'ERR_UNAUTHORIZED', 'invalid token');
    let body: unknown = null;
    if (req.method === 'POST') {
      if (!(req.headers['content-type'] ?? '').startsWith('application/json')) return send(res, 422, null, 'ERR_VALIDATION', 'content type must be application/json');
      try {
        body = JSON.parse(raw);
      } catch {
        return send(res, 422, null, 'ERR_VALIDATION', 'body: malformed JSON');
      }
    }
    panel.calls.push({ method: req.method ?? '', path, body, at: Date.now() });
    const check = (v: SchemaValidator<unknown>): boolean => {
      if (v(body)) return true;
      send(res, 422, null, 'ERR_VALIDATION', firstFailure(v.errors));
      return false;
    };
    if (req.method === 'POST' && path === '/register') {
      if (check(validateRegisterRequest)) send(res, 200, { node_id: 7, heartbeat_interval_seconds: panel.heartbeatSeconds, config_version: panel.limits.config_version });
    } else if (req.method === 'POST' && path === '/heartbeat') {
      if (check(validateHeartbeatRequest)) send(res, 200, { config_version: panel.limits.config_version });
    } else if (req.method === 'GET' && path === '/limits') {
      send(res, 200, panel.limits);
    } else if (req.method === 'POST' && path === '/events') {
      if (check(validateEventsRequest)) {
        const events = (body as { events: EnforcementEvent[] }).events;
        const refused = events.findIndex((e) => panel.refuseEvent?.(e) === true);
        if (refused !== -1) return send(res, 422, null, 'ERR_VALIDATION', `events/${refused}/message: refused`);
        panel.events.push(...events);
        send(res, 200, { accepted: events.length });
      }
    } else if (req.method === 'POST' && path === '/suspend') {
      if (check(validateSuspendRequest)) {
        const uuid = (body as { server_uuid: string }).server_uuid;
        if (!panel.servers.has(uuid)) return send(res, 404, null, 'ERR_UNKNOWN_SERVER', 'unknown server');
        panel.suspended.add(uuid);
        send(res, 200, { suspended: true });
      }
    } else {
      send(res, 404, null, 'ERR_NOT_FOUND', 'no route');
    }
  };

  const server: Server = createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (raw += c));
    req.on('end', () => handle(req, res, raw));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  panel.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  panel.close = () =>
    new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  panel.waitFor = async (pred, timeoutMs = 20_000) => {
    const end = Date.now() + timeoutMs;
    while (!pred(panel)) {
      if (Date.now() > end) throw new Error(`fake panel: condition not met in ${timeoutMs} ms; calls: ${panel.calls.map((c) => `${c.method} ${c.path}`).join(', ')}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  return panel;
}

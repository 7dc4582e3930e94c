/**
 * The agent's client of the panel's node-facing API (spec/1 §4.2): bearer pairing token,
 * JSON bodies, the envelope unwrapped. Failures are PanelError with the HTTP status (0 for a
 * network failure or time-out), so callers retry on 5xx and network errors and never on 4xx.
 */
import { SERVICE_VERSION } from '../../src/core/version.ts';
import { requestText, type HttpAnswer } from '../../src/lib/http-request.ts';
import type {
  EnforcementEvent,
  HeartbeatRequest,
  HeartbeatResponse,
  LimitsPayload,
  RegisterRequest,
  RegisterResponse,
} from '../../src/contracts/types.ts';

export class PanelError extends Error {
  readonly status: number;
  readonly code: string;

  constructor(status: number, code: string, message: string) {
    super(message);
    this.name = 'PanelError';
    this.status = status;
    this.code = code;
  }

  /** Worth retrying later: the panel was unreachable or failed on its side (or throttled us). */
  get retryable(): boolean {
    return this.status === 0 || this.status >= 500 || this.status === 429;
  }
}

export interface PanelClient {
  register(body: RegisterRequest): Promise<RegisterResponse>;
  heartbeat(body: HeartbeatRequest): Promise<HeartbeatResponse>;
  limits(): Promise<LimitsPayload>;
  events(events: readonly EnforcementEvent[]): Promise<number>;
  suspend(serverUuid: string, reason: string): Promise<boolean>;
}

export interface PanelClientOptions {
  /** The panel's base_url; the API lives under /api/bandwidth/node. */
  url: string;
  /** The pairing token, read from the token file at start. */
  token: string;
  timeoutMs?: number;
}

/** Creates the client; no request is made until a method is called. */
export function createPanelClient(opts: PanelClientOptions): PanelClient {
  const base = `${opts.url.replace(/\/+$/, '')}/api/bandwidth/node`;

  async function call<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
    let res: HttpAnswer;
    try {
      res = await requestText(`${base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${opts.token}`,
          accept: 'application/json',
          'user-agent': `hostkit-bandwidth-node/${SERVICE_VERSION}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        timeoutMs: opts.timeoutMs ?? 10_000,
      });
    } catch (err) {
      const cause = (err as { code?: string }).code ?? (err as Error).name;
      throw new PanelError(0, 'ERR_NETWORK', `panel unreachable (${cause}) at ${base}${path}`);
    }
    const text = res.text;
    let envelope: { success?: boolean; data?: unknown; error?: string | null; meta?: { code?: string } } | undefined;
    try {
      envelope = JSON.parse(text) as typeof envelope;
    } catch {
      envelope = undefined;
    }
    if (res.status < 200 || res.status > 299 || envelope?.success !== true) {
      // Not the panel's JSON envelope: a proxy's error page or a wrong panel.url; say what came instead.
      const message =
        envelope?.error ??
        (envelope === undefined
          ? `not the panel's JSON answer (${text.trim() === '' ? 'an empty body' : `it began ${JSON.stringify(text.trim().slice(0, 80))}`}): is panel.url the panel's address?`
          : `HTTP ${res.status}`);
      throw new PanelError(res.status, envelope?.meta?.code ?? '', `panel answered ${res.status} to ${method} ${path}: ${message}`);
    }
    return envelope.data as T;
  }

  return {
    register: (body) => call<RegisterResponse>('POST', '/register', body),
    heartbeat: (body) => call<HeartbeatResponse>('POST', '/heartbeat', body),
    limits: () => call<LimitsPayload>('GET', '/limits'),
    events: async (events) => (await call<{ accepted: number }>('POST', '/events', { events })).accepted,
    suspend: async (server_uuid, reason) => (await call<{ suspended: boolean }>('POST', '/suspend', { server_uuid, reason })).suspended,
  };
}

/** Exponential backoff of the register loop: 1 s doubling to a 30 s cap (spec/1 §4.2 rule 1). */
export function registerBackoffMs(attempt: number): number {
  return Math.min(30_000, 1000 * 2 ** Math.max(0, attempt));
}

/**
 * The panel's calls to a node agent's API (spec/1 §4.1, spec/3 §6.3) with the node's pairing
 * token, for every addon that talks to nodes: limits pushes, stats polls and unthrottle (bandwidth),
 * the SMART event pull (firewall). Errors name the node and what it answered.
 */
import { AppError } from '../../../src/core/app-error.ts';
import type { LimitsPayload, SmartEventsData, StatsData } from '../../../src/contracts/types.ts';
import { validateLimitsApplied, validateSmartEventsData, validateStatsData, validateUnthrottleResponse } from '../../../src/contracts/validators.js';
import type { SchemaValidator } from '../../../src/core/config-loader.ts';
import { requestText, type HttpAnswer } from '../../../src/lib/http-request.ts';
import type { NodeAgentTarget } from '../context.ts';

export type NodeTarget = NodeAgentTarget;

const TIMEOUT_MS = 10_000;

/**
 * What the node answered is checked against the contract before anything uses it: counters and
 * rates go into the rollups and pages, and a buggy or hostile agent (a negative or 1e300 counter,
 * a string where a number goes) must not corrupt them.
 */
async function call<T>(node: NodeTarget, method: string, path: string, validate: SchemaValidator<T>, body?: unknown): Promise<T> {
  let res: HttpAnswer;
  try {
    res = await requestText(`${node.apiUrl.replace(/\/+$/, '')}/api/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${node.token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      timeoutMs: TIMEOUT_MS,
    });
  } catch (err) {
    throw new AppError('ERR_NODE_UNREACHABLE', `node ${node.name} (${node.apiUrl}) is unreachable: ${err instanceof Error ? err.message : String(err)}`, { status: 502, cause: err });
  }
  const text = res.text;
  let env: { success?: boolean; data?: T; error?: string | null; meta?: { code?: string } } = {};
  try {
    env = JSON.parse(text) as typeof env;
  } catch {
    // reported below with the status
  }
  if (res.status < 200 || res.status > 299 || env.success !== true) {
    throw new AppError(env.meta?.code || 'ERR_NODE_FAILED', `node ${node.name} answered ${res.status}${env.error ? `: ${env.error}` : ''}`, { status: res.status === 404 ? 404 : 502 });
  }
  if (!validate(env.data)) {
    const e = validate.errors?.[0];
    throw new AppError('ERR_NODE_FAILED', `node ${node.name} answered ${method} ${path} with data that does not follow the node API contract (${e ? `${e.instancePath || 'data'} ${e.message ?? e.keyword}` : 'invalid'}): ignored`, { status: 502 });
  }
  return env.data;
}

/** PUT /limits: the full set for the node; returns applied/failed counts. */
export function pushLimits(node: NodeTarget, payload: LimitsPayload): Promise<{ applied: number; failed: number }> {
  return call(node, 'PUT', '/limits', validateLimitsApplied, payload);
}

/** GET /stats. */
export function fetchStats(node: NodeTarget): Promise<StatsData> {
  return call(node, 'GET', '/stats', validateStatsData);
}

/** POST /servers/{uuid}/unthrottle. */
export function unthrottle(node: NodeTarget, uuid: string): Promise<{ unthrottled: boolean }> {
  return call(node, 'POST', `/servers/${encodeURIComponent(uuid)}/unthrottle`, validateUnthrottleResponse);
}

/** GET /smart/events?after=&limit=: the SMART events with id > after, oldest first, and the store's stream id. */
export function fetchSmartEvents(node: NodeTarget, after: number, limit: number): Promise<SmartEventsData> {
  return call(node, 'GET', `/smart/events?after=${after}&limit=${limit}`, validateSmartEventsData);
}

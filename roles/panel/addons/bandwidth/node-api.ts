/**
 * The panel's node-facing API (spec/1 §4.2) under `/api/bandwidth/node`: the envelope of §2.1
 * without meta.code on success, its own middleware in the order of §5 rule 2 (JSON content type,
 * a throttle that answers 429, pairing-token authentication; panel API keys are not accepted),
 * bodies capped at 1 MiB (§4), and 422 ERR_VALIDATION naming the first failing field for every
 * bad body: a wrong content type and malformed JSON included, since §7 has no 400 or 415 here.
 */
import { isIP } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { validateEventsRequest, validateHeartbeatRequest, validateRegisterRequest, validateSuspendRequest } from '../../../../src/contracts/validators.js';
import type { EventsRequest, HeartbeatRequest, RegisterRequest, SuspendRequest } from '../../../../src/contracts/types.ts';
import type { SchemaValidator } from '../../../../src/core/config-loader.ts';
import { AppError } from '../../../../src/core/app-error.ts';
import { SERVICE_VERSION } from '../../../../src/core/version.ts';
import { firstFailure } from '../../../../src/lib/api-envelope.ts';
import { installEnvelope } from '../../../../src/lib/http-api.ts';
import { MIB } from '../../../../src/lib/units.ts';
import type { PanelContext } from '../../context.ts';
import { isDeletedNodeToken, nodeByToken } from '../../services/infrastructure.ts';
import { now } from '../../services/records.ts';
import type { NodeRow } from '../../store/records.ts';
import type { BandwidthService } from './service.ts';
import type { BandwidthStore } from './store.ts';

/** Requests per node address per minute before 429 (spec/1 §8 leaves the threshold open). */
export const THROTTLE_PER_MINUTE = 600;
/** spec/1 §4 and §8: request bodies are capped at 1 MiB (the panel app's own limit is larger). */
export const NODE_BODY_LIMIT = MIB;
/** `application/json`, optionally with parameters (`; charset=utf-8`); `application/jsonx` is not JSON. */
const JSON_CONTENT_TYPE = /^application\/json[ \t]*(;.*)?$/i;
/** RFC 3339 date-time (§2.2 rule 6), checked field by field beyond the schema's pattern. */
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))$/;

declare module 'fastify' {
  interface FastifyRequest {
    bandwidthNode?: NodeRow;
  }
}

function body<T>(req: FastifyRequest, validate: SchemaValidator<T>): T {
  if (!validate(req.body)) throw new AppError('ERR_VALIDATION', firstFailure(validate.errors), { status: 422 });
  return req.body;
}

/** True for a real RFC 3339 timestamp: month, day of that month, hour, minute, second (60 for a leap second) and offset in range. */
export function isRfc3339(value: string): boolean {
  const m = RFC3339.exec(value);
  if (m === null) return false;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  const offsetOk = m[9] === undefined || (Number(m[9]) <= 23 && Number(m[10]) <= 59);
  return month >= 1 && month <= 12 && day >= 1 && day <= daysInMonth && hour <= 23 && minute <= 59 && second <= 60 && offsetOk;
}

/**
 * One spelling per instant (`…T07:00:00Z`, `…t07:00:00.000z` and `…T08:00:00+01:00` are the
 * same event time): UTC with milliseconds, so a resent event is recognised whatever its spelling.
 * A leap second is the instant after :59. Only for a value isRfc3339 accepted.
 */
export function canonicalRfc3339(value: string): string {
  const m = RFC3339.exec(value) as RegExpExecArray;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const fraction = Math.floor(Number(`0${m[7] ?? ''}`) * 1000);
  const zone = m[8] ?? 'Z';
  const offsetMin = /^[Zz]$/.test(zone) ? 0 : (zone.startsWith('-') ? -1 : 1) * (Number(m[9]) * 60 + Number(m[10]));
  return new Date(Date.UTC(year, month - 1, day, hour, minute, second) + fraction - offsetMin * 60_000).toISOString();
}

/** rule 1: the api_url as given (a valid http(s) URL with host and port), or derived from the peer address. */
export function resolveApiUrl(r: RegisterRequest, peer: string): string {
  const given = (r.api_url ?? '').trim();
  if (given === '') {
    const ip = peer.replace(/^::ffff:/, '');
    const host = isIP(ip) === 6 ? `[${ip}]` : ip || r.hostname;
    return `http://${host}:${r.port}`;
  }
  let url: URL;
  try {
    url = new URL(given);
  } catch {
    throw new AppError('ERR_VALIDATION', 'api_url: must be a valid http(s) URL', { status: 422 });
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '' || url.username !== '' || url.search !== '' || url.hash !== '') {
    throw new AppError('ERR_VALIDATION', 'api_url: must be an http(s) URL with a host and an optional port, no credentials or query', { status: 422 });
  }
  if (url.port === '0') throw new AppError('ERR_VALIDATION', 'api_url: the port must be 1-65535', { status: 422 });
  // The panel adds /api/v1 itself (a base path of a proxy in front of the agent is kept).
  if (/\/api\/v1\/?$/.test(url.pathname)) throw new AppError('ERR_VALIDATION', 'api_url: give the agent\'s base URL without /api/v1 (the panel adds it)', { status: 422 });
  return url.toString().replace(/\/+$/, '');
}

/** Registers the API; runs once at app build. */
export function registerNodeApi(app: FastifyInstance, ctx: PanelContext, store: BandwidthStore, service: BandwidthService): void {
  const { ok, fail } = installEnvelope(app, { version: SERVICE_VERSION, codeOnSuccess: false, logger: ctx.logger, bodyLimit: NODE_BODY_LIMIT });
  // Every route of this scope gets the 1 MiB cap (a larger body is 413 before it is read whole).
  app.addHook('onRoute', (route) => {
    route.bodyLimit ??= NODE_BODY_LIMIT;
  });
  // This scope's own JSON parser: malformed JSON is a body that failed validation (§7: 422
  // ERR_VALIDATION), not the generic 400; an empty body is no body (then "body: must be object").
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, raw, done) => {
    if ((raw as string).trim() === '') return done(null, undefined);
    parseJson(req, raw as string, (err, value) => {
      if (err !== null) done(new AppError('ERR_VALIDATION', 'body: must be valid JSON', { status: 422 }), undefined);
      else done(null, value);
    });
  });
  const hits = new Map<string, { windowStart: number; count: number }>();
  const throttle = (req: FastifyRequest, reply: FastifyReply): boolean => {
    const t = Date.now();
    const h = hits.get(req.ip);
    if (h === undefined || t - h.windowStart >= 60_000) {
      if (hits.size > 10_000) hits.clear();
      hits.set(req.ip, { windowStart: t, count: 1 });
      return true;
    }
    if (++h.count <= THROTTLE_PER_MINUTE) return true;
    void reply
      .code(429)
      .header('retry-after', String(Math.ceil((h.windowStart + 60_000 - t) / 1000)))
      .type('application/json')
      .send({ success: false, data: null, error: 'too many requests', meta: { version: SERVICE_VERSION } });
    return false;
  };

  // onRequest: before the body is parsed, so a wrong content type is this API's 422, not a generic 415.
  app.addHook('onRequest', async (req, reply) => {
    // Only POSTs carry a body here; HEAD /limits is a GET, other methods find no route (404).
    if (req.method === 'POST' && !JSON_CONTENT_TYPE.test(req.headers['content-type'] ?? '')) {
      return fail(reply, 422, 'ERR_VALIDATION', 'content type must be application/json');
    }
    if (!throttle(req, reply)) return reply;
    // The scheme is case-insensitive (RFC 9110 §11.1); the token is the 64 lowercase hex characters it was issued as.
    const given = /^bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '')?.[1];
    const token = given !== undefined && /^[0-9a-f]{64}$/.test(given) ? given : undefined;
    const node = token === undefined ? undefined : await nodeByToken(ctx, token);
    if (node === undefined) {
      // §7 names GET /limits; every endpoint says the same, so the agent learns it wherever it asks.
      if (token !== undefined && (await isDeletedNodeToken(ctx, token))) return fail(reply, 404, 'ERR_NODE_NOT_FOUND', 'the node of this token was deleted in the panel');
      return fail(reply, 401, 'ERR_UNAUTHORIZED', 'missing or invalid pairing token');
    }
    req.bandwidthNode = node;
    return undefined;
  });
  const nodeOf = (req: FastifyRequest): NodeRow => req.bandwidthNode as NodeRow;

  app.post('/register', async (req) => {
    const r = body<RegisterRequest>(req, validateRegisterRequest);
    const node = nodeOf(req);
    const apiUrl = resolveApiUrl(r, req.ip);
    const before = await store.node(node.id);
    const cameOnline = await store.register(node.id, { api_url: apiUrl, version: r.version, hostname: r.hostname }, now());
    const { settings, configVersion } = await store.settings();
    // Agents register again after new limits (to pick up a changed interval): only news is logged.
    if (before === undefined || before.api_url !== apiUrl || before.version !== r.version || before.hostname !== r.hostname || before.online !== 1) {
      // A node that stays online yet registers from another address is most likely two agents
      // sharing one token: each registration flips api_url, so the panel polls them in turn and
      // their counters mix as resets. A node coming back from offline at a new address is normal.
      if (before !== undefined && before.online === 1 && before.api_url !== '' && before.api_url !== apiUrl) {
        ctx.logger.warn(
          { node: node.name, api_url: apiUrl, previous_api_url: before.api_url, version: r.version },
          'node %s registered from %s while online at %s: two agents may share its token',
          node.name,
          apiUrl,
          before.api_url,
        );
      } else {
        ctx.logger.info({ node: node.name, api_url: apiUrl, version: r.version }, 'node %s registered from %s', node.name, apiUrl);
      }
      await ctx.activity.log({ event: 'bandwidth:node.register', subject: { type: 'node', id: node.id }, properties: { api_url: apiUrl, version: r.version, hostname: r.hostname }, ip: req.ip });
    }
    if (cameOnline) await service.nodeTransition(node.id, true, 'the agent registered');
    return ok({ node_id: node.id, heartbeat_interval_seconds: settings.poll_interval_seconds, config_version: configVersion });
  });

  app.post('/heartbeat', async (req) => {
    // Every heartbeat field is optional: an empty body is an empty heartbeat.
    req.body ??= {};
    const h = body<HeartbeatRequest>(req, validateHeartbeatRequest);
    const node = nodeOf(req);
    // §3: a heartbeat marks the node online and stamps last_seen_at, registered or not.
    const cameOnline = await store.heartbeat(node.id, now(), {
      ...(h.version !== undefined ? { version: h.version } : {}),
      ...(h.containers !== undefined ? { containers: h.containers } : {}),
      ...(h.rx_rate_bps !== undefined ? { rx_rate_bps: Math.round(h.rx_rate_bps) } : {}),
      ...(h.tx_rate_bps !== undefined ? { tx_rate_bps: Math.round(h.tx_rate_bps) } : {}),
      ...(h.throttled !== undefined ? { throttled: h.throttled } : {}),
      ...(h.quota_exceeded !== undefined ? { quota_exceeded: h.quota_exceeded } : {}),
      heartbeat_at: now(),
    });
    if (cameOnline) await service.nodeTransition(node.id, true, 'a heartbeat arrived');
    return ok({ config_version: await store.configVersion() });
  });

  app.get('/limits', async (req) => {
    const node = await ctx.store.nodes.find(nodeOf(req).id);
    if (node === undefined) throw new AppError('ERR_NODE_NOT_FOUND', 'the node of this token no longer exists', { status: 404 });
    return ok(await service.limitsFor(node.id));
  });

  app.post('/events', async (req) => {
    const { events } = body<EventsRequest>(req, validateEventsRequest);
    const badTime = events.findIndex((e) => !isRfc3339(e.occurred_at));
    if (badTime >= 0) throw new AppError('ERR_VALIDATION', `events.${badTime}.occurred_at: must be a valid RFC 3339 timestamp`, { status: 422 });
    const node = nodeOf(req);
    // Only the batch's servers, by their unique uuid: loading every server of the node per batch
    // cut a 1,000-server node to under 300 batches/s (scripts/bench/panel.ts).
    const named = await Promise.all([...new Set(events.map((e) => e.server_uuid))].map((uuid) => ctx.store.servers.findBy({ uuid })));
    const servers = new Map(named.flatMap((s) => (s !== undefined && s.node_id === node.id ? [[s.uuid, s.id] as const] : [])));
    const own = events.flatMap((e) => {
      const id = servers.get(e.server_uuid);
      return id === undefined ? [] : [{ server_id: id, server_uuid: e.server_uuid, type: e.type, period: e.period, direction: e.direction, message: e.message, occurred_at: canonicalRfc3339(e.occurred_at) }];
    });
    // A batch delivered again (at least once, §4.2 rule 4) is stored once; its events still count
    // as accepted, so the agent stops retrying them.
    const added = await store.addEvents(node.id, own, now());
    if (added < own.length) ctx.logger.debug({ node: node.name, repeated: own.length - added }, 'ignored %d events already stored', own.length - added);
    if (own.length < events.length) ctx.logger.warn({ node: node.name, skipped: events.length - own.length }, 'skipped %d events for servers not on node %s', events.length - own.length, node.name);
    return ok({ accepted: events.length });
  });

  app.post('/suspend', async (req) => {
    const s = body<SuspendRequest>(req, validateSuspendRequest);
    await service.suspendForQuota(nodeOf(req).id, s.server_uuid, s.reason, req.ip);
    return ok({ suspended: true });
  });
}

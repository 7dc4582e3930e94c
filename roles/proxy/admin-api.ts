/**
 * The admin API (spec/3 §4.1, §5) on `admin.listen` under /api/v1, documented in
 * docs/proxy-admin-api.md. Order of checks on every request: config.yaml re-read if it changed,
 * Host allow-list (403 ERR_HOST_NOT_ALLOWED), bearer token (401), role (403 ERR_FORBIDDEN);
 * readonly may GET, operator may also manage sites and reload, admin may also replace the global
 * config. Bodies are JSON only: any other Content-Type is 415.
 */
import type { Server } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { AppError } from '../../src/core/app-error.ts';
import { SERVICE_VERSION } from '../../src/core/version.ts';
import { createApiServer, type ApiServer } from '../../src/lib/http-api.ts';
import { canonicalIp } from '../../src/lib/ip-match.ts';
import { loadConfigFile, type ConfigSpec } from '../../src/core/config-loader.ts';
import { MAX_ADMIN_BAN_SECS, type Ban, type BanList } from './ban-list.ts';
import { roleAllows, type AdminAuth, type AdminRole } from './admin-auth.ts';
import { globalFileOf, proxyGlobalSpec, siteSpecFor } from './config.ts';
import { signatureOf } from './config-state.ts';
import { SITE_ID } from './site-ids.ts';
import { ConflictError, ValidationError, withoutUnknownKeys, type ConfigWriter } from './config-writer.ts';
import type { ProxyRuntime, ReloadOutcome } from './proxy-runtime.ts';
import type { ConnectionSlots } from './connection-slots.ts';
import type { QuotaStore } from './quota-store.ts';
import type { RecentEvents } from './recent-events.ts';
import type { MetricsGauges, Telemetry } from './telemetry.ts';

export interface AdminApiOptions {
  runtime: ProxyRuntime;
  writer: ConfigWriter;
  events: RecentEvents;
  quota: QuotaStore;
  slots: ConnectionSlots;
  bans: BanList;
  telemetry: Telemetry;
  /** Read when `GET /metrics` renders. */
  gauges: () => MetricsGauges;
  auth: AdminAuth;
  /**
   * Waits until the data plane has applied every config change so far and handed over its
   * events; runs before each request is handled and before each change is answered.
   */
  sync: () => Promise<void>;
  logger: Logger;
}

const DEFAULT_EVENT_LIMIT = 100;
// An hour of per-minute aggregates unless the caller asks for more.
const DEFAULT_MINUTES = 60;

declare module 'fastify' {
  interface FastifyRequest {
    adminToken?: { name: string; role: AdminRole };
  }
}

/** The role a route needs: /global (which holds the tokens) is admin, other reads readonly, other writes operator. */
function neededRole(method: string, route: string | undefined): AdminRole {
  if (route === '/api/v1/global') return 'admin';
  return method === 'GET' || method === 'HEAD' ? 'readonly' : 'operator';
}


/**
 * The address of a ban request in the form the data plane resolves clients to (canonicalIp), so
 * `2001:DB8:0::1` bans the client `2001:db8::1` and `::ffff:192.0.2.9` the client 192.0.2.9, and
 * either spelling lifts the ban. Anything else is a 400.
 */
function banIp(raw: unknown): string {
  const ip = typeof raw === 'string' ? canonicalIp(raw.trim()) : undefined;
  if (ip === undefined) throw new AppError('ERR_BAD_REQUEST', 'ip must be an IPv4 or IPv6 address', { status: 400 });
  return ip;
}

/**
 * The `site` query parameter of the reads: one site id, `-`, or absent. Sent twice it arrives as
 * a list, which names no site: said, rather than answered as an empty list or echoed as `site`.
 */
function siteQuery(raw: unknown): string | undefined {
  if (raw === undefined || typeof raw === 'string') return raw;
  throw new AppError('ERR_BAD_REQUEST', 'site must be given once', { status: 400 });
}

function banJson(b: Ban, now: number): Record<string, unknown> {
  return {
    ip: b.ip,
    site: b.site,
    reason: b.reason,
    since: new Date(b.since).toISOString(),
    until: new Date(b.until).toISOString(),
    remaining_secs: Math.max(0, Math.ceil((b.until - now) / 1000)),
  };
}

/**
 * What the loader ignored in a file the API just wrote (unknown keys: typos such as `rate_limt`),
 * as `/json/pointer: reason` strings for the answer's `warnings`; the reload logs them too. The
 * file passed the loader before it was written, so it loads; if it changed on disk meanwhile,
 * its problems are the reload's to report and the answer has no warnings.
 */
function warningsOf<T>(file: string, spec: ConfigSpec<T>): string[] {
  try {
    return loadConfigFile(file, spec).warnings;
  } catch {
    return [];
  }
}

function reloadSummary(o: ReloadOutcome): Record<string, unknown> {
  return { generation: o.generation.number, swapped: o.swapped, sites: o.generation.sites.length, broken: o.broken, restart_required: o.restartRequired };
}

/** Builds the API server (not listening yet); runs once at start. */
export function createAdminApi(opts: AdminApiOptions): ApiServer {
  const { runtime, writer, events, quota, slots, bans, telemetry, gauges, auth, sync, logger } = opts;
  const api = createApiServer({ codeOnSuccess: false, version: SERVICE_VERSION, logger });
  const { app } = api;
  const startedAt = Date.now();
  // Node answers an HTTP/1.1 request without Host with a bare 400 itself; the allow-list below
  // answers it instead, with the envelope (read by node for each request).
  (app.server as Server & { requireHostHeader: boolean }).requireHostHeader = false;
  // Fastify's own text/plain parser would hand the route a string: JSON only, the rest is 415.
  app.removeContentTypeParser('text/plain');

  // Spec/3 §2.2: tokens and the allow-list come from the live config. The file watcher applies an
  // edit of config.yaml after its debounce (or at its next periodic check); a request that finds
  // the file changed since the last look reloads first, so the edit applies to that request. A
  // file with problems keeps the last good config, tokens included (spec/3 §2.1).
  const globalFile = globalFileOf(runtime.state.root);
  const siteSpec = siteSpecFor(runtime.state.root);
  // A site as JSON: the keys the loader ignored are not configuration (a PUT keeps them in the file).
  const siteJson = (config: unknown): unknown => withoutUnknownKeys(config, siteSpec.schema);
  let globalSeen = signatureOf(globalFile);
  app.addHook('onRequest', async () => {
    const signature = signatureOf(globalFile);
    if (signature === globalSeen) return;
    globalSeen = signature;
    try {
      runtime.reload({ force: false, reason: 'config.yaml changed (admin API request)' });
    } catch (err) {
      logger.error({ err }, 'reload failed: the current configuration keeps serving');
    }
  });

  // Reads see every request answered so far; a change is answered once the workers serve it.
  app.addHook('preHandler', sync);
  app.addHook('onSend', async (req, _reply, payload) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') await sync();
    return payload;
  });

  // Before routing and before tokens, for every path including unknown ones (spec/3 §5).
  app.addHook('onRequest', async (req: FastifyRequest, reply: FastifyReply) => {
    if (!auth.hostAllowed(req.headers.host)) await api.fail(reply, 403, 'ERR_HOST_NOT_ALLOWED', 'the Host header is not in admin.allow_hosts');
  });

  // Bearer token, then role; every route but /api/v1/health runs it.
  async function requireToken(req: FastifyRequest, reply: FastifyReply): Promise<void> {
    const token = auth.authenticate(req.headers.authorization);
    if (!token) {
      await api.fail(reply.header('www-authenticate', 'Bearer'), 401, 'ERR_UNAUTHORIZED', 'missing or unknown bearer token');
      return;
    }
    const needed = neededRole(req.method, req.routeOptions.url);
    if (!roleAllows(token.role, needed)) {
      await api.fail(reply, 403, 'ERR_FORBIDDEN', `token ${token.name} has role ${token.role}; this needs ${needed}`);
      return;
    }
    req.adminToken = token;
  }

  // Prometheus convention: /metrics at the root, text format; any role's token may scrape.
  app.register(async (scope) => {
    scope.addHook('onRequest', requireToken);
    scope.get('/metrics', (_req, reply) => reply.type('text/plain; version=0.0.4; charset=utf-8').send(telemetry.renderMetrics(gauges())));
  });

  const detailed = (reply: FastifyReply, status: number, code: string, message: string, data: unknown): FastifyReply =>
    reply.code(status).type('application/json').send({ success: false, data, error: message, meta: { version: SERVICE_VERSION, code } });

  app.register(
    async (v1) => {
      v1.setErrorHandler((err, _req, reply) => {
        if (err instanceof ValidationError) return detailed(reply, 400, err.code, err.message, { problems: err.problems });
        if (err instanceof ConflictError) return detailed(reply, 409, err.code, err.message, { site: err.site, file: err.file, hostname: err.hostname ?? null });
        // The shared handler maps AppErrors, body errors and everything else.
        throw err;
      });
      v1.get('/health', () =>
        api.ok({
          status: 'ok',
          version: SERVICE_VERSION,
          uptime_seconds: Math.floor((Date.now() - startedAt) / 1000),
          generation: runtime.current().number,
          sites: runtime.current().sites.length,
        }),
      );

      v1.register(async (secured) => {
        secured.addHook('onRequest', requireToken);

        secured.get('/sites', () => {
          const gen = runtime.current();
          const broken = runtime.state.broken();
          return api.ok({
            generation: gen.number,
            sites: gen.sites.map((s) => ({
              id: s.id,
              file: s.file,
              enabled: s.enabled,
              hostnames: s.hostnames,
              origin: s.config.origin.url,
              tls: s.config.tls.enabled,
              // The file on disk fails to load: this is its last good version.
              file_problems: broken.get(s.file)?.problems ?? null,
            })),
            broken: [...broken].map(([file, err]) => ({ file, problems: err.problems })),
          });
        });
        secured.get<{ Params: { id: string } }>('/sites/:id', (req) => {
          const site = runtime.current().byId.get(req.params.id);
          if (!site) throw new AppError('ERR_NOT_FOUND', `no site with id ${JSON.stringify(req.params.id)}`, { status: 404 });
          return api.ok(siteJson(site.config));
        });
        secured.get<{ Querystring: { site?: string; limit?: string } }>('/stats/minutes', (req) => {
          const site = siteQuery(req.query.site);
          if (site === undefined || site === '') throw new AppError('ERR_BAD_REQUEST', 'site is required (a site id, or - for requests no site matched)', { status: 400 });
          const limit = req.query.limit === undefined ? DEFAULT_MINUTES : Number(req.query.limit);
          if (!Number.isInteger(limit) || limit < 1) throw new AppError('ERR_BAD_REQUEST', 'limit must be a positive integer', { status: 400 });
          return api.ok({ site: site === '-' ? null : site, minutes: telemetry.minutes(site === '-' ? null : site, limit) });
        });
        secured.get<{ Params: { id: string } }>('/sites/:id/usage', (req) => {
          const site = runtime.current().byId.get(req.params.id);
          if (!site) throw new AppError('ERR_NOT_FOUND', `no site with id ${JSON.stringify(req.params.id)}`, { status: 404 });
          return api.ok({ id: site.id, ...quota.usage(site.id, site.config.bandwidth), connections: slots.site(site.id) });
        });
        secured.post<{ Body: unknown }>('/sites', async (req, reply) => {
          const r = writer.createSite(req.body);
          logger.info({ by: req.adminToken?.name, site: r.site.id, file: r.file }, 'site created through the admin API');
          return reply.code(201).send(api.ok({ site: siteJson(r.site), file: r.file, reload: reloadSummary(r.reload), warnings: warningsOf(r.file, siteSpec) }));
        });
        secured.put<{ Params: { id: string }; Body: unknown }>('/sites/:id', (req) => {
          const r = writer.replaceSite(req.params.id, req.body);
          logger.info({ by: req.adminToken?.name, site: r.site.id, file: r.file }, 'site replaced through the admin API');
          return api.ok({ site: siteJson(r.site), file: r.file, reload: reloadSummary(r.reload), warnings: warningsOf(r.file, siteSpec) });
        });
        secured.delete<{ Params: { id: string } }>('/sites/:id', (req) => {
          const r = writer.deleteSite(req.params.id);
          logger.info({ by: req.adminToken?.name, site: r.id, file: r.file }, 'site deleted through the admin API');
          return api.ok({ id: r.id, file: r.file, reload: reloadSummary(r.reload) });
        });
        secured.post('/reload', (req) => {
          const r = runtime.reload({ force: true, reason: `admin API (${req.adminToken?.name ?? '?'})` });
          return api.ok(reloadSummary(r));
        });
        // config.yaml as last loaded (what PUT /global takes back), not the start-up values of
        // the keys that wait for a restart: those are in POST /reload's restart_required.
        secured.get('/global', () => api.ok(withoutUnknownKeys(runtime.state.global(), proxyGlobalSpec.schema)));
        secured.put<{ Body: unknown }>('/global', (req) => {
          const r = writer.replaceGlobal(req.body);
          logger.info({ by: req.adminToken?.name, restart_required: r.restartRequired }, 'config.yaml replaced through the admin API');
          return api.ok({ ...reloadSummary(r), warnings: warningsOf(globalFile, proxyGlobalSpec) });
        });
        secured.get('/bans', () => {
          const now = Date.now();
          return api.ok({ bans: bans.list(now).map((b) => banJson(b, now)) });
        });
        secured.post<{ Body: unknown }>('/bans', async (req, reply) => {
          const body = req.body as { ip?: unknown; duration_secs?: unknown; site?: unknown } | null;
          const ip = banIp(body?.ip);
          const secs = body?.duration_secs;
          if (typeof secs !== 'number' || !Number.isInteger(secs) || secs < 1 || secs > MAX_ADMIN_BAN_SECS) {
            throw new AppError('ERR_BAD_REQUEST', `duration_secs must be an integer from 1 to ${MAX_ADMIN_BAN_SECS}`, { status: 400 });
          }
          const site = body?.site ?? null;
          // A site id as spec/3 §2.3 writes them: "" would be stored as the every-site ban, a NUL
          // would split the ban's key into another IP and site.
          if (site !== null && (typeof site !== 'string' || !SITE_ID.test(site))) throw new AppError('ERR_BAD_REQUEST', 'site must be a site id ([A-Za-z0-9._-]{1,64}) or null', { status: 400 });
          // A ban for a site that does not exist (yet) is allowed: it applies once the site does.
          const ban = bans.add(ip, site, secs, 'admin');
          // The table every worker shares is full (a flood from very many addresses): a 201 would
          // tell the operator that a ban holds which no worker can see.
          if (ban === undefined) throw new AppError('ERR_TABLE_FULL', 'the shared counter table is full: the ban was not made; retry when entries expire', { status: 503 });
          logger.info({ by: req.adminToken?.name, ip, site, duration_secs: secs }, 'client banned through the admin API');
          return reply.code(201).send(api.ok(banJson(ban, Date.now())));
        });
        secured.delete<{ Params: { ip: string }; Querystring: { site?: string } }>('/bans/:ip', (req) => {
          const ip = banIp(req.params.ip);
          const site = req.query.site;
          // Sent twice it arrives as a list, which names no site: said, not answered as "no ban".
          if (site !== undefined && (typeof site !== 'string' || (site !== '' && !SITE_ID.test(site)))) {
            throw new AppError('ERR_BAD_REQUEST', 'site must be one site id ([A-Za-z0-9._-]{1,64}), or empty for the every-site ban', { status: 400 });
          }
          const removed = bans.remove(ip, site === undefined ? undefined : site === '' ? null : site);
          if (removed === 0) throw new AppError('ERR_NOT_FOUND', `no active ban for ${ip}`, { status: 404 });
          logger.info({ by: req.adminToken?.name, ip, site: site ?? null, removed }, 'ban lifted through the admin API');
          return api.ok({ ip, removed });
        });
        secured.get<{ Querystring: { site?: string; limit?: string } }>('/events/recent', (req) => {
          const cap = runtime.current().global.events.recent_buffer;
          const limit = req.query.limit === undefined ? Math.min(DEFAULT_EVENT_LIMIT, cap) : Number(req.query.limit);
          if (!Number.isInteger(limit) || limit < 1) throw new AppError('ERR_BAD_REQUEST', 'limit must be a positive integer', { status: 400 });
          const site = siteQuery(req.query.site);
          // `site=-` asks for the requests no site matched.
          const list = events.recent({ ...(site === undefined ? {} : { site: site === '-' ? null : site }), limit: Math.min(limit, cap) });
          return api.ok({ events: list });
        });
      });
    },
    { prefix: '/api/v1' },
  );
  return api;
}

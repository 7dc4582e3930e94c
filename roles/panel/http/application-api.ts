/**
 * The application API (`/api/application`): root-admin management of users, locations, nodes and
 * their allocations, nests and eggs, and servers, with Pterodactyl's paths and shapes, including
 * what billing modules use: `?include=` relations and the lookups by `external_id`. Every
 * route needs an application key whose owner is a root admin. Every change writes the same
 * `admin:*` activity entry as the admin pages write for the same action (adminAudit), and the
 * same self-protection applies: the key's user cannot delete or demote themselves.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { PanelContext } from '../context.ts';
import { createApiKey } from '../services/api-keys.ts';
import { createEgg, createNest, deleteEgg, deleteNest, eggAttributes, nestAttributes, nestEgg, updateEgg, updateNest } from '../services/catalog.ts';
import {
  allocationAttributes,
  createAllocations,
  createLocation,
  createNode,
  deleteAllocation,
  deleteLocation,
  deleteNode,
  locationAttributes,
  nodeAttributes,
  updateLocation,
  updateNode,
} from '../services/infrastructure.ts';
import { found } from '../services/records.ts';
import { createRelations, type Relation } from '../services/relations.ts';
import { createShapeCheck, inRequestTerms, validationError } from '../services/validation.ts';
import { createServer, deleteServer, serverAttributes, setSuspended, updateServerBuild, updateServerDetails } from '../services/servers.ts';
import { createUser, deleteUser, sendWelcomeMail, updateUser, userAttributes, userUpdateProperties } from '../services/users.ts';
import type { Repository, Row } from '../store/repository.ts';
import { adminAudit } from '../web/respond.ts';
import { item, list, relationship, type ApiItem } from './api-format.ts';
import { apiActor, apiUser, idParam, listQuery, requireApiKey, type ListRules } from './api-auth.ts';

type Params = Record<string, string | undefined>;

/**
 * The names `?include=` asks for, as Fractal reads them: comma-separated, and `a.b` (or Fractal's
 * `a:modifier`) as `a`, whose nested level is not expanded here.
 */
function requestedIncludes(query: unknown): Set<string> {
  const raw = (query as Record<string, unknown> | undefined)?.['include'];
  const text = Array.isArray(raw) ? raw.join(',') : typeof raw === 'string' ? raw : '';
  return new Set(text.split(',').map((name) => name.trim().split(/[.:]/)[0] as string));
}

/**
 * The attributes function of `rows` plus, under `attributes.relationships`, the relations the
 * request's `?include=` names; a name the resource does not have is ignored, as Fractal ignores it.
 * Each include is loaded once for all the rows (a page); runs per read request.
 */
async function withIncludes<T extends Row>(query: unknown, rows: readonly T[], attributes: (r: T) => Record<string, unknown>, relations: Readonly<Record<string, Relation<T>>>): Promise<(r: T) => Record<string, unknown>> {
  const names = [...requestedIncludes(query)].filter((name) => Object.hasOwn(relations, name));
  if (names.length === 0) return attributes;
  const loaded = await Promise.all(names.map(async (name) => [name, await (relations[name] as Relation<T>)(rows)] as const));
  return (r) => ({ ...attributes(r), relationships: Object.fromEntries(loaded.map(([name, of]) => [name, relationship(of(r))])) });
}

/**
 * The read side of one resource: list with search, exact filters and sorts, show by id (and by
 * `external_id` where the resource has one), each with its `?include=` relations. A nested
 * resource's `scope` resolves the parent of the path (404 when it does not exist, so the list of a
 * deleted node's allocations is not an empty page) to the columns its rows must match.
 */
function readRoutes<T extends Row>(
  api: FastifyInstance,
  path: string,
  opts: {
    object: string;
    what: string;
    repo: Repository<T>;
    attributes: (r: T) => Record<string, unknown>;
    includes: Readonly<Record<string, Relation<T>>>;
    search: string[];
    list?: ListRules;
    scope?: (p: Params) => Promise<Record<string, number>>;
    external?: boolean;
  },
): void {
  const show = async (req: FastifyRequest, row: T): Promise<ApiItem> => item(opts.object, (await withIncludes(req.query, [row], opts.attributes, opts.includes))(row));
  api.get(path, async (req) => {
    const q = listQuery(req.query, opts.list ?? {});
    const scope = await opts.scope?.(req.params as Params);
    const page = await opts.repo.list({ page: q.page, perPage: q.perPage, filter: { ...q.filter, ...scope }, search: { columns: opts.search, term: q.search }, sort: q.sort });
    return list(opts.object, page, await withIncludes(req.query, page.items, opts.attributes, opts.includes));
  });
  api.get(`${path}/:id`, async (req) => {
    const p = req.params as Params;
    const scope = (await opts.scope?.(p)) ?? {};
    const row = found(await opts.repo.find(idParam(p.id, opts.what)), opts.what);
    for (const [k, v] of Object.entries(scope)) if (row[k] !== v) found(undefined, opts.what);
    return show(req, row);
  });
  // Pterodactyl's lookup by a billing system's id: the record whose external_id is exactly this.
  if (opts.external === true) {
    api.get(`${path}/external/:external_id`, async (req) => show(req, found(await opts.repo.findBy({ external_id: (req.params as Params).external_id ?? '' }), opts.what)));
  }
}

/** Registers the routes on the /api/application scope; runs once at app build. */
export function registerApplicationApi(api: FastifyInstance, ctx: PanelContext): void {
  requireApiKey(api, ctx, 'application');
  const audit = (req: FastifyRequest, event: string, subject: { type: string; id: number }, properties: Record<string, unknown> = {}): Promise<void> =>
    adminAudit(ctx, req, event, subject, properties);
  const id = (req: FastifyRequest, what: string, key = 'id'): number => idParam((req.params as Params)[key], what);
  const relations = createRelations(ctx.store);

  readRoutes(api, '/users', { object: 'user', what: 'user', repo: ctx.store.users, attributes: userAttributes, includes: relations.user, external: true, search: ['username', 'email'], list: {
    // Emails are stored lower-cased (users.ts); both columns compare case-insensitively.
    filters: { email: { column: 'email', value: (v) => v.toLowerCase() }, uuid: 'uuid', username: 'username', external_id: 'external_id' },
    sorts: ['id', 'uuid'],
  } });
  api.post('/users', async (req, reply) => {
    const u = await createUser(ctx, req.body);
    await audit(req, 'admin:user.create', { type: 'user', id: u.id }, { username: u.username, root_admin: u.root_admin === 1 });
    void sendWelcomeMail(ctx, u);
    return reply.code(201).send(item('user', userAttributes(u)));
  });
  api.patch('/users/:id', async (req) => {
    const userId = id(req, 'user');
    const u = await updateUser(ctx, userId, req.body, { actorId: apiUser(req).id });
    await audit(req, 'admin:user.update', { type: 'user', id: userId }, userUpdateProperties(req.body));
    return item('user', userAttributes(u));
  });
  api.delete('/users/:id', async (req, reply) => {
    const userId = id(req, 'user');
    const u = found(await ctx.store.users.find(userId), 'user');
    await deleteUser(ctx, userId, { actorId: apiUser(req).id });
    await audit(req, 'admin:user.delete', { type: 'user', id: userId }, { username: u.username });
    return reply.code(204).send();
  });
  api.post('/users/:id/api-keys', async (req, reply) => {
    const { type, ...rest } = objectBody(req.body) as { type?: string };
    const userId = id(req, 'user');
    if (type !== undefined && type !== 'client' && type !== 'application') throw validationError([{ field: 'type', rule: 'in', detail: 'the type field must be client or application' }]);
    const keyType = type ?? 'client';
    const created = await createApiKey(ctx, userId, keyType, rest);
    await audit(req, 'admin:api-key.create', { type: 'api_key', id: created.key.id }, { identifier: created.key.identifier, key_type: keyType, user: userId });
    return reply.code(201).send({ ...item('api_key', { identifier: created.key.identifier, key_type: created.key.key_type }), meta: { secret_token: created.token } });
  });

  readRoutes(api, '/locations', { object: 'location', what: 'location', repo: ctx.store.locations, attributes: locationAttributes, includes: relations.location, search: ['short', 'long'], list: { filters: { short: 'short', long: 'long' }, sorts: ['id'] } });
  api.post('/locations', async (req, reply) => {
    const l = await createLocation(ctx, req.body);
    await audit(req, 'admin:location.create', { type: 'location', id: l.id }, { short: l.short });
    return reply.code(201).send(item('location', locationAttributes(l)));
  });
  api.patch('/locations/:id', async (req) => {
    const l = await updateLocation(ctx, id(req, 'location'), req.body);
    await audit(req, 'admin:location.update', { type: 'location', id: l.id }, { short: l.short });
    return item('location', locationAttributes(l));
  });
  api.delete('/locations/:id', async (req, reply) => {
    const locationId = id(req, 'location');
    await deleteLocation(ctx, locationId);
    await audit(req, 'admin:location.delete', { type: 'location', id: locationId });
    return reply.code(204).send();
  });

  readRoutes(api, '/nodes', { object: 'node', what: 'node', repo: ctx.store.nodes, attributes: nodeAttributes, includes: relations.node, search: ['name', 'fqdn'], list: { filters: { uuid: 'uuid', name: 'name', fqdn: 'fqdn' }, sorts: ['id', 'uuid', 'memory', 'disk'] } });
  api.post('/nodes', async (req, reply) => {
    const { node, token } = await createNode(ctx, req.body);
    await audit(req, 'admin:node.create', { type: 'node', id: node.id }, { name: node.name });
    return reply.code(201).send({ ...item('node', nodeAttributes(node)), meta: { pairing_token: token } });
  });
  api.patch('/nodes/:id', async (req) => {
    const node = await updateNode(ctx, id(req, 'node'), req.body);
    await audit(req, 'admin:node.update', { type: 'node', id: node.id }, { name: node.name });
    return item('node', nodeAttributes(node));
  });
  api.delete('/nodes/:id', async (req, reply) => {
    const nodeId = id(req, 'node');
    await deleteNode(ctx, nodeId);
    await audit(req, 'admin:node.delete', { type: 'node', id: nodeId });
    return reply.code(204).send();
  });
  const nodeScope = async (p: Params): Promise<Record<string, number>> => ({ node_id: found(await ctx.store.nodes.find(idParam(p.node, 'node')), 'node').id });
  readRoutes(api, '/nodes/:node/allocations', { object: 'allocation', what: 'allocation', repo: ctx.store.allocations, attributes: allocationAttributes, includes: relations.allocation, search: ['ip', 'ip_alias'], scope: nodeScope });
  api.post('/nodes/:node/allocations', async (req, reply) => {
    const nodeId = id(req, 'node', 'node');
    const added = await createAllocations(ctx, nodeId, req.body);
    const { ip, ports } = req.body as { ip: unknown; ports: unknown };
    await audit(req, 'admin:allocation.create', { type: 'node', id: nodeId }, { ip, ports, added: added.length });
    return reply.code(201).send({ object: 'list', data: added.map((a) => item('allocation', allocationAttributes(a))) });
  });
  api.delete('/nodes/:node/allocations/:id', async (req, reply) => {
    const nodeId = id(req, 'node', 'node');
    const allocationId = id(req, 'allocation');
    await deleteAllocation(ctx, nodeId, allocationId);
    await audit(req, 'admin:allocation.delete', { type: 'node', id: nodeId }, { allocation: allocationId });
    return reply.code(204).send();
  });

  readRoutes(api, '/nests', { object: 'nest', what: 'nest', repo: ctx.store.nests, attributes: nestAttributes, includes: relations.nest, search: ['name'] });
  api.post('/nests', async (req, reply) => {
    const nest = await createNest(ctx, req.body);
    await audit(req, 'admin:nest.create', { type: 'nest', id: nest.id }, { name: nest.name });
    return reply.code(201).send(item('nest', nestAttributes(nest)));
  });
  api.patch('/nests/:id', async (req) => {
    const nest = await updateNest(ctx, id(req, 'nest'), req.body);
    await audit(req, 'admin:nest.update', { type: 'nest', id: nest.id }, { name: nest.name });
    return item('nest', nestAttributes(nest));
  });
  api.delete('/nests/:id', async (req, reply) => {
    const nestId = id(req, 'nest');
    await deleteNest(ctx, nestId);
    await audit(req, 'admin:nest.delete', { type: 'nest', id: nestId });
    return reply.code(204).send();
  });
  const nestScope = async (p: Params): Promise<Record<string, number>> => ({ nest_id: found(await ctx.store.nests.find(idParam(p.nest, 'nest')), 'nest').id });
  readRoutes(api, '/nests/:nest/eggs', { object: 'egg', what: 'egg', repo: ctx.store.eggs, attributes: eggAttributes, includes: relations.egg, search: ['name'], scope: nestScope });
  api.post('/nests/:nest/eggs', async (req, reply) => {
    const nestId = id(req, 'nest', 'nest');
    const egg = await createEgg(ctx, { ...objectBody(req.body), nest_id: nestId });
    await audit(req, 'admin:egg.create', { type: 'egg', id: egg.id }, { name: egg.name, nest: nestId });
    return reply.code(201).send(item('egg', eggAttributes(egg)));
  });
  api.patch('/nests/:nest/eggs/:id', async (req) => {
    const egg = await updateEgg(ctx, (await nestEgg(ctx, id(req, 'nest', 'nest'), id(req, 'egg'))).id, req.body);
    await audit(req, 'admin:egg.update', { type: 'egg', id: egg.id }, { name: egg.name });
    return item('egg', eggAttributes(egg));
  });
  api.delete('/nests/:nest/eggs/:id', async (req, reply) => {
    const egg = await nestEgg(ctx, id(req, 'nest', 'nest'), id(req, 'egg'));
    await deleteEgg(ctx, egg.id);
    await audit(req, 'admin:egg.delete', { type: 'egg', id: egg.id }, { name: egg.name });
    return reply.code(204).send();
  });

  readRoutes(api, '/servers', { object: 'server', what: 'server', repo: ctx.store.servers, attributes: serverAttributes, includes: relations.server, external: true, search: ['name', 'uuid', 'identifier'], list: {
    filters: { name: 'name', uuid: 'uuid', uuidShort: 'identifier', image: 'image', external_id: 'external_id' },
    sorts: ['id', 'uuid'],
  } });
  api.post('/servers', async (req, reply) => {
    const s = await inRequestTerms(pterodactylNames(req.body, 'allocation.default'), () => createServer(ctx, fromPterodactylServer(req.body)));
    await audit(req, 'admin:server.create', { type: 'server', id: s.id }, { name: s.name, owner: s.owner_id, node: s.node_id });
    return reply.code(201).send(item('server', serverAttributes(s)));
  });
  api.patch('/servers/:id/details', async (req) => {
    const s = await inRequestTerms(pterodactylNames(req.body), () => updateServerDetails(ctx, id(req, 'server'), renameUser(req.body)));
    await audit(req, 'admin:server.update', { type: 'server', id: s.id });
    return item('server', serverAttributes(s));
  });
  api.patch('/servers/:id/build', async (req) => {
    const input = fromPterodactylBuild(req.body);
    const s = await inRequestTerms(pterodactylNames(req.body), () => updateServerBuild(ctx, id(req, 'server'), input));
    await audit(req, 'admin:server.build', { type: 'server', id: s.id }, { fields: Object.keys(input) });
    return item('server', serverAttributes(s));
  });
  for (const [action, suspended] of [['suspend', true], ['unsuspend', false]] as const) {
    api.post(`/servers/:id/${action}`, async (req, reply) => {
      // The service writes server:suspended / server:unsuspended with the key's user as actor, as for the admin pages.
      await setSuspended(ctx, id(req, 'server'), suspended, apiActor(req), req.ip);
      return reply.code(204).send();
    });
  }
  api.delete('/servers/:id', async (req, reply) => {
    const server = found(await ctx.store.servers.find(id(req, 'server')), 'server');
    await deleteServer(ctx, server.id);
    await audit(req, 'admin:server.delete', { type: 'server', id: server.id }, { name: server.name, uuid: server.uuid });
    return reply.code(204).send();
  });
}

type Body = Record<string, unknown>;

// Bodies a route reshapes before the service validates them are checked first (an object, and
// Pterodactyl's groups objects when sent), so `"str"`, `[]` or `limits: "x"` are 422s, not `{}`.
const OBJECT = { type: 'object' };
const objectBody = createShapeCheck();
const buildBody = createShapeCheck({ limits: OBJECT, feature_limits: OBJECT });
const serverBody = createShapeCheck({ limits: OBJECT, feature_limits: OBJECT, allocation: OBJECT });

/**
 * The request's names of the service fields a Pterodactyl body was flattened into (`owner_id` was
 * `user`, `memory` was `limits.memory` when sent nested), for validation errors.
 */
function pterodactylNames(body: unknown, allocation = 'allocation'): Record<string, string> {
  const b = (body ?? {}) as Body;
  const names: Record<string, string> = { owner_id: 'user', egg_id: 'egg', image: 'docker_image', allocation_id: allocation };
  for (const group of ['limits', 'feature_limits']) {
    const nested = b[group];
    if (typeof nested === 'object' && nested !== null) for (const k of Object.keys(nested)) names[k] = `${group}.${k}`;
  }
  return names;
}

/** Pterodactyl's `user` field is our `owner_id`. */
function renameUser(body: unknown): Body {
  const { user, ...rest } = objectBody(body);
  return user === undefined ? rest : { ...rest, owner_id: user };
}

/** `{allocation, limits: {...}, feature_limits: {...}}` (or already flat fields) to the flat build input. */
function fromPterodactylBuild(body: unknown): Body {
  const { allocation, limits, feature_limits, ...rest } = buildBody(body);
  return { ...rest, ...(limits as Body | undefined), ...(feature_limits as Body | undefined), ...(allocation !== undefined ? { allocation_id: allocation } : {}) };
}

/** Pterodactyl's create body (`user`, `egg`, `docker_image`, `limits`, `allocation.default`) to the flat service input. */
function fromPterodactylServer(body: unknown): Body {
  const { egg, docker_image, allocation, limits, feature_limits, ...rest } = renameUser(serverBody(body));
  const alloc = (allocation as Body | undefined)?.default;
  return {
    ...rest,
    ...(limits as Body | undefined),
    ...(feature_limits as Body | undefined),
    ...(egg !== undefined ? { egg_id: egg } : {}),
    ...(docker_image !== undefined ? { image: docker_image } : {}),
    ...(alloc !== undefined ? { allocation_id: alloc } : {}),
  };
}

/**
 * The application API (`/api/application`): root-admin management of users, locations, nodes and
 * their allocations, nests and eggs, and servers, with Pterodactyl's paths and shapes. Every
 * route needs an application key whose owner is a root admin.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { PanelContext } from '../context.ts';
import { createApiKey } from '../services/api-keys.ts';
import { createEgg, createNest, deleteEgg, deleteNest, eggAttributes, nestAttributes, updateEgg, updateNest } from '../services/catalog.ts';
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
import { createServer, deleteServer, serverAttributes, setSuspended, updateServerBuild, updateServerDetails } from '../services/servers.ts';
import { createUser, deleteUser, sendWelcomeMail, updateUser, userAttributes } from '../services/users.ts';
import type { Repository, Row } from '../store/repository.ts';
import { item, list } from './api-format.ts';
import { apiActor, idParam, pageQuery, requireApiKey } from './api-auth.ts';

type Params = Record<string, string | undefined>;

/** The read side of one resource: list with search, show by id. */
function readRoutes<T extends Row>(
  api: FastifyInstance,
  path: string,
  opts: { object: string; what: string; repo: Repository<T>; attributes: (r: T) => Record<string, unknown>; search: string[]; scope?: (p: Params) => Record<string, number> },
): void {
  api.get(path, async (req) => {
    const q = pageQuery(req.query);
    const page = await opts.repo.list({ page: q.page, perPage: q.perPage, filter: opts.scope?.(req.params as Params) ?? {}, search: { columns: opts.search, term: q.search } });
    return list(opts.object, page, opts.attributes);
  });
  api.get(`${path}/:id`, async (req) => {
    const p = req.params as Params;
    const row = found(await opts.repo.find(idParam(p.id, opts.what)), opts.what);
    const scope = opts.scope?.(p) ?? {};
    for (const [k, v] of Object.entries(scope)) if (row[k] !== v) found(undefined, opts.what);
    return item(opts.object, opts.attributes(row));
  });
}

/** Registers the routes on the /api/application scope; runs once at app build. */
export function registerApplicationApi(api: FastifyInstance, ctx: PanelContext): void {
  requireApiKey(api, ctx, 'application');
  const audit = (req: FastifyRequest, event: string, subject: { type: string; id: number }, properties: Record<string, unknown> = {}): Promise<void> =>
    ctx.activity.log({ event, actor: apiActor(req), subject, properties, ip: req.ip });
  const id = (req: FastifyRequest, what: string, key = 'id'): number => idParam((req.params as Params)[key], what);

  readRoutes(api, '/users', { object: 'user', what: 'user', repo: ctx.store.users, attributes: userAttributes, search: ['username', 'email'] });
  api.post('/users', async (req, reply) => {
    const u = await createUser(ctx, req.body);
    await audit(req, 'admin:user.create', { type: 'user', id: u.id });
    void sendWelcomeMail(ctx, u);
    return reply.code(201).send(item('user', userAttributes(u)));
  });
  api.patch('/users/:id', async (req) => item('user', userAttributes(await updateUser(ctx, id(req, 'user'), req.body))));
  api.delete('/users/:id', async (req, reply) => {
    await deleteUser(ctx, id(req, 'user'));
    return reply.code(204).send();
  });
  api.post('/users/:id/api-keys', async (req, reply) => {
    const { type, ...rest } = (req.body ?? {}) as { type?: string };
    const created = await createApiKey(ctx, id(req, 'user'), type === 'application' ? 'application' : 'client', rest);
    return reply.code(201).send({ ...item('api_key', { identifier: created.key.identifier, key_type: created.key.key_type }), meta: { secret_token: created.token } });
  });

  readRoutes(api, '/locations', { object: 'location', what: 'location', repo: ctx.store.locations, attributes: locationAttributes, search: ['short', 'long'] });
  api.post('/locations', async (req, reply) => reply.code(201).send(item('location', locationAttributes(await createLocation(ctx, req.body)))));
  api.patch('/locations/:id', async (req) => item('location', locationAttributes(await updateLocation(ctx, id(req, 'location'), req.body))));
  api.delete('/locations/:id', async (req, reply) => {
    await deleteLocation(ctx, id(req, 'location'));
    return reply.code(204).send();
  });

  readRoutes(api, '/nodes', { object: 'node', what: 'node', repo: ctx.store.nodes, attributes: nodeAttributes, search: ['name', 'fqdn'] });
  api.post('/nodes', async (req, reply) => {
    const { node, token } = await createNode(ctx, req.body);
    await audit(req, 'admin:node.create', { type: 'node', id: node.id });
    return reply.code(201).send({ ...item('node', nodeAttributes(node)), meta: { pairing_token: token } });
  });
  api.patch('/nodes/:id', async (req) => item('node', nodeAttributes(await updateNode(ctx, id(req, 'node'), req.body))));
  api.delete('/nodes/:id', async (req, reply) => {
    await deleteNode(ctx, id(req, 'node'));
    return reply.code(204).send();
  });
  const nodeScope = (p: Params): Record<string, number> => ({ node_id: idParam(p.node, 'node') });
  readRoutes(api, '/nodes/:node/allocations', { object: 'allocation', what: 'allocation', repo: ctx.store.allocations, attributes: allocationAttributes, search: ['ip', 'ip_alias'], scope: nodeScope });
  api.post('/nodes/:node/allocations', async (req, reply) => {
    const added = await createAllocations(ctx, id(req, 'node', 'node'), req.body);
    return reply.code(201).send({ object: 'list', data: added.map((a) => item('allocation', allocationAttributes(a))) });
  });
  api.delete('/nodes/:node/allocations/:id', async (req, reply) => {
    await deleteAllocation(ctx, id(req, 'node', 'node'), id(req, 'allocation'));
    return reply.code(204).send();
  });

  readRoutes(api, '/nests', { object: 'nest', what: 'nest', repo: ctx.store.nests, attributes: nestAttributes, search: ['name'] });
  api.post('/nests', async (req, reply) => reply.code(201).send(item('nest', nestAttributes(await createNest(ctx, req.body)))));
  api.patch('/nests/:id', async (req) => item('nest', nestAttributes(await updateNest(ctx, id(req, 'nest'), req.body))));
  api.delete('/nests/:id', async (req, reply) => {
    await deleteNest(ctx, id(req, 'nest'));
    return reply.code(204).send();
  });
  const nestScope = (p: Params): Record<string, number> => ({ nest_id: idParam(p.nest, 'nest') });
  readRoutes(api, '/nests/:nest/eggs', { object: 'egg', what: 'egg', repo: ctx.store.eggs, attributes: eggAttributes, search: ['name'], scope: nestScope });
  api.post('/nests/:nest/eggs', async (req, reply) => {
    const egg = await createEgg(ctx, { ...(req.body as object), nest_id: id(req, 'nest', 'nest') });
    return reply.code(201).send(item('egg', eggAttributes(egg)));
  });
  api.patch('/nests/:nest/eggs/:id', async (req) => item('egg', eggAttributes(await updateEgg(ctx, id(req, 'egg'), { ...(req.body as object), nest_id: id(req, 'nest', 'nest') }))));
  api.delete('/nests/:nest/eggs/:id', async (req, reply) => {
    await deleteEgg(ctx, id(req, 'egg'));
    return reply.code(204).send();
  });

  readRoutes(api, '/servers', { object: 'server', what: 'server', repo: ctx.store.servers, attributes: serverAttributes, search: ['name', 'uuid', 'identifier'] });
  api.post('/servers', async (req, reply) => {
    const s = await createServer(ctx, fromPterodactylServer(req.body));
    await audit(req, 'admin:server.create', { type: 'server', id: s.id });
    return reply.code(201).send(item('server', serverAttributes(s)));
  });
  api.patch('/servers/:id/details', async (req) => item('server', serverAttributes(await updateServerDetails(ctx, id(req, 'server'), renameUser(req.body)))));
  api.patch('/servers/:id/build', async (req) => item('server', serverAttributes(await updateServerBuild(ctx, id(req, 'server'), fromPterodactylBuild(req.body)))));
  for (const [action, suspended] of [['suspend', true], ['unsuspend', false]] as const) {
    api.post(`/servers/:id/${action}`, async (req, reply) => {
      await setSuspended(ctx, id(req, 'server'), suspended, apiActor(req), req.ip);
      return reply.code(204).send();
    });
  }
  api.delete('/servers/:id', async (req, reply) => {
    const serverId = id(req, 'server');
    await deleteServer(ctx, serverId);
    await audit(req, 'admin:server.delete', { type: 'server', id: serverId });
    return reply.code(204).send();
  });
}

type Body = Record<string, unknown>;

/** Pterodactyl's `user` field is our `owner_id`. */
function renameUser(body: unknown): Body {
  const { user, ...rest } = (body ?? {}) as Body;
  return user === undefined ? rest : { ...rest, owner_id: user };
}

/** `{allocation, limits: {...}, feature_limits: {...}}` (or already flat fields) to the flat build input. */
function fromPterodactylBuild(body: unknown): Body {
  const { allocation, limits, feature_limits, ...rest } = (body ?? {}) as Body;
  return { ...rest, ...(limits as Body | undefined), ...(feature_limits as Body | undefined), ...(allocation !== undefined ? { allocation_id: allocation } : {}) };
}

/** Pterodactyl's create body (`user`, `egg`, `docker_image`, `limits`, `allocation.default`) to the flat service input. */
function fromPterodactylServer(body: unknown): Body {
  const { egg, docker_image, allocation, limits, feature_limits, ...rest } = renameUser(body);
  const alloc = typeof allocation === 'object' && allocation !== null ? (allocation as Body).default : allocation;
  return {
    ...rest,
    ...(limits as Body | undefined),
    ...(feature_limits as Body | undefined),
    ...(egg !== undefined ? { egg_id: egg } : {}),
    ...(docker_image !== undefined ? { image: docker_image } : {}),
    ...(alloc !== undefined ? { allocation_id: alloc } : {}),
  };
}

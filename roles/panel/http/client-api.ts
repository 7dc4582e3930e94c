/**
 * The client API (`/api/client`): what a user does with their own account and the servers they
 * own or are a subuser of, with Pterodactyl's paths and shapes: the server list, account and API
 * keys, server details and rename, subusers, and the file manager on the server's volume. A server
 * the key's user cannot access answers 404, exactly like one that does not exist; a suspended
 * server answers 409 to every server route but its view.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../../../src/core/app-error.ts';
import { MIB } from '../../../src/lib/units.ts';
import type { RunningAddon } from '../addons/addon.ts';
import type { FileCall, FilePathUse, PanelContext } from '../context.ts';
import { activityAttributes } from '../services/activity.ts';
import { apiKeyAttributes, createApiKey } from '../services/api-keys.ts';
import { found } from '../services/records.ts';
import {
  accessibleServers,
  accessServer,
  addSubuser,
  requireActiveServer,
  requirePermission,
  subuserAttributes,
  subuserOf,
  updateSubuser,
  type ServerAccess,
} from '../services/server-access.ts';
import { clientServerAttributes, updateServerDetails } from '../services/servers.ts';
import { userAttributes } from '../services/users.ts';
import { createShapeCheck, createValidator, inRequestTerms, NAME, TEXT } from '../services/validation.ts';
import type { ServerRow } from '../store/records.ts';
import { createVolumeFiles, splitVolumePath } from '../volume-files.ts';
import { item, list, plainList } from './api-format.ts';
import { apiActor, apiUser, pageQuery, requireApiKey } from './api-auth.ts';

type Params = Record<string, string | undefined>;

/** Largest request body of the panel: the file editor reads and writes files up to this size. */
export const BODY_LIMIT = 10 * MIB;

const validateRename = createValidator<{ name: string; description?: string }>({ required: ['name'], properties: { name: NAME, description: TEXT } });
const PATH = { type: 'string', maxLength: 4096 };
const validateRenameFiles = createValidator<{ root?: string; files: { from: string; to: string }[] }>({
  required: ['files'],
  properties: { root: PATH, files: { type: 'array', minItems: 1, maxItems: 1000, items: { type: 'object', required: ['from', 'to'], additionalProperties: false, properties: { from: PATH, to: PATH } } } },
});
const validateFolder = createValidator<{ root?: string; name: string }>({ required: ['name'], properties: { root: PATH, name: { type: 'string', minLength: 1, maxLength: 255 } } });
// The key route picks its fields out of the body, so a string or an array must be refused first.
const objectBody = createShapeCheck();
// Up to the trash bin's largest max_files_per_delete (spec/2 §2.3); its setting caps it lower.
const validateDelete = createValidator<{ root?: string; files: string[] }>({
  required: ['files'],
  properties: { root: PATH, files: { type: 'array', minItems: 1, maxItems: 10_000, items: PATH } },
});

/**
 * What an addon's client API routes get from the core: the same server access checks as the core
 * routes (404 without access, 409 while suspended, 403 without the permissions), and the caller
 * as a FileCall (access, actor, address).
 */
export interface ClientApiKit {
  access(req: FastifyRequest, ...permissions: string[]): Promise<ServerAccess>;
  call(req: FastifyRequest, access: ServerAccess): FileCall;
}

/** A client path joined to its root, volume-relative and normalised (`a/b`; the root is ''). */
export function volumePath(root: string, name: string): string {
  return splitVolumePath(`${root}/${name}`).join('/');
}

/** A query parameter that must be present (`?file=`), else 422 naming it. */
function queryParam(req: FastifyRequest, name: string, fallback?: string): string {
  const v = (req.query as Record<string, unknown>)[name];
  if (typeof v === 'string' && v !== '') return v;
  if (fallback !== undefined) return fallback;
  throw new AppError('ERR_VALIDATION', `the ${name} query parameter is required`, { status: 422, cause: { field: name } });
}

/** Registers the routes on the /api/client scope (the addons' too); runs once at app build. */
export function registerClientApi(api: FastifyInstance, ctx: PanelContext, addons: readonly RunningAddon[] = []): void {
  requireApiKey(api, ctx, 'client');
  const files = createVolumeFiles({ volumesDir: ctx.config.volumes_dir });
  const view = (req: FastifyRequest): Promise<ServerAccess> => accessServer(ctx, apiUser(req), (req.params as Params).server ?? '');
  // Every server route but the view: 404 without access, 409 while suspended, then 403 without the permissions.
  const access = async (req: FastifyRequest, ...permissions: string[]): Promise<ServerAccess> => {
    const a = await view(req);
    requireActiveServer(a.server);
    requirePermission(a, ...permissions);
    return a;
  };
  const log = (req: FastifyRequest, event: string, server: ServerRow, properties: Record<string, unknown> = {}): Promise<void> =>
    ctx.activity.log({ event, actor: apiActor(req), subject: { type: 'server', id: server.id }, properties, ip: req.ip });
  const nodeName = async (s: ServerRow): Promise<string> => (await ctx.store.nodes.find(s.node_id))?.name ?? '';
  const call = (req: FastifyRequest, a: ServerAccess): FileCall => ({ access: a, actor: apiActor(req), ip: req.ip });
  // Every file route hands the paths it reads or changes to the addons' guards before anything
  // touches them, resolved as the volume walk resolves them (in-volume symlinks followed; the final
  // one only when the route follows it: list, contents, write), so a link such as `t -> .trash`
  // is judged as the trash folder it leads to. Resolves to the call and the resolved paths.
  const guard = async (req: FastifyRequest, a: ServerAccess, use: FilePathUse, paths: readonly string[], followFinal: boolean): Promise<{ c: FileCall; resolved: string[] }> => {
    const c = call(req, a);
    const resolved = await files.resolve(a.server.uuid, paths, followFinal);
    for (const hook of ctx.hooks.filePaths ?? []) await hook(c, resolved, use);
    return { c, resolved };
  };

  // Paged as Pterodactyl pages it (`page`, `per_page`, meta.pagination): a client walking a
  // reseller's hundreds of servers stops at the last page instead of getting them all at once.
  api.get('/', async (req) => {
    const user = apiUser(req);
    const q = pageQuery(req.query);
    const perPage = Math.max(1, q.perPage);
    const servers = await accessibleServers(ctx, user);
    const slice = servers.slice((q.page - 1) * perPage, q.page * perPage);
    const items = await Promise.all(slice.map(async (s) => ({ s, node: await nodeName(s) })));
    return list('server', { items, total: servers.length, page: q.page, perPage }, ({ s, node }) => clientServerAttributes(s, { isOwner: s.owner_id === user.id, node }));
  });
  api.get('/permissions', () => ({ object: 'system_permissions', attributes: { permissions: [...ctx.permissions].sort() } }));
  api.get('/account', (req) => item('user', userAttributes(apiUser(req))));
  api.get('/account/api-keys', async (req) => plainList('api_key', await ctx.store.apiKeys.all({ user_id: apiUser(req).id, key_type: 'client' }), apiKeyAttributes));
  api.post('/account/api-keys', async (req, reply) => {
    const { description, allowed_ips } = objectBody(req.body) as { description?: unknown; allowed_ips?: unknown };
    const created = await inRequestTerms({ memo: 'description' }, () => createApiKey(ctx, apiUser(req).id, 'client', { ...(description !== undefined ? { memo: description } : {}), ...(allowed_ips !== undefined ? { allowed_ips } : {}) }));
    return reply.code(201).send({ ...item('api_key', apiKeyAttributes(created.key)), meta: { secret_token: created.token } });
  });
  api.delete('/account/api-keys/:identifier', async (req, reply) => {
    const key = found(await ctx.store.apiKeys.findBy({ identifier: (req.params as Params).identifier ?? '', user_id: apiUser(req).id, key_type: 'client' }), 'API key');
    await ctx.store.apiKeys.remove(key.id);
    return reply.code(204).send();
  });

  api.get('/servers/:server', async (req) => {
    const a = await view(req);
    return item('server', clientServerAttributes(a.server, { isOwner: a.isOwner, node: await nodeName(a.server) }));
  });
  api.post('/servers/:server/settings/rename', async (req, reply) => {
    const a = await access(req, 'settings.rename');
    const v = validateRename(req.body);
    await updateServerDetails(ctx, a.server.id, v);
    await log(req, 'server:settings.rename', a.server, { old: a.server.name, new: v.name });
    return reply.code(204).send();
  });
  api.get('/servers/:server/activity', async (req) => {
    const a = await access(req, 'activity.read');
    const q = pageQuery(req.query);
    return list('activity_log', await ctx.store.activity.list({ filter: { subject_type: 'server', subject_id: a.server.id }, sort: '-id', page: q.page, perPage: q.perPage }), (row) => activityAttributes(row, apiUser(req)));
  });

  api.get('/servers/:server/users', async (req) => {
    const a = await access(req, 'user.read');
    const subs = await ctx.store.subusers.all({ server_id: a.server.id });
    const rows = await Promise.all(subs.map(async (sub) => ({ sub, user: found(await ctx.store.users.find(sub.user_id), 'user') })));
    return plainList('server_subuser', rows, ({ sub, user }) => subuserAttributes(sub, user));
  });
  api.post('/servers/:server/users', async (req) => {
    const a = await access(req, 'user.create');
    const sub = await addSubuser(ctx, a, req.body);
    const user = found(await ctx.store.users.find(sub.user_id), 'user');
    await log(req, 'server:subuser.create', a.server, { email: user.email, permissions: JSON.parse(sub.permissions) as unknown });
    return item('server_subuser', subuserAttributes(sub, user));
  });
  api.get('/servers/:server/users/:user', async (req) => {
    const a = await access(req, 'user.read');
    const { sub, user } = await subuserOf(ctx, a.server, (req.params as Params).user ?? '');
    return item('server_subuser', subuserAttributes(sub, user));
  });
  api.post('/servers/:server/users/:user', async (req) => {
    const a = await access(req, 'user.update');
    const { sub, user } = await subuserOf(ctx, a.server, (req.params as Params).user ?? '');
    if (user.id === apiUser(req).id) throw new AppError('ERR_FORBIDDEN', 'you cannot change your own permissions', { status: 403 });
    const updated = await updateSubuser(ctx, a, sub, req.body);
    await log(req, 'server:subuser.update', a.server, { email: user.email, permissions: JSON.parse(updated.permissions) as unknown });
    return item('server_subuser', subuserAttributes(updated, user));
  });
  api.delete('/servers/:server/users/:user', async (req, reply) => {
    const a = await access(req, 'user.delete');
    const { sub, user } = await subuserOf(ctx, a.server, (req.params as Params).user ?? '');
    await ctx.store.subusers.remove(sub.id);
    await log(req, 'server:subuser.delete', a.server, { email: user.email });
    return reply.code(204).send();
  });

  api.get('/servers/:server/files/list', async (req) => {
    const a = await access(req, 'file.read');
    const directory = queryParam(req, 'directory', '/');
    const { c, resolved } = await guard(req, a, 'read', [volumePath('/', directory)], true);
    for (const hook of ctx.hooks.fileList ?? []) {
      const entries = await hook(c, resolved[0] ?? '');
      if (entries !== undefined) return { object: 'list', data: entries };
    }
    return { object: 'list', data: await files.list(a.server.uuid, directory) };
  });
  api.get('/servers/:server/files/contents', async (req, reply) => {
    const a = await access(req, 'file.read-content');
    const file = queryParam(req, 'file');
    await guard(req, a, 'read', [volumePath('/', file)], true);
    const data = await files.contents(a.server.uuid, file, BODY_LIMIT);
    await log(req, 'server:file.read', a.server, { file });
    return reply.type('text/plain; charset=utf-8').send(data);
  });
  api.put('/servers/:server/files/rename', async (req, reply) => {
    const a = await access(req, 'file.update');
    const v = validateRenameFiles(req.body);
    await guard(req, a, 'change', v.files.flatMap((f) => [volumePath(v.root ?? '/', f.from), volumePath(v.root ?? '/', f.to)]), false);
    await files.rename(a.server.uuid, v.root ?? '/', v.files);
    await log(req, 'server:file.rename', a.server, { directory: v.root ?? '/', files: v.files });
    return reply.code(204).send();
  });
  api.post('/servers/:server/files/create-folder', async (req, reply) => {
    const a = await access(req, 'file.create');
    const v = validateFolder(req.body);
    await guard(req, a, 'change', [volumePath(v.root ?? '/', v.name)], false);
    await files.createFolder(a.server.uuid, v.root ?? '/', v.name);
    await log(req, 'server:file.create-directory', a.server, { directory: v.root ?? '/', name: v.name });
    return reply.code(204).send();
  });
  api.post('/servers/:server/files/delete', async (req, reply) => {
    const a = await access(req, 'file.delete');
    const v = validateDelete(req.body);
    const { c, resolved } = await guard(req, a, 'delete', v.files.map((f) => volumePath(v.root ?? '/', f)), false);
    for (const hook of ctx.hooks.fileDelete ?? []) {
      if (await hook(c, { root: v.root ?? '/', files: v.files, paths: resolved }, req.body as Record<string, unknown>)) return reply.code(204).send();
    }
    await files.delete(a.server.uuid, v.root ?? '/', v.files);
    await log(req, 'server:file.delete', a.server, { directory: v.root ?? '/', files: v.files });
    return reply.code(204).send();
  });
  // The editor posts the raw file, whatever content type it claims.
  void api.register(async (raw) => {
    raw.removeAllContentTypeParsers();
    raw.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
    raw.post('/servers/:server/files/write', async (req, reply) => {
      const a = await access(req, 'file.update');
      const file = queryParam(req, 'file');
      const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      await guard(req, a, 'change', [volumePath('/', file)], true);
      await files.write(a.server.uuid, file, body);
      await log(req, 'server:file.write', a.server, { file, bytes: body.length });
      return reply.code(204).send();
    });
  });

  const kit: ClientApiKit = { access, call };
  for (const addon of addons) addon.clientRoutes?.(api, kit);
}

/**
 * Servers: creation on a node's free allocation from an egg, updates of details and build limits,
 * suspension (a service the addons hook), deletion, and the client/application attributes. The
 * 8-character identifier is the first block of the UUID, as in Pterodactyl; the rare clash is
 * retried with a new UUID.
 */
import { randomUUID } from 'node:crypto';
import { isAppError } from '../../../src/core/app-error.ts';
import type { PanelContext } from '../context.ts';
import type { ServerRow } from '../store/records.ts';
import { created, found, now, takenProblems } from './records.ts';
import { COUNT, createValidator, EXTERNAL_ID, ID, NAME, TEXT, problemsOf, validationError, type FieldProblem } from './validation.ts';

const limitProps = {
  memory: COUNT,
  swap: { type: 'integer', minimum: -1 },
  disk: COUNT,
  io: { type: 'integer', minimum: 10, maximum: 1000 },
  cpu: COUNT,
  threads: { type: ['string', 'null'], maxLength: 191, pattern: '^[0-9,-]*$', description: 'must list CPU cores like 0-1,3' },
  databases: COUNT,
  allocations: COUNT,
  backups: COUNT,
};
/** One line of text: NUL and the other control characters (C0, DEL, C1) are refused on every create and rename path. */
const SERVER_NAME = { ...NAME, pattern: '^\\P{Cc}*$', description: 'must not contain control characters' };
const serverProps = { name: SERVER_NAME, description: TEXT, owner_id: ID, allocation_id: ID, egg_id: ID, external_id: EXTERNAL_ID, image: { type: 'string', maxLength: 255 }, startup: { type: 'string', maxLength: 4000 }, ...limitProps };

export type ServerInput = {
  name: string;
  owner_id: number;
  allocation_id: number;
  egg_id: number;
  description?: string;
  external_id?: string | null;
  image?: string;
  startup?: string;
} & { [K in keyof typeof limitProps]?: K extends 'threads' ? string | null : number };

const validateCreate = createValidator<ServerInput>({ required: ['name', 'owner_id', 'allocation_id', 'egg_id'], properties: serverProps });
const validateDetails = createValidator<Partial<ServerInput>>({ properties: { name: SERVER_NAME, description: TEXT, owner_id: ID, external_id: EXTERNAL_ID } });
const validateBuild = createValidator<Partial<ServerInput>>({ properties: { allocation_id: ID, ...limitProps } });

/**
 * The core's validation of a create request plus every addon's `serverInput` check, before
 * anything is written: returns the core's (defaulted) input, or throws one ERR_VALIDATION naming
 * every bad field of both.
 */
async function validateWithAddons<T>(ctx: PanelContext, input: unknown, validate: (input: unknown) => T): Promise<T> {
  const problems: FieldProblem[] = [];
  let v: T | undefined;
  try {
    v = validate(input);
  } catch (err) {
    if (!isAppError(err, 'ERR_VALIDATION')) throw err;
    problems.push(...problemsOf(err));
  }
  const raw = (typeof input === 'object' && input !== null && !Array.isArray(input) ? input : {}) as Record<string, unknown>;
  for (const check of ctx.hooks.serverInput ?? []) problems.push(...(await check(raw)));
  if (problems.length > 0 || v === undefined) throw validationError(problems);
  return v;
}

/**
 * Creates a server on the node of its allocation; fails with ERR_VALIDATION (nothing written) when
 * the input or an addon's fields are invalid, or when the allocation or the external_id is taken.
 */
export async function createServer(ctx: PanelContext, input: unknown): Promise<ServerRow> {
  const v = await validateWithAddons(ctx, input, validateCreate);
  // What the request names but does not exist is its fault, a 422 naming each field (Laravel's
  // `exists` rule, as Pterodactyl answers), not a 404 of the route.
  const [owner, egg, allocation] = [await ctx.store.users.find(v.owner_id), await ctx.store.eggs.find(v.egg_id), await ctx.store.allocations.find(v.allocation_id)];
  const problems = await takenProblems(ctx.store.servers, 'external_id', v.external_id);
  if (owner === undefined) problems.push({ field: 'owner_id', rule: 'exists', detail: 'the owner_id field must name an existing user' });
  if (egg === undefined) problems.push({ field: 'egg_id', rule: 'exists', detail: 'the egg_id field must name an existing egg' });
  if (allocation === undefined) problems.push({ field: 'allocation_id', rule: 'exists', detail: 'the allocation_id field must name an existing allocation' });
  if (owner === undefined || egg === undefined || allocation === undefined || problems.length > 0) throw validationError(problems);
  for (let attempt = 0; ; attempt++) {
    const uuid = randomUUID();
    let server: ServerRow;
    try {
      server = await ctx.store.createServer({
        uuid,
        external_id: v.external_id ?? null,
        identifier: uuid.slice(0, 8),
        name: v.name,
        description: v.description ?? '',
        owner_id: v.owner_id,
        node_id: allocation.node_id,
        allocation_id: allocation.id,
        nest_id: egg.nest_id,
        egg_id: egg.id,
        memory: v.memory ?? 0,
        swap: v.swap ?? 0,
        disk: v.disk ?? 0,
        io: v.io ?? 500,
        cpu: v.cpu ?? 0,
        threads: v.threads ?? null,
        oom_disabled: 1,
        databases: v.databases ?? 0,
        allocations: v.allocations ?? 0,
        backups: v.backups ?? 0,
        image: v.image !== undefined && v.image !== '' ? v.image : egg.docker_image,
        startup: v.startup !== undefined && v.startup !== '' ? v.startup : egg.startup,
        suspended: 0,
        ...created(),
      });
    } catch (err) {
      const field = (isAppError(err, 'ERR_VALIDATION') ? (err.cause as { field?: string } | undefined)?.field : undefined) ?? '';
      if (attempt < 3 && (field === 'identifier' || field === 'uuid')) continue;
      throw err;
    }
    await runHooks(ctx, 'serverCreated', server, (hook) => hook(server, (input ?? {}) as Record<string, unknown>));
    return server;
  }
}

/** Runs an addon hook list; a failing hook is logged and never undoes the core change. */
async function runHooks<K extends 'serverSuspension' | 'serverCreated' | 'serverDeleted'>(ctx: PanelContext, name: K, server: ServerRow, run: (hook: PanelContext['hooks'][K][number]) => Promise<void> | void): Promise<void> {
  for (const hook of ctx.hooks[name]) {
    try {
      await run(hook);
    } catch (err) {
      ctx.logger.error({ err, server: server.uuid, hook: name }, 'a %s hook failed; the change stands', name);
    }
  }
}

/**
 * Name, description, owner and external_id (another server's is a 422); a new owner who was a
 * subuser of the server is one no longer.
 */
export async function updateServerDetails(ctx: PanelContext, id: number, input: unknown): Promise<ServerRow> {
  const v = validateDetails(input);
  found(await ctx.store.servers.find(id), 'server');
  const taken = await takenProblems(ctx.store.servers, 'external_id', v.external_id, id);
  if (taken.length > 0) throw validationError(taken);
  if (v.owner_id !== undefined) found(await ctx.store.users.find(v.owner_id), 'user');
  const server = found(await ctx.store.servers.update(id, { ...v, updated_at: now() } as Partial<ServerRow>), 'server');
  if (v.owner_id !== undefined) await ctx.store.subusers.removeWhere({ server_id: id, user_id: v.owner_id });
  return server;
}

/**
 * Build limits, and the primary allocation (which must be free or already this server's, on its
 * node). A server holds its primary allocation only, so the one it moves off is released: kept, it
 * could neither be given to another server nor deleted.
 */
export async function updateServerBuild(ctx: PanelContext, id: number, input: unknown): Promise<ServerRow> {
  const v = validateBuild(input);
  const server = found(await ctx.store.servers.find(id), 'server');
  if (v.allocation_id !== undefined && v.allocation_id !== server.allocation_id) {
    const a = found(await ctx.store.allocations.find(v.allocation_id), 'allocation');
    if (a.node_id !== server.node_id || (a.server_id !== null && a.server_id !== id)) {
      throw validationError([{ field: 'allocation_id', rule: 'available', detail: 'the allocation is not free on this server\'s node' }]);
    }
    await ctx.store.allocations.update(a.id, { server_id: id });
    if (server.allocation_id !== null) await ctx.store.allocations.update(server.allocation_id, { server_id: null });
  }
  return found(await ctx.store.servers.update(id, { ...v, updated_at: now() } as Partial<ServerRow>), 'server');
}

/**
 * Suspends or unsuspends; then runs the addons' hooks (a failing hook is logged and the change
 * stands) and writes `server:suspended` / `server:unsuspended` to the activity log.
 */
export async function setSuspended(ctx: PanelContext, id: number, suspended: boolean, actor?: { type: string; id: number }, ip?: string, properties?: Record<string, unknown>): Promise<ServerRow> {
  found(await ctx.store.servers.find(id), 'server');
  const server = found(await ctx.store.servers.update(id, { suspended: suspended ? 1 : 0, updated_at: now() }), 'server');
  await runHooks(ctx, 'serverSuspension', server, (hook) => hook(server, suspended));
  await ctx.activity.log({ event: suspended ? 'server:suspended' : 'server:unsuspended', actor, subject: { type: 'server', id }, ip, ...(properties !== undefined ? { properties } : {}) });
  return server;
}

/** Deletes the server record; its allocations are released and its subusers removed. */
export async function deleteServer(ctx: PanelContext, id: number): Promise<void> {
  const server = found(await ctx.store.servers.find(id), 'server');
  await ctx.store.servers.remove(id);
  await runHooks(ctx, 'serverDeleted', server, (hook) => hook(server));
}

/** The limits object shared by both APIs. */
function limits(s: ServerRow): Record<string, unknown> {
  return { memory: s.memory, swap: s.swap, disk: s.disk, io: s.io, cpu: s.cpu, threads: s.threads, oom_disabled: s.oom_disabled === 1 };
}

/** Application API attributes (ids of related records). */
export function serverAttributes(s: ServerRow): Record<string, unknown> {
  return {
    id: s.id,
    external_id: s.external_id ?? null,
    uuid: s.uuid,
    identifier: s.identifier,
    name: s.name,
    description: s.description,
    suspended: s.suspended === 1,
    limits: limits(s),
    feature_limits: { databases: s.databases, allocations: s.allocations, backups: s.backups },
    user: s.owner_id,
    node: s.node_id,
    allocation: s.allocation_id,
    nest: s.nest_id,
    egg: s.egg_id,
    container: { startup_command: s.startup, image: s.image },
    created_at: s.created_at,
    updated_at: s.updated_at,
  };
}

/** Client API attributes: what the owner or a subuser sees. */
export function clientServerAttributes(s: ServerRow, ctx: { isOwner: boolean; node: string }): Record<string, unknown> {
  return {
    server_owner: ctx.isOwner,
    identifier: s.identifier,
    uuid: s.uuid,
    name: s.name,
    node: ctx.node,
    description: s.description,
    limits: limits(s),
    feature_limits: { databases: s.databases, allocations: s.allocations, backups: s.backups },
    invocation: s.startup,
    docker_image: s.image,
    is_suspended: s.suspended === 1,
  };
}

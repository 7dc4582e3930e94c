/**
 * Nests and eggs: the catalogue of what a server runs (an egg names the Docker image and the
 * startup command; a server copies both at creation and may override them).
 */
import { randomUUID } from 'node:crypto';
import { AppError } from '../../../src/core/app-error.ts';
import type { PanelContext } from '../context.ts';
import type { EggRow, NestRow } from '../store/records.ts';
import { created, found, now } from './records.ts';
import { createValidator, ID, NAME, TEXT } from './validation.ts';

const AUTHOR = { type: 'string', maxLength: 191 };
const nestProps = { name: NAME, description: TEXT, author: AUTHOR };
const validateNest = createValidator<{ name: string; description?: string; author?: string }>({ required: ['name'], properties: nestProps });
const validateNestUpdate = createValidator<{ name?: string; description?: string; author?: string }>({ properties: nestProps });

export async function createNest(ctx: PanelContext, input: unknown): Promise<NestRow> {
  return ctx.store.nests.insert({ ...validateNest(input), uuid: randomUUID(), ...created() });
}

export async function updateNest(ctx: PanelContext, id: number, input: unknown): Promise<NestRow> {
  found(await ctx.store.nests.find(id), 'nest');
  return found(await ctx.store.nests.update(id, { ...validateNestUpdate(input), updated_at: now() }), 'nest');
}

/**
 * Deletes a nest and its eggs; refused (409) while a server records the nest or runs one of its
 * eggs (an egg moved between nests by an older version leaves the two apart).
 */
export async function deleteNest(ctx: PanelContext, id: number): Promise<void> {
  found(await ctx.store.nests.find(id), 'nest');
  const holders = [{ nest_id: id }, ...(await ctx.store.eggs.all({ nest_id: id })).map((e) => ({ egg_id: e.id }))];
  for (const filter of holders) {
    if ((await ctx.store.servers.findBy(filter)) !== undefined) throw new AppError('ERR_NEST_IN_USE', 'cannot delete a nest that still has servers', { status: 409 });
  }
  await ctx.store.eggs.removeWhere({ nest_id: id });
  await ctx.store.nests.remove(id);
}

export function nestAttributes(n: NestRow): Record<string, unknown> {
  return { id: n.id, uuid: n.uuid, author: n.author, name: n.name, description: n.description, created_at: n.created_at, updated_at: n.updated_at };
}

const IMAGE = { type: 'string', minLength: 1, maxLength: 255, pattern: '^[a-zA-Z0-9./:@_-]+$', description: 'must be a Docker image reference' };
// An egg stays in the nest it was created in: its servers record that nest too.
const eggProps = { name: NAME, description: TEXT, author: AUTHOR, docker_image: IMAGE, startup: { type: 'string', minLength: 1, maxLength: 4000 } };
type EggFields = { name: string; docker_image: string; startup: string; description?: string; author?: string };
const validateEgg = createValidator<EggFields & { nest_id: number }>({ required: ['nest_id', 'name', 'docker_image', 'startup'], properties: { nest_id: ID, ...eggProps } });
const validateEggUpdate = createValidator<Partial<EggFields>>({ properties: eggProps });

export async function createEgg(ctx: PanelContext, input: unknown): Promise<EggRow> {
  const v = validateEgg(input);
  found(await ctx.store.nests.find(v.nest_id), 'nest');
  return ctx.store.eggs.insert({ ...v, uuid: randomUUID(), ...created() });
}

export async function updateEgg(ctx: PanelContext, id: number, input: unknown): Promise<EggRow> {
  const v = validateEggUpdate(input);
  found(await ctx.store.eggs.find(id), 'egg');
  return found(await ctx.store.eggs.update(id, { ...v, updated_at: now() }), 'egg');
}

/** The egg `id` of nest `nestId` (the API's `/nests/{nest}/eggs/{id}`); ERR_NOT_FOUND when it is missing or in another nest. */
export async function nestEgg(ctx: PanelContext, nestId: number, id: number): Promise<EggRow> {
  const egg = await ctx.store.eggs.find(id);
  return found(egg?.nest_id === nestId ? egg : undefined, 'egg');
}

export async function deleteEgg(ctx: PanelContext, id: number): Promise<void> {
  found(await ctx.store.eggs.find(id), 'egg');
  if ((await ctx.store.servers.findBy({ egg_id: id })) !== undefined) throw new AppError('ERR_EGG_IN_USE', 'cannot delete an egg that servers use', { status: 409 });
  await ctx.store.eggs.remove(id);
}

export function eggAttributes(e: EggRow): Record<string, unknown> {
  return {
    id: e.id,
    uuid: e.uuid,
    nest: e.nest_id,
    author: e.author,
    name: e.name,
    description: e.description,
    docker_image: e.docker_image,
    startup: e.startup,
    created_at: e.created_at,
    updated_at: e.updated_at,
  };
}

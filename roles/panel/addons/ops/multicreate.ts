/**
 * Multi-create (spec/2 §4.3): up to 50 servers in one call, each entry created through the panel's
 * own server service (its validation, the addons' checks and hooks), so an entry fails alone and
 * the batch goes on. An entry without a name is named by the naming pattern ({index} = its
 * position, {server_id} = the id it is about to get); one without an allocation takes the lowest
 * free port of its node. `ops_tag_ids` are checked before and synced after creation.
 */
import { AppError } from '../../../../src/core/app-error.ts';
import type { PanelContext } from '../../context.ts';
import { createServer } from '../../services/servers.ts';
import { createValidator, ID } from '../../services/validation.ts';
import type { OpsService, Who } from './service.ts';

/** Most servers one multi-create call may create (spec/2 §8). */
export const MAX_MULTICREATE = 50;

// Only the array is checked here: an entry that is not an object fails alone, in `results`.
const validateBatch = createValidator<{ servers: unknown[] }>({
  required: ['servers'],
  properties: { servers: { type: 'array', minItems: 1, maxItems: MAX_MULTICREATE } },
});
const validateEntry = createValidator<{ node_id: number; nest_id?: number; allocation_id?: number; environment?: Record<string, string> }>({
  required: ['node_id'],
  properties: { node_id: ID, nest_id: ID, allocation_id: ID, environment: { type: 'object', additionalProperties: { type: 'string', maxLength: 4000 }, maxProperties: 200 } },
});

export type MultiCreateResult = { success: true; name: string; id: number } | { success: false; name: string; error: string };

/** Creates every entry in order; returns the per-entry results and the summary. */
export async function multiCreate(ctx: PanelContext, service: OpsService, input: unknown, who: Who): Promise<{ results: MultiCreateResult[]; summary: { total: number; success: number; failed: number } }> {
  const { servers } = validateBatch(input);
  const results: MultiCreateResult[] = [];
  const claimed = new Set<number>();
  for (const [i, item] of servers.entries()) {
    const entry = (typeof item === 'object' && item !== null && !Array.isArray(item) ? item : {}) as Record<string, unknown>;
    // Named before any check, so a failed entry reports the name it would have had: its own, or
    // the pattern's from whatever numbers it carries (the next id, as it did not get one).
    const given = typeof entry.name === 'string' ? entry.name.trim() : '';
    const n = (k: string): number | undefined => (typeof entry[k] === 'number' ? (entry[k] as number) : undefined);
    const name = given !== '' ? given : await service.nameFor({ owner_id: n('owner_id'), node_id: n('node_id'), egg_id: n('egg_id'), memory: n('memory'), disk: n('disk'), cpu: n('cpu'), index: i + 1 });
    try {
      if (entry !== item) throw new AppError('ERR_VALIDATION', `the servers.${i} entry must be an object`, { status: 422 });
      // A missing or null name is made by the pattern; any other non-string is this entry's error.
      if (entry.name !== undefined && entry.name !== null && typeof entry.name !== 'string') throw new AppError('ERR_VALIDATION', 'the name field must be a string', { status: 422 });
      const { node_id, nest_id, allocation_id } = validateEntry(Object.fromEntries(Object.entries(entry).filter(([k]) => ['node_id', 'nest_id', 'allocation_id', 'environment'].includes(k))));
      if ((await ctx.store.nodes.find(node_id)) === undefined) throw new AppError('ERR_VALIDATION', 'the selected node does not exist', { status: 422 });
      if (entry.ops_tag_ids !== undefined) await service.checkTagIds(entry.ops_tag_ids, 'ops_tag_ids');
      const egg = typeof entry.egg_id === 'number' ? await ctx.store.eggs.find(entry.egg_id) : undefined;
      if (nest_id !== undefined && egg !== undefined && egg.nest_id !== nest_id) throw new AppError('ERR_VALIDATION', 'the selected egg does not belong to the selected nest', { status: 422 });
      const allocation = allocation_id === undefined ? await service.store.firstFree(node_id, claimed) : await ctx.store.allocations.find(allocation_id);
      if (allocation === undefined) throw new AppError('ERR_VALIDATION', allocation_id === undefined ? 'the selected node has no free allocation' : 'the selected allocation does not exist', { status: 422 });
      if (allocation.node_id !== node_id) throw new AppError('ERR_VALIDATION', 'the selected allocation does not belong to the selected node', { status: 422 });
      claimed.add(allocation.id);
      const server = await createServer(ctx, { ...entry, name, allocation_id: allocation.id });
      await service.audit(who, 'multicreate.server_created', { server_id: server.id, node_id: server.node_id, payload: { name: server.name, index: i + 1 } });
      await ctx.activity.log({ event: 'admin:server.create', actor: who.actorId === null ? undefined : { type: 'user', id: who.actorId }, subject: { type: 'server', id: server.id }, properties: { name: server.name, owner: server.owner_id, node: server.node_id }, ip: who.ip });
      results.push({ success: true, name: server.name, id: server.id });
    } catch (err) {
      if (!(err instanceof AppError) || err.status >= 500) throw err;
      results.push({ success: false, name, error: err.message });
    }
  }
  const success = results.filter((r) => r.success).length;
  return { results, summary: { total: results.length, success, failed: results.length - success } };
}

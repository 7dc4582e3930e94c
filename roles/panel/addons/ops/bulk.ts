/**
 * Bulk operations (spec/2 §4.3 bulk dispatch, §3.2): a job of 1-500 servers is checked, stored
 * with one pending item per server, and run on the in-process `ops` queue (one job at a time, in
 * dispatch order), or inside the request when the environment variable OPS_BULK_SYNC is true
 * (read at every dispatch). suspend, unsuspend, delete, move (records only, and only with
 * bulk_move_enabled), tags_add and tags_remove change servers through the panel's services;
 * power and reinstall are checked like the others but every item fails, since no server daemon
 * is attached to this panel. A job left unfinished by a restart is resumed at the next start.
 */
import { randomUUID } from 'node:crypto';
import { isAppError } from '../../../../src/core/app-error.ts';
import type { PanelContext } from '../../context.ts';
import { found, now } from '../../services/records.ts';
import { deleteServer, setSuspended } from '../../services/servers.ts';
import { createValidator, ID, problemsOf, validationError, type FieldProblem } from '../../services/validation.ts';
import { MAX_TAG_IDS, type OpsService, type Who } from './service.ts';
import type { JobItemRow, JobRow } from './store.ts';

export const BULK_TYPES = ['suspend', 'unsuspend', 'delete', 'move', 'power', 'reinstall', 'tags_add', 'tags_remove'] as const;
export type BulkType = (typeof BULK_TYPES)[number];
export const POWER_ACTIONS = ['start', 'stop', 'restart', 'kill'] as const;
/** Most servers in one bulk operation (spec/2 §8). */
export const MAX_BULK = 500;

interface BulkInput {
  type: BulkType;
  server_ids: number[];
  options?: { target_node_id?: number; power_action?: (typeof POWER_ACTIONS)[number]; tag_ids?: number[] };
}

const validateBulk = createValidator<BulkInput>({
  required: ['type', 'server_ids'],
  properties: {
    type: { enum: BULK_TYPES },
    server_ids: { type: 'array', minItems: 1, maxItems: MAX_BULK, items: ID },
    options: {
      type: 'object',
      properties: { target_node_id: ID, power_action: { enum: POWER_ACTIONS }, tag_ids: { type: 'array', maxItems: MAX_TAG_IDS, items: ID } },
    },
  },
});

export const NO_DAEMON = 'no server daemon is attached to this panel';

/** Whether OPS_BULK_SYNC asks for bulk operations to run inside the request, read from the real environment now. */
export function bulkSync(env: NodeJS.ProcessEnv = process.env): boolean {
  return /^(1|true|yes|on)$/i.test((env.OPS_BULK_SYNC ?? '').trim());
}

const LABELS: Record<BulkType, string> = {
  suspend: 'Suspend',
  unsuspend: 'Unsuspend',
  delete: 'Delete',
  move: 'Move',
  power: 'Power',
  reinstall: 'Reinstall',
  tags_add: 'Add tags to',
  tags_remove: 'Remove tags from',
};

type Outcome = { status: 'success' | 'failed' | 'skipped'; error: string | null };

export interface BulkRunner {
  /** Checks without dispatching: throws ERR_VALIDATION naming the first problems. */
  check(input: unknown): Promise<BulkInput>;
  /** Stores and dispatches a job; runs it at once when OPS_BULK_SYNC is true. */
  dispatch(input: unknown, who: Who): Promise<JobRow>;
  attributes(job: JobRow): Promise<Record<string, unknown>>;
  /** Queues the jobs a restart left unfinished; `panel serve` calls it at start. */
  resume(): Promise<void>;
  /** Lets the running item finish and stops; the rest resumes at the next start. */
  stop(): Promise<void>;
}

/** Runs once per panel process. */
export function createBulkRunner(ctx: PanelContext, service: OpsService): BulkRunner {
  const { store } = service;
  const queue: string[] = [];
  let running: Promise<void> | undefined;
  let stopping = false;

  const check = async (input: unknown): Promise<BulkInput> => {
    const v = validateBulk(input);
    const problems: FieldProblem[] = [];
    const ids = [...new Set(v.server_ids)];
    const missing: number[] = [];
    for (const id of ids) if ((await ctx.store.servers.find(id)) === undefined) missing.push(id);
    if (missing.length > 0) problems.push({ field: 'server_ids', rule: 'exists', detail: `the server_ids field names servers that do not exist: ${missing.join(', ')}` });
    const o = v.options ?? {};
    if (v.type === 'move') {
      if (!(await service.settings()).bulk_move_enabled) problems.push({ field: 'type', rule: 'disabled', detail: 'bulk move is disabled in the operations settings (bulk_move_enabled)' });
      if (o.target_node_id === undefined) problems.push({ field: 'options.target_node_id', rule: 'required', detail: 'the options.target_node_id field is required for a move' });
      else if ((await ctx.store.nodes.find(o.target_node_id)) === undefined) problems.push({ field: 'options.target_node_id', rule: 'exists', detail: 'the selected target node does not exist' });
    }
    if (v.type === 'power' && o.power_action === undefined) problems.push({ field: 'options.power_action', rule: 'required', detail: 'the options.power_action field is required for a power action' });
    if (v.type === 'tags_add' || v.type === 'tags_remove') {
      if (o.tag_ids === undefined || o.tag_ids.length === 0) problems.push({ field: 'options.tag_ids', rule: 'required', detail: 'the options.tag_ids field is required for a tag operation' });
      else {
        try {
          await service.checkTagIds(o.tag_ids, 'options.tag_ids');
        } catch (err) {
          if (!isAppError(err, 'ERR_VALIDATION')) throw err;
          problems.push(...problemsOf(err));
        }
      }
    }
    if (problems.length > 0) throw validationError(problems);
    return { ...v, server_ids: ids, options: o };
  };

  const runItem = async (job: JobRow, item: JobItemRow): Promise<Outcome> => {
    const options = JSON.parse(job.options) as NonNullable<BulkInput['options']>;
    const who: Who = { actorId: job.actor_id, ip: job.ip };
    const actor = job.actor_id === null ? undefined : { type: 'user', id: job.actor_id };
    const server = await ctx.store.servers.find(item.server_id);
    if (server === undefined) return { status: 'skipped', error: 'the server no longer exists' };
    const done = async (payload: Record<string, unknown> = {}, nodeId = server.node_id): Promise<Outcome> => {
      await service.audit(who, `bulk.${job.type}`, { server_id: server.id, node_id: nodeId, payload: { job: job.uuid, ...payload } });
      return { status: 'success', error: null };
    };
    switch (job.type as BulkType) {
      case 'suspend':
      case 'unsuspend': {
        const suspend = job.type === 'suspend';
        if ((server.suspended === 1) === suspend) return { status: 'skipped', error: `the server is already ${suspend ? 'suspended' : 'not suspended'}` };
        await setSuspended(ctx, server.id, suspend, actor, job.ip, { bulk: job.uuid });
        return done();
      }
      case 'delete':
        await deleteServer(ctx, server.id);
        await ctx.activity.log({ event: 'admin:server.delete', actor, subject: { type: 'server', id: server.id }, properties: { name: server.name, uuid: server.uuid, bulk: job.uuid }, ip: job.ip });
        return done({ name: server.name });
      case 'move': {
        const target = options.target_node_id ?? 0;
        if (server.node_id === target) return { status: 'skipped', error: 'the server is already on the target node' };
        if (!(await store.moveServer(server.id, target, now()))) return { status: 'failed', error: 'the target node has no free allocation' };
        return done({ from_node_id: server.node_id, to_node_id: target }, target);
      }
      case 'power':
        return { status: 'failed', error: `${NO_DAEMON}: the ${options.power_action ?? ''} power action cannot be sent` };
      case 'reinstall':
        return { status: 'failed', error: `${NO_DAEMON}: a reinstall cannot run` };
      case 'tags_add':
      case 'tags_remove': {
        // A tag deleted since the dispatch (the job waited in the queue, or across a restart) took
        // its links along: it is left out, and an add that has no tag left fails saying why.
        const live = new Set((await store.tags()).map((t) => t.id));
        const tagIds = (options.tag_ids ?? []).filter((id) => live.has(id));
        if (job.type === 'tags_add' && tagIds.length === 0) return { status: 'failed', error: `the tags of this job were deleted since it was dispatched: ${(options.tag_ids ?? []).join(', ')}` };
        const changed = await store.changeServerTags(server.id, tagIds, job.type === 'tags_add');
        if (changed === 0) return { status: 'skipped', error: job.type === 'tags_add' ? 'the server has these tags already' : 'the server has none of these tags' };
        return done({ tag_ids: tagIds });
      }
    }
  };

  const runJob = async (uuid: string): Promise<void> => {
    const job = await store.job(uuid);
    if (job === undefined || job.status === 'finished') return;
    if (job.status !== 'running') await store.setJob(job.id, { status: 'running', started_at: job.started_at ?? now() });
    for (const item of await store.jobItems(job.id)) {
      if (item.status !== 'pending') continue;
      if (stopping) return;
      let outcome: Outcome;
      try {
        outcome = await runItem(job, item);
      } catch (err) {
        if (!isAppError(err)) ctx.logger.error({ err, job: uuid, server: item.server_id }, 'a bulk item failed');
        outcome = { status: 'failed', error: err instanceof Error ? err.message : String(err) };
      }
      await store.setItem(item.id, outcome.status, outcome.error);
    }
    await store.setJob(job.id, { status: 'finished', finished_at: now() });
    const items = await store.jobItems(job.id);
    await service.audit({ actorId: job.actor_id, ip: job.ip }, 'bulk.finished', {
      payload: { job: uuid, type: job.type, total: job.total, succeeded: items.filter((i) => i.status === 'success').length, failed: items.filter((i) => i.status === 'failed').length },
    });
  };

  const kick = (): void => {
    if (running !== undefined || stopping) return;
    running = (async () => {
      while (queue.length > 0 && !stopping) {
        const uuid = queue.shift() as string;
        try {
          await runJob(uuid);
        } catch (err) {
          ctx.logger.error({ err, job: uuid }, 'a bulk job failed');
        }
      }
    })().finally(() => {
      running = undefined;
      if (queue.length > 0) kick();
    });
  };

  return {
    check,
    async dispatch(input, who) {
      const v = await check(input);
      const count = v.server_ids.length;
      const job = await store.insertJob(
        {
          uuid: randomUUID(),
          type: v.type,
          label: `${LABELS[v.type]} ${count} server${count === 1 ? '' : 's'}`,
          status: 'pending',
          options: JSON.stringify(v.options ?? {}),
          actor_id: who.actorId,
          ip: who.ip,
          total: count,
          created_at: now(),
          started_at: null,
          finished_at: null,
        },
        v.server_ids,
      );
      await service.audit(who, 'bulk.dispatched', { payload: { job: job.uuid, type: v.type, total: count, options: v.options ?? {} } });
      if (bulkSync()) {
        await runJob(job.uuid);
        return found(await store.job(job.uuid), 'bulk job');
      }
      queue.push(job.uuid);
      kick();
      return job;
    },
    async attributes(job) {
      const items = await store.jobItems(job.id);
      const count = (s: string): number => items.filter((i) => i.status === s).length;
      const processed = items.length - count('pending');
      return {
        uuid: job.uuid,
        type: job.type,
        label: job.label,
        status: job.status,
        total: job.total,
        processed,
        failed: count('failed'),
        skipped: count('skipped'),
        succeeded: count('success'),
        progress_pct: job.total === 0 ? 100 : Math.round((processed / job.total) * 100),
        started_at: job.started_at,
        finished_at: job.finished_at,
        items: items.map((i) => ({ server_id: i.server_id, status: i.status, error: i.error })),
      };
    },
    async resume() {
      stopping = false;
      for (const job of await store.unfinishedJobs()) if (!queue.includes(job.uuid)) queue.push(job.uuid);
      kick();
    },
    async stop() {
      stopping = true;
      await running;
    },
  };
}

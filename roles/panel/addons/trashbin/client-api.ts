/**
 * The trash bin in the client API (spec/2 §4.1): the file manager's path, list and delete hooks
 * (the trash folder guarded on every file route, `/.trash` answered from the records, delete into
 * the trash), and the routes `files/restore`, `files/trash-quota` and `files/trash/empty` inside
 * the client API scope, behind its key authentication and server checks. Restore and empty take
 * 10 requests a minute each, per user and server.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../../../../src/core/app-error.ts';
import type { FileCall, PanelContext } from '../../context.ts';
import { item } from '../../http/api-format.ts';
import type { ClientApiKit } from '../../http/client-api.ts';
import { requirePermission } from '../../services/server-access.ts';
import { createValidator, validationError } from '../../services/validation.ts';
import { createLoginThrottle } from '../../web/login-throttle.ts';
import { isTrashPath, TRASH_DIR, TRASH_ID, TRASH_ROOT, truthy } from './rules.ts';
import { displayError, type TrashService } from './service.ts';

/** The permission a subuser needs to see or manage the trash (deleting into it needs only file.delete). */
export const TRASH_PERMISSION = 'trashbin.access';
const PER_MINUTE = 10;

const validateRestore = createValidator<{ files: number[] }>({
  required: ['files'],
  properties: { files: { type: 'array', minItems: 1, maxItems: 10_000, items: { type: 'integer', minimum: 1 } } },
});

const trashDirRefused = (): AppError => displayError('The trash folder is managed by the trash bin: files cannot be moved into or out of it, nor the folder deleted, here.');

/** Attaches the file manager hooks; runs once at attach. */
export function attachFileHooks(ctx: PanelContext, service: TrashService): void {
  // Every file route, whatever the spelling of its paths or the symlinks on the way (the core
  // resolves them as the volume walk does, so `t -> .trash` is judged as `.trash`): the trash
  // folder and what is in it need trashbin.access (spec/2 §1: subusers need it to see or manage
  // the trash), and changes there are refused while protect_trash_dir is on. Deletes are judged
  // by the delete hook below, which knows the `/.trash` root's ids. The list and delete hooks run
  // only after this one passed, so they need no permission check of their own.
  (ctx.hooks.filePaths ??= []).push(async (call, paths, use) => {
    if (!paths.some(isTrashPath)) return;
    requirePermission(call.access, TRASH_PERMISSION);
    if (use === 'change' && (await service.settings()).protect_trash_dir) throw trashDirRefused();
  });

  (ctx.hooks.fileList ??= []).push(async (call, directory) => (directory === TRASH_DIR ? await service.list(call.access.server) : undefined));

  (ctx.hooks.fileDelete ??= []).push(async (call, { root, files, paths }, body) => {
    const s = await service.settings();
    if (files.length > s.max_files_per_delete) {
      throw validationError([{ field: 'files', rule: 'max', detail: `the files field must not have more than ${s.max_files_per_delete} items` }]);
    }
    if (root.replace(/\/+$/, '') === TRASH_ROOT) {
      // Each valid id names `.trash/{id}`, which the path hook has normally checked already; checked
      // again because the path hook saw resolved paths, and a `.trash` replaced by a link resolves elsewhere.
      requirePermission(call.access, TRASH_PERMISSION);
      await service.remove(call, trashIds(files));
      return true;
    }
    // Resolved paths: a file reached through a link into the trash counts as in the trash.
    const inTrash = paths.some(isTrashPath);
    if (s.enabled && !truthy(body.permanent)) {
      if (inTrash) throw displayError('The trash folder and what is in it cannot be moved to the trash.');
      await service.trash(call, paths);
      return true;
    }
    if (inTrash && s.protect_trash_dir) throw trashDirRefused();
    return false;
  });
}

/** The ids of a `/.trash` delete: strings holding positive integers, else 422 naming each bad one. */
function trashIds(files: readonly string[]): number[] {
  const bad = files.flatMap((f, i) => (TRASH_ID.test(f) ? [] : [{ field: `files.${i}`, rule: 'integer', detail: `the files.${i} field must be a trash id` }]));
  if (bad.length > 0) throw validationError(bad);
  return files.map(Number);
}

/** Registers the routes on the client API scope; runs once at app build. */
export function registerTrashClientRoutes(api: FastifyInstance, kit: ClientApiKit, service: TrashService): void {
  const restoreLimit = createLoginThrottle({ limit: PER_MINUTE, windowMs: 60_000 });
  const emptyLimit = createLoginThrottle({ limit: PER_MINUTE, windowMs: 60_000 });
  // Counts the request; past the limit, 429 with Retry-After.
  const throttled = (limit: ReturnType<typeof createLoginThrottle>, call: FileCall, reply: FastifyReply): void => {
    const key = `${call.actor.id}:${call.access.server.id}`;
    const wait = limit.take(key);
    if (wait > 0) {
      void reply.header('retry-after', String(wait));
      throw new AppError('ERR_TOO_MANY_REQUESTS', `too many requests; retry in ${wait} seconds`, { status: 429 });
    }
  };
  const callOf = async (req: FastifyRequest, ...permissions: string[]): Promise<FileCall> => kit.call(req, await kit.access(req, ...permissions));

  api.post('/servers/:server/files/restore', async (req, reply) => {
    const call = await callOf(req, TRASH_PERMISSION);
    throttled(restoreLimit, call, reply);
    await service.restore(call, validateRestore(req.body).files);
    return reply.code(204).send();
  });
  api.get('/servers/:server/files/trash-quota', async (req) => {
    const call = await callOf(req, 'file.read');
    return item('trash_quota', { ...(await service.quota(call.access.server)) });
  });
  api.post('/servers/:server/files/trash/empty', async (req, reply) => {
    const call = await callOf(req, TRASH_PERMISSION);
    throttled(emptyLimit, call, reply);
    await service.empty(call);
    return reply.code(204).send();
  });
}

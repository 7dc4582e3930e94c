/**
 * The trash bin's work (spec/2 §3.1): moving deleted files into `.trash/{id}` of the server's
 * volume under the effective quota, listing, restoring (to the original path or a free
 * `(restored N)` name), deleting from the trash, emptying it, and the retention purge (at start
 * and hourly under `panel serve`, or at once from the admin page). Settings are read through a 300 s cache
 * that admin writes clear at once. Every file operation goes through the panel's volume files,
 * so the trash stays confined to the server's volume like any other path.
 *
 * A record and its item can part: a record whose item is gone, one pointing into the trash
 * folder itself (a ghost, spec/2 §3.1), or an item named like an entry with no record (an
 * orphan: a crash between two steps, a database restored from a backup). Restore, delete, empty
 * and the purge remove whichever side is left, and say what they removed in their activity
 * entries and in the panel's log.
 */
import { AppError } from '../../../../src/core/app-error.ts';
import type { FileCall, PanelContext } from '../../context.ts';
import type { ServerRow } from '../../store/records.ts';
import { createVolumeFiles, rfc3339, type Measured } from '../../volume-files.ts';
import { effectiveValues, isTrashPath, restoredName, TRASH_DIR, TRASH_ID, TRASH_ROOT, type Effective } from './rules.ts';
import { TRASH_DEFAULTS, type TrashSettings } from './settings.ts';
import type { TrashEntry, TrashStore } from './store.ts';

/** How long a settings read is reused (spec/2 §2.3, §8). */
export const SETTINGS_CACHE_MS = 300_000;
const PURGE_INTERVAL_MS = 3_600_000;
/** The purge's rows per chunk never go below this, whatever is stored (spec/2 §2.3). */
const MIN_PURGE_BATCH = 50;
// A restore gives up after this many taken names rather than probing forever.
const MAX_RESTORE_NAMES = 1000;

export interface TrashQuota {
  enabled: boolean;
  cap_bytes: number;
  used_bytes: number;
  retention_hours: number;
}

export interface TrashService {
  /** The settings in force: cached up to 300 s; the built-in defaults when the store cannot be read. */
  settings(): Promise<TrashSettings>;
  /** Admin writes: stored at once and the cache cleared. */
  saveSettings(s: TrashSettings): Promise<void>;
  effective(server: ServerRow): Promise<Effective>;
  quota(server: ServerRow): Promise<TrashQuota>;
  /** A server's entries as `trash_bin_file_object`s, newest first, from the records only. */
  list(server: ServerRow): Promise<Record<string, unknown>[]>;
  /** Moves the paths (volume-relative) into the trash; 409 on quota, nothing moved. Missing paths are skipped. */
  trash(call: FileCall, paths: readonly string[]): Promise<void>;
  /** Removes entries of the call's server by id, for good, and orphan items named by the ids; other ids are skipped. */
  remove(call: FileCall, ids: readonly number[]): Promise<void>;
  /**
   * Restores entries of the call's server in id order; other ids are skipped, ghosts and entries
   * whose item is gone are removed. Stops at the first failure with an error naming that entry,
   * what was restored before it and what was not tried; what was done is logged either way.
   */
  restore(call: FileCall, ids: readonly number[]): Promise<void>;
  /** Removes every entry and orphan item of the call's server, whatever its age. */
  empty(call: FileCall): Promise<void>;
  /** Removes the entries and orphan items past their effective retention, in chunks; resolves to how many. */
  purge(): Promise<number>;
  start(): void;
  stop(): Promise<void>;
}

/** Refusals the file manager shows as they are (Pterodactyl's DisplayException, 400). */
export function displayError(message: string): AppError {
  return new AppError('DisplayException', message, { status: 400 });
}

/** The API attributes of an entry (spec/2 §2.1): its deletion time is both timestamps. */
export function entryAttributes(e: TrashEntry): Record<string, unknown> {
  const at = rfc3339(new Date(e.deleted_at));
  return {
    name: e.path,
    mode: e.mode,
    mode_bits: Number(e.mode_bits),
    size: e.size,
    is_file: e.is_file === 1,
    is_symlink: e.is_symlink === 1,
    is_trash: true,
    trash_id: e.id,
    mimetype: 'application/octet-stream',
    created_at: at,
    modified_at: at,
  };
}

/**
 * The error of a restore that stopped at entry `e`: what failed and why, what was restored before
 * it and what was not tried, with the failure's own status and code (409 every name taken, 507 the
 * disk full, ...); an unexpected error's text stays in the panel's log.
 */
function restoreFailed(e: TrashEntry, err: unknown, restored: readonly number[], untried: readonly number[]): AppError {
  const known = err instanceof AppError ? err : undefined;
  const parts = [`Restoring trash entry ${e.id} (/${e.path}) failed: ${known?.message ?? 'unexpected error'}.`];
  parts.push(restored.length > 0 ? `Restored before it: ${restored.join(', ')}.` : 'Nothing was restored before it.');
  if (untried.length > 0) parts.push(`Not tried, still in the trash: ${untried.join(', ')}.`);
  return new AppError(known?.code ?? 'ERR_INTERNAL', parts.join(' '), {
    status: known?.status ?? 500,
    cause: { meta: { trash_id: e.id, restored, not_tried: untried } },
  });
}

// Drops repeats and paths inside another listed path (moving the folder moves them), so nothing is counted twice.
function outermost(paths: readonly string[]): string[] {
  const unique = [...new Set(paths)];
  return unique.filter((p) => !unique.some((q) => q !== p && p.startsWith(`${q}/`)));
}

/** Runs once per process (attach); the purge timer runs only between start() and stop(). */
export function createTrashService(ctx: PanelContext, store: TrashStore, now: () => number = Date.now): TrashService {
  const files = createVolumeFiles({ volumesDir: ctx.config.volumes_dir });
  let cached: { value: TrashSettings; until: number } | undefined;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<unknown> | undefined;

  async function settings(): Promise<TrashSettings> {
    const t = now();
    if (cached !== undefined && t < cached.until) return cached.value;
    try {
      const value = await store.settings();
      cached = { value, until: t + SETTINGS_CACHE_MS };
      return value;
    } catch (err) {
      ctx.logger.error({ err }, 'cannot read the trash bin settings; using the built-in defaults');
      return { ...TRASH_DEFAULTS };
    }
  }

  async function effective(server: ServerRow): Promise<Effective> {
    const [s, own, egg] = await Promise.all([settings(), store.serverOverride(server.id), store.eggOverride(server.egg_id)]);
    return effectiveValues(s, own, egg);
  }

  async function log(event: string, server: ServerRow, call: FileCall | undefined, properties: Record<string, unknown>): Promise<void> {
    if (!(await settings()).logging_enabled) return;
    await ctx.activity.log({ event: `server:trashbin.${event}`, actor: call?.actor, subject: { type: 'server', id: server.id }, properties, ip: call?.ip });
  }

  // The trash folder is the volume's own `.trash` folder. A link by that name leads to another
  // folder of the volume, whose files were never the trash bin's: nothing is moved into, taken
  // from or deleted under it (the hourly purge skips the server, logged), and the user is told why.
  async function ownTrashFolder(server: ServerRow): Promise<void> {
    const [real] = await files.resolve(server.uuid, [TRASH_DIR], true);
    if (real !== TRASH_DIR) throw displayError(`/${TRASH_DIR} is a link to /${real ?? ''}, not the trash folder: rename or remove the link, then try again.`);
  }

  // Deletes the items of entries from the volume, then their records. A volume that is gone took its items along.
  async function removeItems(server: ServerRow, entries: readonly TrashEntry[]): Promise<void> {
    if (entries.length === 0) return;
    await ownTrashFolder(server);
    try {
      await files.delete(server.uuid, TRASH_ROOT, entries.map((e) => String(e.id)));
    } catch (err) {
      if (!(err instanceof AppError && err.code === 'ERR_NOT_FOUND')) throw err;
    }
    await store.removeEntries(entries.map((e) => e.id));
  }

  // The ids of the orphan items in the server's trash folder: named like an entry, without a
  // record of this server, so nothing lists, restores or counts them. The folder is read before the
  // records, and a trash writes its record before it moves the item, so an item being trashed
  // meanwhile is never taken for one. Other names were never the trash bin's and stay; a volume
  // without a trash folder (none here, or a file by that name) holds none.
  async function orphans(server: ServerRow): Promise<number[]> {
    await ownTrashFolder(server);
    let names: string[];
    try {
      names = (await files.list(server.uuid, TRASH_ROOT)).map((f) => f.attributes.name);
    } catch (err) {
      if (err instanceof AppError && (err.code === 'ERR_NOT_FOUND' || err.code === 'ERR_BAD_PATH')) return [];
      throw err;
    }
    const recorded = new Set((await store.entries(server.id)).map((e) => String(e.id)));
    return names.filter((n) => TRASH_ID.test(n) && !recorded.has(n)).map(Number);
  }

  // Deletes the orphan items that `wanted` picks; resolves to their ids.
  async function sweep(server: ServerRow, wanted: (id: number) => boolean | Promise<boolean>): Promise<number[]> {
    const ids: number[] = [];
    for (const id of await orphans(server)) if (await wanted(id)) ids.push(id);
    if (ids.length === 0) return ids;
    await files.delete(server.uuid, TRASH_ROOT, ids.map(String));
    ctx.logger.warn({ server: server.uuid, ids }, 'removed trash items that had no record');
    return ids;
  }

  async function purgeServer(server: ServerRow, batch: number): Promise<number> {
    // A retention reaching back past 1970 (a hand-written override) expires nothing; as a date it would not exist.
    const cutoff = Math.max(0, now() - (await effective(server)).retentionHours * 3_600_000);
    const before = new Date(cutoff).toISOString();
    let removed = 0;
    let orphaned: number[] = [];
    try {
      for (;;) {
        const chunk = await store.expired(server.id, before, batch);
        await removeItems(server, chunk);
        removed += chunk.length;
        if (chunk.length < batch) break;
      }
      // An orphan has no deletion time; its last status change (set by the move into the trash)
      // is no earlier, so it too stays at least its retention.
      orphaned = await sweep(server, async (id) => {
        const m = await files.measure(server.uuid, `${TRASH_DIR}/${id}`);
        return m !== null && m.changed_ms < cutoff;
      });
    } finally {
      // Logged even when a later chunk or the sweep fails: what was removed is gone.
      if (removed > 0 || orphaned.length > 0) await log('purge', server, undefined, { count: removed, ...(orphaned.length > 0 ? { orphans: orphaned } : {}) });
    }
    return removed + orphaned.length;
  }

  async function purge(): Promise<number> {
    const batch = Math.max(MIN_PURGE_BATCH, (await settings()).purge_batch_size);
    let removed = 0;
    // Every server, not only those with records: orphans have none.
    for (const server of await ctx.store.servers.all()) {
      try {
        removed += await purgeServer(server, batch);
      } catch (err) {
        ctx.logger.error({ err, server: server.uuid }, 'trash purge of a server failed; the next run tries again');
      }
    }
    // The activity log has each server's count only while logging_enabled is on.
    if (removed > 0) ctx.logger.info({ removed }, 'trash purge removed entries past their retention');
    return removed;
  }

  async function trashOne(call: FileCall, path: string, m: Measured, at: string): Promise<TrashEntry | undefined> {
    const server = call.access.server;
    const entry = await store.addEntry({
      server_id: server.id,
      path,
      is_file: m.is_file ? 1 : 0,
      is_symlink: m.is_symlink ? 1 : 0,
      size: m.size,
      mode: m.mode,
      mode_bits: m.mode_bits,
      deleted_by: call.actor.type === 'user' ? call.actor.id : null,
      deleted_at: at,
    });
    try {
      await files.rename(server.uuid, '/', [{ from: path, to: `${TRASH_DIR}/${entry.id}` }]);
      return entry;
    } catch (err) {
      await store.removeEntries([entry.id]);
      // Gone since it was measured (deleted meanwhile): nothing to trash, as a delete of a missing name.
      if (err instanceof AppError && err.code === 'ERR_NOT_FOUND' && (await files.measure(server.uuid, path)) === null) return undefined;
      throw err;
    }
  }

  // Moves one entry's item back: the original path, else the first free `(restored N)` name; resolves to where, or null when its item is gone.
  async function restoreOne(server: ServerRow, e: TrashEntry): Promise<string | null> {
    // A folder on the way replaced by a link into the trash folder: the item would land among the
    // trash bin's items, and the next empty or purge would take it for an orphan.
    const [target] = await files.resolve(server.uuid, [e.path], false);
    if (target !== undefined && isTrashPath(target)) throw displayError(`/${e.path} now leads into the trash folder (/${target}): rename or remove the link on its way, then restore again`);
    const from = `${TRASH_DIR}/${e.id}`;
    for (let attempt = 0; attempt < MAX_RESTORE_NAMES; attempt++) {
      const to = restoredName(e.path, attempt);
      try {
        await files.rename(server.uuid, '/', [{ from, to }]);
        return to;
      } catch (err) {
        if (err instanceof AppError && err.code === 'ERR_EXISTS') continue;
        if (err instanceof AppError && err.code === 'ERR_NOT_FOUND' && (await files.measure(server.uuid, from)) === null) return null;
        throw err;
      }
    }
    throw new AppError('ERR_EXISTS', `/${e.path} and its first ${MAX_RESTORE_NAMES - 1} "(restored)" names are all taken`, { status: 409 });
  }

  return {
    settings,
    async saveSettings(s) {
      await store.saveSettings(s);
      cached = undefined;
    },
    effective,
    async quota(server) {
      const [s, eff, usage] = await Promise.all([settings(), effective(server), store.usage(server.id)]);
      return { enabled: s.enabled, cap_bytes: eff.capBytes, used_bytes: usage.bytes, retention_hours: eff.retentionHours };
    },
    async list(server) {
      return (await store.entries(server.id)).map((e) => ({ object: 'trash_bin_file_object', attributes: entryAttributes(e) }));
    },

    async trash(call, paths) {
      const server = call.access.server;
      // The core's permanent delete says the same of the root; measuring it would say less.
      if (paths.includes('')) throw new AppError('ERR_BAD_REQUEST', 'the volume root cannot be deleted', { status: 400 });
      const measured: [string, Measured][] = [];
      for (const p of outermost(paths)) {
        const m = await files.measure(server.uuid, p);
        if (m !== null) measured.push([p, m]);
      }
      if (measured.length === 0) return;
      await ownTrashFolder(server);
      const { capBytes } = await effective(server);
      if (capBytes > 0) {
        for (const [, m] of measured) {
          if (m.size > capBytes) {
            throw new AppError('FileTooLargeForTrash', `a file of ${m.size} bytes is larger than the trash bin's capacity of ${capBytes} bytes; delete it permanently instead`, { status: 409, cause: { meta: { file_size: m.size, cap_bytes: capBytes } } });
          }
        }
        const used = (await store.usage(server.id)).bytes;
        const incoming = measured.reduce((n, [, m]) => n + m.size, 0);
        if (used + incoming > capBytes) {
          throw new AppError('TrashBinFull', `the trash bin holds ${used} of ${capBytes} bytes and cannot take ${incoming} more; empty it or delete permanently`, { status: 409, cause: { meta: { used_bytes: used, cap_bytes: capBytes, incoming_bytes: incoming } } });
        }
      }
      const at = new Date(now()).toISOString();
      const moved: TrashEntry[] = [];
      try {
        for (const [p, m] of measured) {
          const entry = await trashOne(call, p, m, at);
          if (entry !== undefined) moved.push(entry);
        }
      } finally {
        // Logged even when a later item fails: what moved stays in the trash.
        if (moved.length > 0) await log('trash', server, call, { files: moved.map((e) => e.path), ids: moved.map((e) => e.id), bytes: moved.reduce((n, e) => n + e.size, 0) });
      }
    },

    async remove(call, ids) {
      const server = call.access.server;
      const entries = await store.entriesByIds(server.id, ids);
      await removeItems(server, entries);
      const recorded = new Set(entries.map((e) => e.id));
      const unrecorded = new Set(ids.filter((id) => !recorded.has(id)));
      const orphaned = unrecorded.size > 0 ? await sweep(server, (id) => unrecorded.has(id)) : [];
      if (entries.length > 0 || orphaned.length > 0) {
        await log('delete', server, call, { ids: entries.map((e) => e.id), files: entries.map((e) => e.path), ...(orphaned.length > 0 ? { orphans: orphaned } : {}) });
      }
    },

    async restore(call, ids) {
      const server = call.access.server;
      const entries = await store.entriesByIds(server.id, ids);
      if (entries.length > 0) await ownTrashFolder(server);
      const restored: { id: number; file: string; to: string }[] = [];
      const skipped: { id: number; file: string; reason: 'ghost' | 'missing' }[] = [];
      let failure: { error: AppError; log: Record<string, unknown> } | undefined;
      for (const [i, e] of entries.entries()) {
        try {
          if (isTrashPath(e.path)) {
            // A record pointing into the trash folder itself can never be restored (a ghost): it goes, with its item.
            await removeItems(server, [e]);
            skipped.push({ id: e.id, file: e.path, reason: 'ghost' });
            continue;
          }
          const to = await restoreOne(server, e);
          // Noted before the record goes: the item is back even if removing the record fails.
          if (to === null) skipped.push({ id: e.id, file: e.path, reason: 'missing' });
          else restored.push({ id: e.id, file: e.path, to });
          await store.removeEntries([e.id]);
        } catch (err) {
          if (!(err instanceof AppError) || err.status >= 500) ctx.logger.error({ err, server: server.uuid, trash_id: e.id }, 'restoring a trash entry failed');
          const error = restoreFailed(e, err, restored.map((r) => r.id), entries.slice(i + 1).map((x) => x.id));
          failure = { error, log: { id: e.id, file: e.path, error: error.message } };
          break;
        }
      }
      // Written whatever happened after: every restore that moved a file is in the activity log.
      if (restored.length > 0 || skipped.length > 0 || failure !== undefined) {
        await log('restore', server, call, { restored, skipped, ...(failure !== undefined ? { failed: failure.log } : {}) });
      }
      if (skipped.length > 0) ctx.logger.warn({ server: server.uuid, skipped }, 'removed trash entries that had no restorable item');
      if (failure !== undefined) throw failure.error;
    },

    async empty(call) {
      const server = call.access.server;
      const entries = await store.entries(server.id);
      const batch = Math.max(MIN_PURGE_BATCH, (await settings()).purge_batch_size);
      const removed: TrashEntry[] = [];
      let orphaned: number[] = [];
      try {
        for (let i = 0; i < entries.length; i += batch) {
          const chunk = entries.slice(i, i + batch);
          await removeItems(server, chunk);
          removed.push(...chunk);
        }
        orphaned = await sweep(server, () => true);
      } finally {
        // Logged even when a later chunk or the sweep fails: what was removed is gone.
        await log('empty', server, call, { count: removed.length, bytes: removed.reduce((n, e) => n + e.size, 0), ...(orphaned.length > 0 ? { orphans: orphaned } : {}) });
      }
    },

    purge,
    start() {
      if (timer !== undefined) return;
      // The hourly purge leaves the trash alone while the addon is switched off (spec/2 §2.3: existing trash untouched).
      const tick = async (): Promise<void> => {
        if ((await settings()).enabled) await purge();
      };
      const run = (): void => {
        running ??= tick()
          .catch((err: unknown) => ctx.logger.error({ err }, 'trash purge failed'))
          .finally(() => (running = undefined));
      };
      // Once at start too: a panel restarted more often than hourly would otherwise never purge.
      run();
      timer = setInterval(run, PURGE_INTERVAL_MS);
      timer.unref();
    },
    async stop() {
      clearInterval(timer);
      timer = undefined;
      await running;
    },
  };
}

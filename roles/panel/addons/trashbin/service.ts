/**
 * The trash bin's work (spec/2 §3.1): moving deleted files into `.trash/{id}` of the server's
 * volume under the effective quota, listing, restoring (to the original path or a free
 * `(restored N)` name), deleting from the trash, emptying it, and the retention purge (hourly
 * under `panel serve`, or at once from the admin page). Settings are read through a 300 s cache
 * that admin writes clear at once. Every file operation goes through the panel's volume files,
 * so the trash stays confined to the server's volume like any other path.
 */
import { AppError } from '../../../../src/core/app-error.ts';
import type { FileCall, PanelContext } from '../../context.ts';
import type { ServerRow } from '../../store/records.ts';
import { createVolumeFiles, rfc3339, type Measured } from '../../volume-files.ts';
import { effectiveValues, isTrashPath, restoredName, TRASH_DIR, TRASH_ROOT, type Effective } from './rules.ts';
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
  /** Removes entries of the call's server by id, for good; unknown ids are skipped. */
  remove(call: FileCall, ids: readonly number[]): Promise<void>;
  restore(call: FileCall, ids: readonly number[]): Promise<void>;
  /** Removes every entry of the call's server, whatever its age. */
  empty(call: FileCall): Promise<void>;
  /** Removes the entries past their effective retention, in chunks; resolves to how many. */
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

  // Deletes the items of entries from the volume, then their records. A volume that is gone took its items along.
  async function removeItems(server: ServerRow, entries: readonly TrashEntry[]): Promise<void> {
    if (entries.length === 0) return;
    try {
      await files.delete(server.uuid, TRASH_ROOT, entries.map((e) => String(e.id)));
    } catch (err) {
      if (!(err instanceof AppError && err.code === 'ERR_NOT_FOUND')) throw err;
    }
    await store.removeEntries(entries.map((e) => e.id));
  }

  async function purgeServer(server: ServerRow, batch: number): Promise<number> {
    const before = new Date(now() - (await effective(server)).retentionHours * 3_600_000).toISOString();
    let removed = 0;
    for (;;) {
      const chunk = await store.expired(server.id, before, batch);
      await removeItems(server, chunk);
      removed += chunk.length;
      if (chunk.length < batch) break;
    }
    if (removed > 0) await log('purge', server, undefined, { count: removed });
    return removed;
  }

  async function purge(): Promise<number> {
    const batch = Math.max(MIN_PURGE_BATCH, (await settings()).purge_batch_size);
    let removed = 0;
    for (const id of await store.serversWithEntries()) {
      const server = await ctx.store.servers.find(id);
      if (server === undefined) continue;
      try {
        removed += await purgeServer(server, batch);
      } catch (err) {
        ctx.logger.error({ err, server: server.uuid }, 'trash purge of a server failed; the next run tries again');
      }
    }
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
      const measured: [string, Measured][] = [];
      for (const p of outermost(paths)) {
        const m = await files.measure(server.uuid, p);
        if (m !== null) measured.push([p, m]);
      }
      if (measured.length === 0) return;
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
      for (const [p, m] of measured) {
        const entry = await trashOne(call, p, m, at);
        if (entry !== undefined) moved.push(entry);
      }
      if (moved.length > 0) await log('trash', server, call, { files: moved.map((e) => e.path), ids: moved.map((e) => e.id), bytes: moved.reduce((n, e) => n + e.size, 0) });
    },

    async remove(call, ids) {
      const server = call.access.server;
      const entries = await store.entriesByIds(server.id, ids);
      await removeItems(server, entries);
      if (entries.length > 0) await log('delete', server, call, { ids: entries.map((e) => e.id), files: entries.map((e) => e.path) });
    },

    async restore(call, ids) {
      const server = call.access.server;
      const restored: { id: number; file: string; to: string }[] = [];
      const skipped: number[] = [];
      for (const e of await store.entriesByIds(server.id, ids)) {
        // A record pointing into the trash folder itself can never be restored: a ghost.
        const to = isTrashPath(e.path) ? null : await restoreOne(server, e);
        await store.removeEntries([e.id]);
        if (to === null) skipped.push(e.id);
        else restored.push({ id: e.id, file: e.path, to });
      }
      if (restored.length > 0 || skipped.length > 0) await log('restore', server, call, { restored, skipped });
    },

    async empty(call) {
      const server = call.access.server;
      const entries = await store.entries(server.id);
      const batch = Math.max(MIN_PURGE_BATCH, (await settings()).purge_batch_size);
      for (let i = 0; i < entries.length; i += batch) await removeItems(server, entries.slice(i, i + batch));
      await log('empty', server, call, { count: entries.length, bytes: entries.reduce((n, e) => n + e.size, 0) });
    },

    purge,
    start() {
      if (timer !== undefined) return;
      // The hourly purge leaves the trash alone while the addon is switched off (spec/2 §2.3: existing trash untouched).
      const tick = async (): Promise<void> => {
        if ((await settings()).enabled) await purge();
      };
      timer = setInterval(() => {
        running ??= tick()
          .catch((err: unknown) => ctx.logger.error({ err }, 'trash purge failed'))
          .finally(() => (running = undefined));
      }, PURGE_INTERVAL_MS);
      timer.unref();
    },
    async stop() {
      clearInterval(timer);
      timer = undefined;
      await running;
    },
  };
}

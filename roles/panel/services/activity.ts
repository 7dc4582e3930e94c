/**
 * The activity log: who did what to which record, from where. The panel's own actions and every
 * addon write here (events like `auth:success`, `server:file.write`, `server:trashbin.restore`).
 */
import type { PanelStore } from '../store/store.ts';
import type { ActivityRow } from '../store/records.ts';
import type { ListQuery, Page } from '../store/repository.ts';

export interface ActivityEntry {
  event: string;
  actor?: { type: string; id: number } | undefined;
  subject?: { type: string; id: number } | undefined;
  properties?: Record<string, unknown>;
  ip?: string | undefined;
  description?: string;
}

export interface ActivityLog {
  /** Writes one entry stamped now; never throws into the caller's request (a failure is logged). */
  log(entry: ActivityEntry): Promise<void>;
  list(query?: ListQuery): Promise<Page<ActivityRow>>;
}

/** Runs once per process. */
export function createActivityLog(store: PanelStore, onError: (err: unknown) => void): ActivityLog {
  return {
    async log(entry) {
      try {
        await store.activity.insert({
          event: entry.event,
          ip: entry.ip ?? '',
          description: entry.description ?? null,
          actor_type: entry.actor?.type ?? null,
          actor_id: entry.actor?.id ?? null,
          subject_type: entry.subject?.type ?? null,
          subject_id: entry.subject?.id ?? null,
          properties: JSON.stringify(entry.properties ?? {}),
          timestamp: new Date().toISOString(),
        });
      } catch (err) {
        onError(err);
      }
    },
    list: (query) => store.activity.list({ sort: '-id', ...query }),
  };
}

/** Who reads an entry, when not an administrator reading everything: the API key's user. */
export interface ActivityViewer {
  id: number;
  root_admin: number;
}

/**
 * The API attributes of an activity row. With a `viewer` (the client API), `ip` is null unless
 * the viewer is the actor or a root admin, as Pterodactyl's ActivityLogTransformer does (the key
 * stays, so clients that read it keep working): an owner or subuser never learns an admin's or
 * another subuser's address. Without one (the application API, admins only) it is always given.
 */
export function activityAttributes(row: ActivityRow, viewer?: ActivityViewer): Record<string, unknown> {
  const ipShown = viewer === undefined || viewer.root_admin === 1 || (row.actor_type === 'user' && row.actor_id === viewer.id);
  return {
    id: row.id,
    event: row.event,
    ip: ipShown ? row.ip : null,
    description: row.description,
    actor: row.actor_type === null ? null : { type: row.actor_type, id: row.actor_id },
    subject: row.subject_type === null ? null : { type: row.subject_type, id: row.subject_id },
    properties: JSON.parse(row.properties) as unknown,
    timestamp: row.timestamp,
  };
}

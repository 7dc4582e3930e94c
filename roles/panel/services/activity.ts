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

/** The API attributes of an activity row. */
export function activityAttributes(row: ActivityRow): Record<string, unknown> {
  return {
    id: row.id,
    event: row.event,
    ip: row.ip,
    description: row.description,
    actor: row.actor_type === null ? null : { type: row.actor_type, id: row.actor_id },
    subject: row.subject_type === null ? null : { type: row.subject_type, id: row.subject_id },
    properties: JSON.parse(row.properties) as unknown,
    timestamp: row.timestamp,
  };
}

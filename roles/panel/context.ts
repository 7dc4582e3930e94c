/**
 * What every panel service, route and CLI command receives: the frozen config, the store, the app
 * key, the logger, the activity log and the hooks addons attach to. Built once per process.
 */
import type { Logger } from 'pino';
import type { PanelConfig } from '../../src/contracts/types.ts';
import type { AppKey } from './app-key.ts';
import type { Mailer } from './mailer.ts';
import type { ActivityLog } from './services/activity.ts';
import type { FieldProblem } from './services/validation.ts';
import type { ServerRow } from './store/records.ts';
import type { PanelStore } from './store/store.ts';

/** Lifecycle hooks: addons (bandwidth, trash bin, operations) react to core changes here. */
export interface PanelHooks {
  /**
   * Runs before a server is created, with the request's raw input, next to the core's own
   * validation: an addon checks its own fields (e.g. `bandwidth`) and returns their problems,
   * named by their request path. Any problem from core or addon fails the request with one
   * ERR_VALIDATION and nothing is written. Optional so a context built without addons needs no list.
   */
  serverInput?: ((input: Record<string, unknown>) => Promise<FieldProblem[]> | FieldProblem[])[];
  /** Runs after a server is suspended or unsuspended; a failing hook is logged, never undoes it. */
  serverSuspension: ((server: ServerRow, suspended: boolean) => Promise<void> | void)[];
  /** Runs after a server was created, with the request's raw input (addons read their own fields, e.g. `bandwidth`). */
  serverCreated: ((server: ServerRow, input: Record<string, unknown>) => Promise<void> | void)[];
  /** Runs after a server record was deleted. */
  serverDeleted: ((server: ServerRow) => Promise<void> | void)[];
}

export interface PanelContext {
  config: Readonly<PanelConfig>;
  store: PanelStore;
  appKey: AppKey;
  logger: Logger;
  activity: ActivityLog;
  /** SMTP; a failed send is the caller's to log, never to fail an action on. */
  mailer: Mailer;
  hooks: PanelHooks;
  /** Every subuser permission known to this panel: the core set plus what addons registered. */
  permissions: Set<string>;
}

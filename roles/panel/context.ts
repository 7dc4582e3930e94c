/**
 * What every panel service, route and CLI command receives: the frozen config, the store, the app
 * key, the logger, the activity log and the hooks addons attach to. Built once per process.
 */
import type { Logger } from 'pino';
import type { PanelConfig, ServerLimitsEntry } from '../../src/contracts/types.ts';
import type { AppKey } from './app-key.ts';
import type { Mailer } from './mailer.ts';
import type { ActivityLog } from './services/activity.ts';
import type { ServerAccess } from './services/server-access.ts';
import type { FieldProblem } from './services/validation.ts';
import type { NodeRow, ServerRow } from './store/records.ts';
import type { PanelStore } from './store/store.ts';

/** Who asks the file manager for something: their access to the server, the actor and address for the activity log. */
export interface FileCall {
  access: ServerAccess;
  actor: { type: string; id: number };
  ip: string;
}

/**
 * What a file route does with the paths it hands to the filePaths hooks: `read` (list, contents),
 * `change` (write, rename, create-folder) or `delete`, which the fileDelete hooks judge further
 * (a delete may be an addon's own, like the trash bin's removal of trash ids).
 */
export type FilePathUse = 'read' | 'change' | 'delete';

/** A `POST files/delete` as the fileDelete hooks see it. */
export interface FileDeleteRequest {
  root: string;
  files: readonly string[];
  /** Each file joined to the root and resolved (see filePaths), in the same order. */
  paths: readonly string[];
}

/** Where a node's agent answers: the node's name (for messages), the base URL it registered, its pairing token. */
export interface NodeAgentTarget {
  name: string;
  apiUrl: string;
  token: string;
}

/** Lifecycle hooks: addons (bandwidth, trash bin, operations, firewall) react to core changes and to each other here. */
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
  /**
   * Every client file route (list, contents, write, rename, create-folder, delete, and any added
   * later), after the core's permission checks and validation and before any other file hook or
   * volume change: every path the request reads or changes, resolved as the volume walk resolves
   * it (volume-relative, normalised: `a/b`, the root is ''; symlinks inside the volume followed,
   * the final one only where the route follows it: list, contents, write; the longest existing
   * prefix resolved and the rest appended), and what it does with them. A hook refuses by
   * throwing (the trash bin: 403 for `.trash` and below without `trashbin.access`), so one hook
   * guards a folder whatever the route, the spelling of the path or a link leading into it; the
   * other file hooks run only once all of these passed.
   */
  filePaths?: ((call: FileCall, paths: readonly string[], use: FilePathUse) => Promise<void> | void)[];
  /**
   * `GET files/list`, after the filePaths hooks, with the directory resolved as they got it: the first hook
   * returning entries answers for that directory (the trash bin's `.trash`) instead of the
   * volume; undefined passes on.
   */
  fileList?: ((call: FileCall, directory: string) => Promise<unknown[] | undefined>)[];
  /**
   * `POST files/delete`, after the filePaths hooks, with the request's root and files as sent,
   * the resolved path of each file as the filePaths hooks got them, and the raw body (addon fields
   * such as `permanent`): a hook may refuse (throw), or take the delete over and return true
   * (the trash bin moving files), and then the core neither deletes nor logs; false lets the core
   * delete for good.
   */
  fileDelete?: ((call: FileCall, request: FileDeleteRequest, body: Record<string, unknown>) => Promise<boolean>)[];
  /**
   * The agent of an online node, for addons that call nodes: the addon that keeps the agents'
   * registrations (bandwidth) answers with the address and token, or undefined for a node that is
   * offline or never registered (nothing to call). The first defined answer wins.
   */
  onlineNodeAgent?: ((nodeId: number) => Promise<NodeAgentTarget | undefined>)[];
  /**
   * Fired once per transition of a node's agent between online and offline (the bandwidth addon
   * decides: missed heartbeats and failed polls, or a heartbeat, poll or registration again);
   * `reason` says why in words. A failing hook is logged, never undoes the transition.
   */
  nodeStatus?: ((node: NodeRow, online: boolean, reason: string) => Promise<void> | void)[];
  /**
   * Fields other addons add to the servers' entries of the limits payload a node receives (the
   * firewall's `smart`), at every payload build: called with the node's servers, returns per
   * server id the fields to merge into its entry.
   */
  limitsEntries?: ((servers: readonly ServerRow[]) => Promise<ReadonlyMap<number, Partial<ServerLimitsEntry>>>)[];
  /**
   * An addon changed what goes into a node's limits payload (the firewall's SMART grant or enable):
   * the addon that pushes limits (bandwidth) gives the node a new config_version and pushes it now.
   */
  limitsChanged?: ((nodeId: number) => Promise<void>)[];
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

/**
 * The contract between the panel core and an addon (bandwidth, trash bin, operations, firewall
 * alerts): its schema migrations (versions of its own range), and a start function that runs once
 * the store is open, attaches hooks and permissions, and returns its routes and background work.
 */
import type { FastifyInstance } from 'fastify';
import type { Migration } from '../../../src/lib/sqlite.ts';
import type { PanelContext } from '../context.ts';
import type { ClientApiKit } from '../http/client-api.ts';
import type { PanelStore } from '../store/store.ts';

export interface RunningAddon {
  /** Registers the addon's routes on the root app (the addon picks its prefixes). */
  routes?(app: FastifyInstance): Promise<void>;
  /**
   * Registers routes inside the client API scope (`/api/client`, its key authentication
   * included); `kit.access` applies the core's server checks (404, 409 suspended, 403).
   */
  clientRoutes?(api: FastifyInstance, kit: ClientApiKit): void;
  /** Starts background work (polling, pruning); only `panel serve` calls it. */
  start?(): void;
  /** Stops background work; awaited at shutdown. */
  stop?(): Promise<void>;
}

export interface PanelAddon {
  name: string;
  /** Applied after the core's, in order; versions never collide with the core's (1-99). */
  migrations: readonly Migration[];
  /** Runs once per process after the store is open (serve and the CLI alike). */
  attach(ctx: PanelContext, store: PanelStore): RunningAddon;
}

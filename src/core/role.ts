import type { Command } from 'commander';

/**
 * A role as main.ts sees it: a name under `hostkit <role>`, an optional program name it also
 * answers to (busybox style), and a function that adds its commands to a commander Command.
 */
export interface RoleDefinition {
  name: string;
  alias?: string;
  summary: string;
  register(cmd: Command): void;
}

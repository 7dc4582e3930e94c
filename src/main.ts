/**
 * Entry point of the one executable: picks the role from the name it was invoked under
 * (`bandwidth-node`, `bandwidth`, `osproxy`) or from `hostkit <role> ...`, and hands the rest
 * of the command line to that role's commands. No role logic lives here.
 */
import { basename } from 'node:path';
import { isSea } from 'node:sea';
import { Command } from 'commander';
import type { RoleDefinition } from './core/role.ts';
import { configureCommand, runProgram, subcommand } from './core/cli.ts';
import { SERVICE_VERSION } from './core/version.ts';
import { installLinks } from './core/install-links.ts';
import { nodeAgentRole } from '../roles/node-agent/index.ts';
import { panelRole } from '../roles/panel/index.ts';
import { bandwidthdRole } from '../roles/bandwidthd/index.ts';
import { proxyRole } from '../roles/proxy/index.ts';

const ROLES: readonly RoleDefinition[] = [nodeAgentRole, panelRole, bandwidthdRole, proxyRole];

/** `hostkit webhook test`, `hostkit reset`, `hostkit cleanup` are the container daemon's commands. */
const SHORTCUTS: Readonly<Record<string, string>> = { webhook: 'bandwidthd', reset: 'bandwidthd', cleanup: 'bandwidthd' };

/** The program name this process answers to: the link's name for the executable, the script's in development. */
function invokedName(): string {
  const raw = isSea() ? process.argv0 : (process.argv[1] ?? 'hostkit');
  return basename(raw).replace(/\.(ts|js|cjs|mjs)$/, '');
}

function buildProgram(name: string): Command {
  const alias = ROLES.find((r) => r.alias === name);
  if (alias) {
    const program = configureCommand(new Command(name)).description(alias.summary);
    program.version(SERVICE_VERSION, '-V, --version', 'print the service version');
    alias.register(program);
    return program;
  }
  const program = configureCommand(new Command('hostkit'))
    .description('hostkit: node bandwidth agent, hosting panel, container bandwidth daemon and reverse proxy in one executable')
    .version(SERVICE_VERSION, '-V, --version', 'print the service version')
    .addHelpText(
      'after',
      `\nThe executable also answers to ${ROLES.filter((r) => r.alias)
        .map((r) => `${r.alias} (= hostkit ${r.name})`)
        .join(', ')}.\nShortcuts: hostkit webhook test | reset | cleanup = hostkit bandwidthd ...`,
    );
  for (const role of ROLES) {
    const cmd = subcommand(program, role.name, role.summary);
    role.register(cmd);
  }
  subcommand(program, 'install-links <dir>', `create the links ${ROLES.flatMap((r) => r.alias ?? []).join(', ')} to this executable in DIR`).action(
    (dir: string) => {
      for (const line of installLinks(dir, ROLES.flatMap((r) => r.alias ?? []))) process.stdout.write(`${line}\n`);
    },
  );
  return program;
}

/** Runs once per process: dispatches the command line and sets the exit code. */
async function main(): Promise<void> {
  const name = invokedName();
  let args = process.argv.slice(2);
  if (!ROLES.some((r) => r.alias === name) && args[0] !== undefined && SHORTCUTS[args[0]]) {
    args = [SHORTCUTS[args[0]] as string, ...args];
  }
  process.exitCode = await runProgram(buildProgram(name), args);
}

void main();

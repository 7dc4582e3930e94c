/**
 * Entry point of the one executable: picks the role from the name it was invoked under
 * (`bandwidth-node`, `bandwidth`, `osproxy`) or from `hostkit <role> ...`, and hands the rest
 * of the command line to that role's commands. No role logic lives here.
 */
import { basename } from 'node:path';
import { isSea } from 'node:sea';
import { Command } from 'commander';
import type { RoleDefinition } from './core/role.ts';
import { configureCommand, EXIT_FAILURE, EXIT_OK, runProgram, subcommand } from './core/cli.ts';
import { SERVICE_VERSION } from './core/version.ts';
import { installLinks } from './core/install-links.ts';

/**
 * Where each role's code is, and the names that route to it. A role's module (its commands,
 * config validators and everything they import) is loaded only when the command line needs that
 * role: a running daemon does not carry the other roles' code and compiled schemas (about 11 MiB
 * of heap for the node agent). `hostkit --help` loads them all. loadRole checks these names
 * against the role's own definition.
 */
const ROLE_MODULES: readonly RoleModule[] = [
  { name: 'node-agent', alias: 'bandwidth-node', load: async () => (await import('../roles/node-agent/index.ts')).nodeAgentRole },
  { name: 'panel', load: async () => (await import('../roles/panel/index.ts')).panelRole },
  { name: 'bandwidthd', alias: 'bandwidth', load: async () => (await import('../roles/bandwidthd/index.ts')).bandwidthdRole },
  { name: 'proxy', alias: 'osproxy', load: async () => (await import('../roles/proxy/index.ts')).proxyRole },
];
const ALIASES = ROLE_MODULES.flatMap((r) => r.alias ?? []);

interface RoleModule {
  name: string;
  alias?: string;
  load: () => Promise<RoleDefinition>;
}

async function loadRole(entry: RoleModule): Promise<RoleDefinition> {
  const role = await entry.load();
  if (role.name !== entry.name || role.alias !== entry.alias) throw new Error(`main.ts routes ${entry.name} under names its definition does not have`);
  return role;
}

/** `hostkit webhook test`, `hostkit reset`, `hostkit cleanup` are the container daemon's commands. */
const SHORTCUTS: Readonly<Record<string, string>> = { webhook: 'bandwidthd', reset: 'bandwidthd', cleanup: 'bandwidthd' };

/** The program name this process answers to: the link's name for the executable, the script's in development. */
function invokedName(): string {
  const raw = isSea() ? process.argv0 : (process.argv[1] ?? 'hostkit');
  return basename(raw).replace(/\.(ts|js|cjs|mjs)$/, '');
}

/** The program for `name` (an alias, or hostkit) with the roles the command line needs. */
async function buildProgram(name: string, args: readonly string[]): Promise<Command> {
  const aliased = ROLE_MODULES.find((r) => r.alias === name);
  if (aliased) {
    const role = await loadRole(aliased);
    const program = configureCommand(new Command(name)).description(role.summary);
    program.version(SERVICE_VERSION, '-V, --version', 'print the service version');
    role.register(program);
    return program;
  }
  // `hostkit <role> ...` needs that role only; anything else (help, install-links) lists them all.
  const named = ROLE_MODULES.find((r) => r.name === args[0]);
  const roles = await Promise.all((named ? [named] : ROLE_MODULES).map(loadRole));
  const program = configureCommand(new Command('hostkit'))
    .description('hostkit: node bandwidth agent, hosting panel, container bandwidth daemon and reverse proxy in one executable')
    .version(SERVICE_VERSION, '-V, --version', 'print the service version')
    .addHelpText(
      'after',
      `\nThe executable also answers to ${ROLE_MODULES.filter((r) => r.alias)
        .map((r) => `${r.alias} (= hostkit ${r.name})`)
        .join(', ')}.\nShortcuts: hostkit webhook test | reset | cleanup = hostkit bandwidthd ...`,
    );
  for (const role of roles) {
    const cmd = subcommand(program, role.name, role.summary);
    role.register(cmd);
  }
  subcommand(program, 'install-links <dir>', `create the links ${ALIASES.join(', ')} to this executable in DIR`).action((dir: string) => {
    for (const line of installLinks(dir, ALIASES)) process.stdout.write(`${line}\n`);
  });
  return program;
}

/** Runs once per process: dispatches the command line and sets the exit code. */
async function main(): Promise<void> {
  // Output piped into a reader that left (`| head`, `| true`) has no one to go to: no stack trace
  // for that. Any other stdout failure (a full disk) is said in one line, and since what was lost
  // may be a password shown once, the command failed, whenever the failure arrives.
  let outputLost = false;
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') return;
    process.stderr.write(`error: cannot write the output: ${err.message} (what the command changed stays changed; a password or token shown only once is lost: set or reset a new one)\n`);
    outputLost = true;
    process.exitCode = EXIT_FAILURE;
  });
  const name = invokedName();
  let args = process.argv.slice(2);
  // `hostkit help reset` asks for the shortcut's help as `hostkit reset --help` does.
  const shortcutAt = args[0] === 'help' ? 1 : 0;
  const shortcut = args[shortcutAt];
  // Own keys only: `hostkit constructor` is an unknown command, not Object's constructor.
  if (!ALIASES.includes(name) && shortcut !== undefined && Object.hasOwn(SHORTCUTS, shortcut)) {
    args = [SHORTCUTS[shortcut] as string, ...args];
  }
  const code = await runProgram(await buildProgram(name, args), args);
  process.exitCode = outputLost && code === EXIT_OK ? EXIT_FAILURE : code;
}

void main();

/**
 * Command-line plumbing shared by the roles: commander programs that exit 2 with a one-line
 * error naming the command's --help on a usage mistake, 0 after --help/--version, 1 when a
 * command fails; config problems printed one per line; never a stack trace unless HOSTKIT_DEBUG
 * is set.
 */
import { CommanderError, type Command } from 'commander';
import { ConfigError, formatProblems, type LoadedConfig } from './config-loader.ts';
import { AppError, errorMessage } from './app-error.ts';

/** Exit codes of every hostkit command. */
export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

/** Applies hostkit's conventions to a command and, through copyInheritedSettings, to its subcommands. */
export function configureCommand(cmd: Command): Command {
  return cmd
    .exitOverride()
    .showHelpAfterError(false)
    .showSuggestionAfterError(true)
    .allowExcessArguments(false);
}

/** Adds a subcommand that inherits hostkit's conventions. */
export function subcommand(parent: Command, nameAndArgs: string, description: string): Command {
  const cmd = parent.command(nameAndArgs).description(description);
  cmd.copyInheritedSettings(parent);
  return cmd;
}

/**
 * Runs a program and returns the process exit code. Usage errors -> 2, help/version -> 0,
 * ConfigError -> its problems and 1, any other error -> one line and 1.
 */
export async function runProgram(program: Command, args: readonly string[]): Promise<number> {
  try {
    pointUsageErrorsAtHelp(program);
    refuseUnknownHelpTopic(program, args);
    await program.parseAsync(args as string[], { from: 'user' });
    return typeof process.exitCode === 'number' ? process.exitCode : EXIT_OK;
  } catch (err) {
    return exitCodeFor(err);
  }
}

/**
 * Makes a usage error of `cmd` and of every command under it one line that ends with where to
 * read the usage, e.g. `error: unknown option '--jso'; see 'bandwidth-node stats --help'`.
 * commander puts its suggestion ("(Did you mean stats?)") on a second line: it joins the first.
 */
function pointUsageErrorsAtHelp(cmd: Command, path = cmd.name()): void {
  cmd.configureOutput({ outputError: (text, write) => write(`${text.trim().split('\n').join(' ').replace(/\.$/, '')}; see '${path} --help'\n`) });
  for (const sub of cmd.commands) pointUsageErrorsAtHelp(sub, `${path} ${sub.name()}`);
}

/**
 * `help <topic>` where the topic is no command, or `<unknown> --help`: commander would print the
 * whole help of the parent (to stderr, or with exit 0 as if the command existed). A word where a
 * default command taking no arguments would run (`osproxy chek`): commander would call it that
 * command's excess argument ("too many arguments for 'serve'"). Runs before parsing and raises
 * the one-line unknown-command error instead (exit 2). Walks the leading command names only;
 * anything else is left to commander.
 */
function refuseUnknownHelpTopic(program: Command, args: readonly string[]): void {
  const named = (cmd: Command, name: string): Command | undefined => cmd.commands.find((c) => c.name() === name || c.aliases().includes(name));
  let cmd = program;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    const sub = named(cmd, arg);
    if (sub) {
      cmd = sub;
      continue;
    }
    const unknown = (name: string): never => {
      // commander's own message and suggestion: unknownCommand reads the name from args.
      cmd.args = [name];
      return (cmd as unknown as { unknownCommand(): never }).unknownCommand();
    };
    const defaultName = (cmd as unknown as { _defaultCommandName: string | null })._defaultCommandName;
    const defaultTakesNone = defaultName !== null && named(cmd, defaultName)?.registeredArguments.length === 0;
    if (arg !== 'help' && !arg.startsWith('-') && cmd.commands.length > 0 && (defaultTakesNone || args.slice(i + 1).some((a) => a === '--help' || a === '-h'))) unknown(arg);
    const topic = args[i + 1];
    if (arg !== 'help' || cmd.commands.length === 0 || topic === undefined || topic.startsWith('-')) return;
    // The help of `help` is this command's help (commander would print it to stderr, exit 2).
    if (topic === 'help') cmd.help();
    if (!named(cmd, topic)) unknown(topic);
    return;
  }
}

function exitCodeFor(err: unknown): number {
  if (err instanceof CommanderError) {
    if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version') return EXIT_OK;
    // `help` and `help <command>` print the help and exit 0; a command group run without a
    // subcommand prints it to stderr with a nonzero code: a usage error.
    if (err.code === 'commander.help') return err.exitCode === 0 ? EXIT_OK : EXIT_USAGE;
    return EXIT_USAGE;
  }
  if (err instanceof ConfigError) {
    process.stderr.write(`${err.message}\n`);
    return EXIT_FAILURE;
  }
  process.stderr.write(`error: ${errorMessage(err)}\n`);
  if (process.env['HOSTKIT_DEBUG'] && err instanceof Error && err.stack) process.stderr.write(`${err.stack}\n`);
  return err instanceof AppError && err.code === 'ERR_USAGE' ? EXIT_USAGE : EXIT_FAILURE;
}

/** Prints the outcome of a config check: warnings, then `ok`. Problems arrive as a ConfigError. */
export function reportCheck(loaded: LoadedConfig<unknown> | { warnings: string[] }): void {
  for (const w of loaded.warnings) process.stderr.write(`warning: ${w}\n`);
  process.stdout.write('ok\n');
}

/** For roles that check several files: prints every file's problems and throws one error. */
export function reportProblemsOf(errors: readonly ConfigError[]): void {
  if (errors.length === 0) return;
  const total = errors.reduce((n, e) => n + e.problems.length, 0);
  const text = errors.map((e) => `${e.source}:\n${formatProblems(e.problems, e.warnings)}`).join('\n');
  throw new AppError('ERR_CONFIG', `${total} problem${total === 1 ? '' : 's'}\n${text}`);
}

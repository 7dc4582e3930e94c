/**
 * Command-line plumbing shared by the roles: commander programs that exit 2 with a one-line
 * error on a usage mistake, 0 after --help/--version, 1 when a command fails; config problems
 * printed one per line; never a stack trace unless HOSTKIT_DEBUG is set.
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
    .allowExcessArguments(false)
    .configureOutput({ outputError: (text, write) => write(text.trimEnd().split('\n')[0] + '\n') });
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
    await program.parseAsync(args as string[], { from: 'user' });
    return typeof process.exitCode === 'number' ? process.exitCode : EXIT_OK;
  } catch (err) {
    return exitCodeFor(err);
  }
}

function exitCodeFor(err: unknown): number {
  if (err instanceof CommanderError) {
    if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version') return EXIT_OK;
    if (err.code === 'commander.help') return EXIT_USAGE; // a command group run without a subcommand
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

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Command } from 'commander';
import { configureCommand, runProgram, subcommand } from './cli.ts';

/** A two-level program like hostkit's (`tool role serve`), with its output captured. */
function program(): { run: (...args: string[]) => Promise<{ code: number; out: string; err: string }> } {
  let out = '';
  let err = '';
  const root = configureCommand(new Command('tool')).configureOutput({ writeOut: (s) => (out += s), writeErr: (s) => (err += s) });
  const role = subcommand(root, 'role', 'a role');
  subcommand(role, 'serve', 'run the daemon').action(() => undefined);
  subcommand(role, 'check', 'check the config').action(() => undefined);
  subcommand(root, 'install-links <dir>', 'links').action(() => undefined);
  // Like the proxy role: `tool proxy --root DIR` runs its default command.
  const proxy = subcommand(root, 'proxy', 'a role with a default command');
  proxy.command('serve', { isDefault: true }).copyInheritedSettings(proxy).option('--root <dir>').action(() => undefined);
  subcommand(proxy, 'check', 'check the config').action(() => undefined);
  return {
    async run(...args) {
      out = '';
      err = '';
      const code = await runProgram(root, args);
      return { code, out, err };
    },
  };
}

test('help as a command prints the help and exits 0 at every level', async () => {
  const p = program();
  const top = await p.run('help');
  assert.deepEqual([top.code, top.err], [0, '']);
  assert.match(top.out, /Usage: tool/);
  const role = await p.run('help', 'role');
  assert.equal(role.code, 0);
  assert.match(role.out, /Usage: tool role/);
  const sub = await p.run('role', 'help', 'serve');
  assert.equal(sub.code, 0);
  assert.match(sub.out, /Usage: tool role serve/);
  assert.equal((await p.run('role', 'help')).code, 0);
  const helpOfHelp = await p.run('role', 'help', 'help');
  assert.deepEqual([helpOfHelp.code, helpOfHelp.err], [0, '']);
  assert.match(helpOfHelp.out, /^Usage: tool role /);
  assert.equal((await p.run('role', '--help')).code, 0);
  assert.equal((await p.run('role', 'serve', '--help')).code, 0);
  assert.equal((await p.run('install-links', 'somewhere', '--help')).code, 0, 'an argument of a command is no unknown command');
  assert.deepEqual([(await p.run('proxy', '--root', 'x')).code, (await p.run('proxy', 'check')).code], [0, 0], 'the default command and another one run');
});

test('help for an unknown topic, or an unknown command with --help, is the one-line unknown command error with exit 2', async () => {
  const p = program();
  for (const [args, help] of [[['help', 'frobnicate'], 'tool'], [['role', 'help', 'frobnicate'], 'tool role'], [['frobnicate', '--help'], 'tool'], [['role', 'frobnicate', '-h'], 'tool role']] as const) {
    const r = await p.run(...args);
    assert.equal(r.code, 2, args.join(' '));
    assert.equal(r.out, '');
    assert.equal(r.err, `error: unknown command 'frobnicate'; see '${help} --help'\n`, args.join(' '));
  }
});

test('a usage error is one line that keeps the suggestion and names the help of the command it concerns', async () => {
  const p = program();
  const cases: [string[], string][] = [
    [['help', 'rol'], "error: unknown command 'rol' (Did you mean role?); see 'tool --help'\n"],
    [['role', 'chek'], "error: unknown command 'chek' (Did you mean check?); see 'tool role --help'\n"],
    [['role', 'check', '--frob'], "error: unknown option '--frob'; see 'tool role check --help'\n"],
    [['role', 'check', 'extra'], "error: too many arguments for 'check'. Expected 0 arguments but got 1: extra; see 'tool role check --help'\n"],
    [['install-links'], "error: missing required argument 'dir'; see 'tool install-links --help'\n"],
    [['proxy', 'chek'], "error: unknown command 'chek' (Did you mean check?); see 'tool proxy --help'\n"],
    [['proxy', '--root', 'x', 'extra'], "error: too many arguments for 'serve'. Expected 0 arguments but got 1: extra; see 'tool proxy serve --help'\n"],
  ];
  for (const [args, err] of cases) {
    const r = await p.run(...args);
    assert.deepEqual([r.code, r.err], [2, err], args.join(' '));
  }
});

test('a command group without a subcommand stays a usage error', async () => {
  const r = await program().run('role');
  assert.equal(r.code, 2);
  assert.match(r.err, /Usage: tool role/);
});

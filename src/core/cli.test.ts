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
  assert.equal((await p.run('role', '--help')).code, 0);
  assert.equal((await p.run('role', 'serve', '--help')).code, 0);
  assert.equal((await p.run('install-links', 'somewhere', '--help')).code, 0, 'an argument of a command is no unknown command');
});

test('help for an unknown topic, or an unknown command with --help, is the one-line unknown command error with exit 2', async () => {
  const p = program();
  for (const args of [['help', 'nope'], ['role', 'help', 'nope'], ['nope', '--help'], ['role', 'nope', '-h']]) {
    const r = await p.run(...args);
    assert.equal(r.code, 2, args.join(' '));
    assert.equal(r.out, '');
    assert.equal(r.err, "error: unknown command 'nope'\n", args.join(' '));
  }
  assert.equal((await p.run('help', 'rol')).err, "error: unknown command 'rol'\n");
});

test('a command group without a subcommand stays a usage error', async () => {
  const r = await program().run('role');
  assert.equal(r.code, 2);
  assert.match(r.err, /Usage: tool role/);
});

/**
 * The entry point run from the sources as `hostkit`: what main.ts itself decides (shortcuts,
 * the exit code when the output cannot be written), not the roles' commands.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { openSync, closeSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const MAIN = fileURLToPath(new URL('./main.ts', import.meta.url));

function hostkit(args: string[], stdout: 'pipe' | number = 'pipe'): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [MAIN, ...args], { encoding: 'utf8', stdio: ['ignore', stdout, 'pipe'], timeout: 60_000 });
  return { code: r.status, stdout: r.stdout ?? '', stderr: r.stderr };
}

test('help of a shortcut is the container daemon command help, as with --help', () => {
  for (const name of ['reset', 'cleanup', 'webhook']) {
    const r = hostkit(['help', name]);
    assert.equal(r.code, 0, `hostkit help ${name}: ${r.stderr}`);
    assert.match(r.stdout, new RegExp(`^Usage: hostkit bandwidthd ${name} `), name);
  }
});

test('output that cannot be written is a failure (exit 1), a reader that left is not', () => {
  const full = openSync('/dev/full', 'w');
  try {
    for (const args of [['--version'], ['--help'], ['bandwidthd', 'run-job', '--help']]) {
      const r = hostkit(args, full);
      assert.equal(r.code, 1, `${args.join(' ')} > /dev/full: ${r.stderr}`);
      assert.match(r.stderr, /^error: cannot write the output: ENOSPC.*\(what the command changed stays changed; a password or token shown only once is lost: set or reset a new one\)/);
    }
  } finally {
    closeSync(full);
  }
  const piped = spawnSync('bash', ['-o', 'pipefail', '-c', `"${process.execPath}" "${MAIN}" --help | true`], { encoding: 'utf8' });
  assert.deepEqual([piped.status, piped.stderr], [0, '']);
});

test('a word that only names a property of every object is an unknown command', () => {
  for (const word of ['constructor', 'toString', '__proto__']) {
    const r = hostkit([word]);
    assert.equal(r.code, 2, `hostkit ${word}: ${r.stderr}`);
    assert.match(r.stderr, new RegExp(`^error: unknown command '${word}'`));
  }
});

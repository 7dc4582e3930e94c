/**
 * `make test`: every suite of the project, in order — unit tests next to the code, the build of
 * both executables, then the suites that drive the built executable (test/bundle, and the
 * integration suites as they exist). Ends with one `N passed, N failed` line over all suites and
 * exits 1 when anything failed.
 */
import { run } from 'node:test';
import { spec } from 'node:test/reporters';
import { execFileSync } from 'node:child_process';
import { globSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

interface Suite {
  name: string;
  globs: string[];
  concurrency: number;
  before?: () => void;
}

// Suites that measure throughput (netns, docker) run one file at a time so they do not disturb
// each other's measurements; headless Chromium needs a core of its own, so browser files also run
// one at a time; the others use both cores.
const SUITES: Suite[] = [
  { name: 'unit', globs: ['src/**/*.test.ts', 'roles/**/*.test.ts', 'scripts/**/*.test.ts'], concurrency: 2 },
  {
    name: 'executable',
    globs: ['test/bundle/**/*.test.ts', 'test/integration/**/*.test.ts'],
    concurrency: 2,
    before: () => execFileSync(process.execPath, [join(ROOT, 'scripts', 'build.ts')], { stdio: 'inherit' }),
  },
  { name: 'browser', globs: ['test/browser/**/*.test.ts'], concurrency: 1 },
  { name: 'netns', globs: ['test/netns/**/*.test.ts'], concurrency: 1 },
  { name: 'docker', globs: ['test/docker/**/*.test.ts'], concurrency: 1 },
];

async function runSuite(suite: Suite): Promise<{ passed: number; failed: number; skipped: number }> {
  const files = suite.globs.flatMap((g) => globSync(g, { cwd: ROOT })).sort().map((f) => join(ROOT, f));
  process.stdout.write(`\n== ${suite.name}: ${files.length} file${files.length === 1 ? '' : 's'}\n`);
  const counts = { passed: 0, failed: 0, skipped: 0 };
  if (files.length === 0) return counts;
  suite.before?.();
  const stream = run({ files, concurrency: suite.concurrency, cwd: ROOT });
  stream.on('test:summary', (s) => {
    if (s.file !== undefined) return;
    counts.passed += s.counts.passed;
    counts.failed += s.counts.tests - s.counts.passed - s.counts.skipped - s.counts.todo;
    counts.skipped += s.counts.skipped + s.counts.todo;
  });
  await new Promise<void>((resolve, reject) => {
    const out = stream.compose(spec);
    out.on('data', (chunk: string | Buffer) => process.stdout.write(chunk));
    out.on('end', resolve);
    out.on('error', reject);
  });
  return counts;
}

async function main(): Promise<void> {
  const only = process.argv.slice(2);
  // Every test's scratch files (roots, sockets, certificates, browser profiles) go under one
  // directory: removed after a run that passed, kept and named after a failure.
  const scratch = mkdtempSync(join(tmpdir(), 'hostkit-test-'));
  process.env['TMPDIR'] = scratch;
  const total = { passed: 0, failed: 0, skipped: 0 };
  for (const suite of SUITES.filter((s) => only.length === 0 || only.includes(s.name))) {
    let c: Awaited<ReturnType<typeof runSuite>>;
    try {
      c = await runSuite(suite);
    } catch (err) {
      process.stdout.write(`suite ${suite.name} could not run: ${err instanceof Error ? err.message : String(err)}\n`);
      c = { passed: 0, failed: 1, skipped: 0 };
    }
    total.passed += c.passed;
    total.failed += c.failed;
    total.skipped += c.skipped;
  }
  process.stdout.write(`\n${total.passed} passed, ${total.failed} failed, ${total.skipped} skipped\n`);
  if (total.failed > 0) process.stdout.write(`the tests' scratch files are kept in ${scratch}\n`);
  else rmSync(scratch, { recursive: true, force: true });
  process.exitCode = total.failed > 0 ? 1 : 0;
}

await main();

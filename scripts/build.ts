/**
 * `make build`: bundles src/main.ts with esbuild into one CommonJS file, turns it into a Node
 * single-executable blob, and injects that blob into each architecture's pinned Node 24 binary:
 * dist/hostkit-linux-x64 and dist/hostkit-linux-arm64. Nothing beside the executable is needed
 * at run time.
 */
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { WEB_ASSETS } from '../src/lib/web-assets.ts';
import { WORKER_ASSET } from '../roles/proxy/proxy-workers.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const WORK = join(ROOT, '.cache', 'build');
const DIST = join(ROOT, 'dist');
const SENTINEL = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';
export const ARCHES = ['x64', 'arm64'] as const;

function step(text: string): void {
  process.stdout.write(`build: ${text}\n`);
}

/**
 * V8 keeps a script's source as one string: a single character beyond Latin-1 anywhere (esbuild
 * escapes them in strings and regular expressions, not in template literals) doubles its size in
 * every process's heap. Use HTML entities or `\u` escapes in templates instead.
 */
function latin1Only(file: string): void {
  const text = readFileSync(file, 'utf8');
  for (let i = 0; i < text.length; i++) {
    if (text.charCodeAt(i) > 0xff) {
      throw new Error(`${file}: character U+${text.charCodeAt(i).toString(16).toUpperCase().padStart(4, '0')} near ${JSON.stringify(text.slice(Math.max(0, i - 60), i + 20))} makes the bundle's source two bytes per character`);
    }
  }
}

async function main(): Promise<void> {
  rmSync(WORK, { recursive: true, force: true });
  mkdirSync(WORK, { recursive: true });
  mkdirSync(DIST, { recursive: true });

  const bundle = join(WORK, 'hostkit.cjs');
  const workerBundle = join(WORK, WORKER_ASSET);
  step(`bundling src/main.ts and the proxy's worker (${WORKER_ASSET})`);
  const result = await build({
    entryPoints: [
      { in: join(ROOT, 'src', 'main.ts'), out: 'hostkit' },
      { in: join(ROOT, 'roles', 'proxy', 'worker-main.ts'), out: 'proxy-worker' },
    ],
    outdir: WORK,
    outExtension: { '.js': '.cjs' },
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node24',
    sourcemap: false,
    legalComments: 'none',
    // No comments or indentation: the bundle's source stays in every process's heap (a third
    // smaller this way). Names are kept, so stack traces still name functions.
    minifyWhitespace: true,
    // Source-tree paths (web-assets.ts, proxy-workers.ts) are only used outside the executable,
    // which reads its SEA assets instead.
    define: { 'import.meta.dirname': '""' },
    logLevel: 'warning',
    metafile: true,
  });
  if (result.errors.length > 0) throw new Error('esbuild failed');
  for (const file of [bundle, workerBundle]) latin1Only(file);
  step(`bundle ${(statSync(bundle).size / 1024).toFixed(0)} KiB, worker ${(statSync(workerBundle).size / 1024).toFixed(0)} KiB`);

  const blob = join(WORK, 'hostkit.blob');
  const seaConfig = join(WORK, 'sea-config.json');
  // No code cache and no snapshot: they are specific to the architecture that made them, and
  // one blob serves both executables.
  // Browser assets (src/lib/web-assets.ts) travel inside the executable.
  // So does the proxy's worker bundle (proxy-workers.ts evaluates it in each worker thread).
  const assets = { ...Object.fromEntries(Object.entries(WEB_ASSETS).map(([name, path]) => [name, join(ROOT, path)])), [WORKER_ASSET]: workerBundle };
  writeFileSync(seaConfig, JSON.stringify({ main: bundle, output: blob, disableExperimentalSEAWarning: true, useCodeCache: false, useSnapshot: false, assets }));
  execFileSync(process.execPath, ['--experimental-sea-config', seaConfig], { stdio: ['ignore', 'ignore', 'inherit'] });

  const postject = join(ROOT, 'node_modules', '.bin', 'postject');
  for (const arch of ARCHES) {
    const base = join(ROOT, '.tools', `node-${arch}`, 'bin', 'node');
    const out = join(DIST, `hostkit-linux-${arch}`);
    step(`injecting into node ${readFileSync(join(ROOT, '.tools', `node-${arch}`, 'VERSION'), 'utf8').trim()} (${arch})`);
    rmSync(out, { force: true });
    copyFileSync(base, out);
    chmodSync(out, 0o755);
    // postject prints harmless ELF note warnings; keep its output only when it fails.
    try {
      execFileSync(postject, [out, 'NODE_SEA_BLOB', blob, '--sentinel-fuse', SENTINEL], { stdio: 'pipe' });
    } catch (err) {
      const e = err as { stderr?: Buffer; stdout?: Buffer };
      process.stderr.write(`${e.stdout?.toString() ?? ''}${e.stderr?.toString() ?? ''}`);
      throw new Error(`postject failed for ${arch}`);
    }
    step(`dist/hostkit-linux-${arch} (${(statSync(out).size / 1024 / 1024).toFixed(0)} MiB)`);
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`build failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});

/**
 * Where benchmark results go: one "## <title>" section of docs/benchmarks.md per benchmark,
 * replaced by its latest run, with the machine described in the section's first line.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const DOC = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'docs', 'benchmarks.md');

/** "2 × CPU model, 24 GiB, Node v24…, kernel …": the machine line of a section. */
export function machine(): string {
  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  return `${cpus().length} × ${cpu}, ${Math.round(totalmem() / 1024 ** 3)} GiB, Node ${process.version}, kernel ${readFileSync('/proc/sys/kernel/osrelease', 'utf8').trim()}`;
}

/** Replaces (or appends) the section `## title` of docs/benchmarks.md with `body`; other sections stay. */
export function writeSection(title: string, body: string): void {
  let doc: string;
  try {
    doc = readFileSync(DOC, 'utf8');
  } catch {
    doc = '# Benchmarks\n\nProduced by `npm run bench` (or `make bench`); each section is replaced by its latest run.\n';
  }
  const start = doc.indexOf(`## ${title}`);
  let next: string;
  if (start < 0) next = `${doc.trimEnd()}\n\n## ${title}\n${body}`;
  else {
    const end = doc.indexOf('\n## ', start + 3);
    next = `${doc.slice(0, start)}## ${title}\n${body}${end < 0 ? '' : doc.slice(end)}`;
  }
  writeFileSync(DOC, next);
}

/** True while a kernel worker tears down a deleted network namespace (its name ends in "+netns"). */
function netnsCleanupRunning(): boolean {
  for (const pid of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(pid)) continue;
    try {
      if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim().endsWith('+netns')) return true;
    } catch {
      // The process ended while we looked.
    }
  }
  return false;
}

/**
 * Waits (at most `maxMs`) until the kernel has torn down deleted network namespaces: after one
 * with 1,000 veths is gone (the node agent benchmark, `make test`), that work takes a core for
 * minutes and every benchmark run meanwhile is slower.
 */
export async function waitForQuietKernel(maxMs = 180_000): Promise<void> {
  const deadline = Date.now() + maxMs;
  let said = false;
  while (netnsCleanupRunning() && Date.now() < deadline) {
    if (!said) process.stdout.write('bench: waiting for the kernel to finish tearing down deleted network namespaces...\n');
    said = true;
    await new Promise((r) => setTimeout(r, 1_000));
  }
}

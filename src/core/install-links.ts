import { existsSync, lstatSync, readlinkSync, statSync, symlinkSync, unlinkSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { isSea } from 'node:sea';
import { AppError } from './app-error.ts';

/**
 * `hostkit install-links DIR`: creates DIR/<name> -> this executable for each program name.
 * DIR must exist (a typo must not grow a directory tree). Every name is checked before any link
 * is made, so a regular file in the way leaves nothing half done. A link to something else is
 * replaced and says what it pointed to. Returns one line per link.
 */
export function installLinks(dir: string, names: readonly string[], target = process.execPath): string[] {
  if (!isSea() && target === process.execPath) {
    throw new AppError('ERR_USAGE', 'install-links needs the built executable (make build, then dist/hostkit-linux-<arch> install-links DIR)');
  }
  // resolve('') is the working directory: an unset variable (`install-links "$BINDIR"`) must not put links there.
  if (dir === '') throw new AppError('ERR_USAGE', 'install-links needs a directory, got an empty name');
  const absDir = resolve(dir);
  if (!existsSync(absDir)) throw new AppError('ERR_NOT_FOUND', `${absDir} does not exist: create it first (the links usually go in /usr/local/bin)`);
  if (!statSync(absDir).isDirectory()) throw new AppError('ERR_USAGE', `${absDir} is not a directory`);
  const links = names.map((name) => {
    const link = join(absDir, name);
    const existing = linkTarget(link);
    if (existing === null) throw new AppError('ERR_EXISTS', `${link} exists and is not a link; not replacing it (no link was made)`);
    return { link, existing };
  });
  const lines: string[] = [];
  for (const { link, existing } of links) {
    if (existing === target) {
      lines.push(`${link} -> ${target} (already there)`);
      continue;
    }
    if (existing !== undefined) unlinkSync(link);
    symlinkSync(target, link);
    lines.push(`${link} -> ${target}${existing !== undefined ? ` (replaced a link to ${existing})` : ''}`);
  }
  return lines;
}

/** What a link at `path` points to; undefined when nothing is there, null when something other than a link is. */
function linkTarget(path: string): string | null | undefined {
  try {
    return lstatSync(path).isSymbolicLink() ? readlinkSync(path) : null;
  } catch {
    return undefined;
  }
}

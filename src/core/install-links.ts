import { existsSync, lstatSync, readlinkSync, symlinkSync, unlinkSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { isSea } from 'node:sea';
import { AppError } from './app-error.ts';
import { makeDirs } from '../lib/make-dirs.ts';

/**
 * `hostkit install-links DIR`: creates DIR/<name> -> this executable for each program name.
 * Replaces an existing link, refuses to overwrite a regular file. Returns one line per link.
 */
export function installLinks(dir: string, names: readonly string[], target = process.execPath): string[] {
  if (!isSea() && target === process.execPath) {
    throw new AppError('ERR_USAGE', 'install-links needs the built executable (make build, then dist/hostkit-linux-<arch> install-links DIR)');
  }
  const absDir = resolve(dir);
  makeDirs(absDir);
  const lines: string[] = [];
  for (const name of names) {
    const link = join(absDir, name);
    if (existsSync(link) || isDanglingLink(link)) {
      if (!lstatSync(link).isSymbolicLink()) throw new AppError('ERR_EXISTS', `${link} exists and is not a link; not replacing it`);
      if (readlinkSync(link) === target) {
        lines.push(`${link} -> ${target} (already there)`);
        continue;
      }
      unlinkSync(link);
    }
    symlinkSync(target, link);
    lines.push(`${link} -> ${target}`);
  }
  return lines;
}

function isDanglingLink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}

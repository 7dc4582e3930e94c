/**
 * The last good version of every proxy file (spec/3 §2.1): config.yaml and each site file load on
 * their own; a file that fails keeps its last good version serving (a new file that fails serves
 * nothing) and its problems are logged once per change. Empty site ids are assigned here and
 * written back into the file; a running site is never renamed, and a file that wants an id
 * another file keeps (a copied file, usually) is a broken file like any other.
 */
import { readFileSync, statSync } from 'node:fs';
import type { Logger } from 'pino';
import { ConfigError, deepFreeze, loadConfigFile } from '../../src/core/config-loader.ts';
import { errorMessage } from '../../src/core/app-error.ts';
import type { ProxyGlobalConfig, ProxySiteConfig } from '../../src/contracts/types.ts';
import { duplicateIdError, globalFileOf, headerTag, listSiteFiles, proxyGlobalSpec, siteSpecFor, sitesDirOf, type ProxySiteFile } from './config.ts';
import { resolveSiteIds, type SiteIdDuplicate } from './site-ids.ts';
import { setYamlId, writeFileAtomic } from './yaml-edit.ts';

/** Global keys that only apply at start (listeners and directories). */
export const RESTART_ONLY_KEYS = ['listen_http', 'listen_https', 'admin.listen', 'data_dir', 'sites_dir', 'workers'] as const;

interface SiteEntry {
  signature: string;
  /** The file's current text, loaded; its id as written, or as the loader wrote it back. Undefined when it fails to load. */
  loaded: Readonly<ProxySiteConfig> | undefined;
  /** Last good config of this file, served under its id. */
  config: Readonly<ProxySiteConfig> | undefined;
  /** Why the current text fails to load. */
  error: ConfigError | undefined;
  /** Why the current text loads but is not served: it wants an id another file keeps. */
  duplicate: SiteIdDuplicate | undefined;
}

export interface ConfigState {
  readonly root: string;
  /** The sites directory in use; fixed at start. */
  readonly sitesDir: string;
  /** The global config as loaded at start (listeners and directories come from it). */
  readonly startGlobal: Readonly<ProxyGlobalConfig>;
  /** The last good global config. */
  global(): Readonly<ProxyGlobalConfig>;
  /** Last good sites in sorted file order, ids assigned and unique. */
  sites(): readonly ProxySiteFile[];
  /** Files whose current text fails to load or wants an id another file keeps, with their problems. */
  broken(): ReadonlyMap<string, ConfigError>;
  /**
   * Re-reads the files whose size, mtime or inode changed (all of them with `force`). Returns
   * true when the served configuration may have changed.
   */
  refresh(force: boolean): boolean;
  /** Global keys that differ from the start-up config and need a restart to apply. */
  pendingRestart(): string[];
}

/** A file's inode, size and mtime: what tells an edit (or a replacement) of it; undefined when it cannot be read. */
export function signatureOf(file: string): string | undefined {
  try {
    const s = statSync(file);
    return `${s.ino}:${s.size}:${s.mtimeMs}`;
  } catch {
    return undefined;
  }
}

function valueAt(obj: unknown, dotted: string): unknown {
  return dotted.split('.').reduce<unknown>((o, k) => (o !== null && typeof o === 'object' ? (o as Record<string, unknown>)[k] : undefined), obj);
}

/**
 * Loads every file for the first time; runs once at start. A global config with problems throws
 * its ConfigError (the proxy refuses to start, like `check`); a bad site file is logged and
 * skipped so the other sites still serve.
 */
export function createConfigState(opts: { root: string; logger: Logger }): ConfigState {
  const { root, logger } = opts;
  const globalFile = globalFileOf(root);
  const first = loadConfigFile(globalFile, proxyGlobalSpec);
  for (const w of first.warnings) logger.warn({ file: globalFile }, w);
  const startGlobal = first.config;
  const sitesDir = sitesDirOf(root, startGlobal);
  const siteSpec = siteSpecFor(root);

  let global = startGlobal;
  let globalSignature = signatureOf(globalFile);
  let globalError: ConfigError | undefined;
  const entries = new Map<string, SiteEntry>();
  let served: ProxySiteFile[] = [];

  function loadSite(file: string, signature: string, entry: SiteEntry | undefined): SiteEntry {
    try {
      const loaded = loadConfigFile(file, siteSpec);
      for (const w of loaded.warnings) logger.warn({ file }, w);
      if (entry?.error) logger.info({ file }, 'site file loads again');
      return { signature, loaded: loaded.config, config: entry?.config, error: undefined, duplicate: entry?.duplicate };
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      const kept = entry?.config !== undefined;
      logger.error(
        { file, problems: err.problems, kept_last_good: kept },
        kept ? 'site file has problems: its last good version keeps serving' : 'site file has problems: it is not served',
      );
      return { signature, loaded: undefined, config: entry?.config, error: err, duplicate: undefined };
    }
  }

  function reloadGlobal(force: boolean): boolean {
    const signature = signatureOf(globalFile);
    if (!force && signature === globalSignature) return false;
    globalSignature = signature;
    try {
      const loaded = loadConfigFile(globalFile, proxyGlobalSpec);
      for (const w of loaded.warnings) logger.warn({ file: globalFile }, w);
      if (globalError) logger.info({ file: globalFile }, 'config.yaml loads again');
      global = loaded.config;
      globalError = undefined;
      const pending = pendingRestart();
      if (pending.length > 0) logger.warn({ keys: pending }, 'config.yaml changes keys that only apply at start: restart the proxy to apply them');
      return true;
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      globalError = err;
      logger.error({ file: globalFile, problems: err.problems }, 'config.yaml has problems: the last good version keeps serving');
      return false;
    }
  }

  /** Writes an assigned id into its file; the proxy keeps serving with the id if the write fails. */
  function writeBackId(file: string, id: string): void {
    try {
      writeFileAtomic(file, setYamlId(readFileSync(file, 'utf8'), id, [headerTag]));
      const entry = entries.get(file);
      const signature = signatureOf(file);
      if (entry && signature) entry.signature = signature;
      logger.info({ file, id }, 'assigned a site id and wrote it into the file');
    } catch (err) {
      logger.warn({ file, id, err: errorMessage(err) }, 'assigned a site id but cannot write it into the file');
    }
  }

  /** Logs a file becoming (or ceasing to be) a duplicate, once per change. */
  function markDuplicate(file: string, e: SiteEntry, d: SiteIdDuplicate | undefined): void {
    const before = e.duplicate;
    e.duplicate = d;
    if (d === undefined) {
      if (before) logger.info({ file }, 'site file loads again');
      return;
    }
    if (before?.id === d.id && before.owner === d.owner) return;
    const kept = e.config !== undefined;
    logger.error(
      { file, id: d.id, kept_by: d.owner, kept_last_good: kept },
      `site id already used by another file: ${kept ? 'its last good version keeps serving' : 'this file is not served'}; if it is a copy, delete its id: line to give it a fresh id`,
    );
  }

  /**
   * Decides every file's id (resolveSiteIds) and what is served: a file that loads and has its
   * id serves its current text, the others their last good version (if any). Runs after any
   * file changed.
   */
  function rebuildServed(): void {
    const sorted = [...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    let duplicates: SiteIdDuplicate[];
    do {
      const claims = sorted.flatMap(([file, e]) => {
        const serving = e.config?.id;
        if (e.loaded) return [{ file, wanted: e.loaded.id === '' ? undefined : e.loaded.id, serving }];
        return serving === undefined ? [] : [{ file, wanted: undefined, serving }];
      });
      const resolved = resolveSiteIds(claims);
      duplicates = resolved.duplicates;
      const dupFiles = new Set(duplicates.map((d) => d.file));
      for (const [file, e] of sorted) {
        if (dupFiles.has(file) || !e.loaded) continue;
        const id = resolved.ids.get(file) as string;
        if (e.loaded.id !== id) {
          // The site carries its id from now on, written back or not, so no later file can take it.
          e.loaded = deepFreeze({ ...e.loaded, id });
          writeBackId(file, id);
        }
        e.config = e.loaded;
      }
      // Again when a file held an id it has just given up: a duplicate of it may take it now.
    } while (duplicates.some((d) => entries.get(d.owner)?.config?.id !== d.id));
    const dupOf = new Map(duplicates.map((d) => [d.file, d]));
    for (const [file, e] of sorted) markDuplicate(file, e, dupOf.get(file));
    served = sorted.flatMap(([file, e]) => (e.config ? [{ file, config: e.config }] : []));
  }

  function refreshSites(force: boolean): boolean {
    let changed = false;
    const files = new Set(listSiteFiles(sitesDir));
    for (const file of entries.keys()) {
      if (!files.has(file)) {
        entries.delete(file);
        logger.info({ file }, 'site file removed');
        changed = true;
      }
    }
    for (const file of files) {
      const signature = signatureOf(file);
      if (signature === undefined) continue;
      const entry = entries.get(file);
      if (!force && entry?.signature === signature) continue;
      const next = loadSite(file, signature, entry);
      entries.set(file, next);
      if (next.loaded !== entry?.loaded) changed = true;
    }
    if (changed) rebuildServed();
    return changed;
  }

  function refresh(force: boolean): boolean {
    const globalChanged = reloadGlobal(force);
    return refreshSites(force) || globalChanged;
  }

  function pendingRestart(): string[] {
    return RESTART_ONLY_KEYS.filter((k) => JSON.stringify(valueAt(global, k)) !== JSON.stringify(valueAt(startGlobal, k)));
  }

  refreshSites(true);
  return {
    root,
    sitesDir,
    startGlobal,
    global: () => global,
    sites: () => served,
    broken() {
      const out = new Map<string, ConfigError>();
      if (globalError) out.set(globalFile, globalError);
      for (const [file, e] of entries) {
        if (e.error) out.set(file, e.error);
        else if (e.duplicate) out.set(file, duplicateIdError(e.duplicate));
      }
      return out;
    },
    refresh,
    pendingRestart,
  };
}

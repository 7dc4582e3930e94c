/**
 * The last good version of every proxy file (spec/3 §2.1): config.yaml and each site file load on
 * their own; a file that fails keeps its last good version serving (a new file that fails serves
 * nothing) and its problems are logged once per change. Empty site ids are assigned here and
 * written back into the file; a second file with an id already in use is skipped.
 */
import { readFileSync, statSync } from 'node:fs';
import type { Logger } from 'pino';
import { ConfigError, deepFreeze, loadConfigFile } from '../../src/core/config-loader.ts';
import { errorMessage } from '../../src/core/app-error.ts';
import type { ProxyGlobalConfig, ProxySiteConfig } from '../../src/contracts/types.ts';
import { globalFileOf, headerTag, listSiteFiles, proxyGlobalSpec, siteSpecFor, sitesDirOf, type ProxySiteFile } from './config.ts';
import { siteIdFromFile, uniqueSiteId } from './site-ids.ts';
import { setYamlId, writeFileAtomic } from './yaml-edit.ts';

/** Global keys that only apply at start (listeners and directories). */
export const RESTART_ONLY_KEYS = ['listen_http', 'listen_https', 'admin.listen', 'data_dir', 'sites_dir', 'workers'] as const;

interface SiteEntry {
  signature: string;
  /** Last good config of this file, id not yet assigned. */
  config: Readonly<ProxySiteConfig> | undefined;
  error: ConfigError | undefined;
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
  /** Files whose current text fails to load, with their problems. */
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
  // The id given to each file whose own id is empty, so it stays stable across reloads.
  const assigned = new Map<string, string>();

  function loadSite(file: string, signature: string, entry: SiteEntry | undefined): SiteEntry {
    try {
      const loaded = loadConfigFile(file, siteSpec);
      for (const w of loaded.warnings) logger.warn({ file }, w);
      if (entry?.error) logger.info({ file }, 'site file loads again');
      return { signature, config: loaded.config, error: undefined };
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      const kept = entry?.config !== undefined;
      logger.error(
        { file, problems: err.problems, kept_last_good: kept },
        kept ? 'site file has problems: its last good version keeps serving' : 'site file has problems: it is not served',
      );
      return { signature, config: entry?.config, error: err };
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

  function rebuildServed(): void {
    const explicit = new Set<string>();
    for (const e of entries.values()) if (e.config && e.config.id !== '') explicit.add(e.config.id);
    const taken = new Set<string>();
    const next: ProxySiteFile[] = [];
    for (const [file, e] of [...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      if (!e.config) continue;
      let config = e.config;
      if (config.id === '') {
        let id = assigned.get(file);
        if (id === undefined || taken.has(id) || explicit.has(id)) {
          id = uniqueSiteId(siteIdFromFile(file), new Set([...taken, ...explicit]));
          assigned.set(file, id);
          writeBackId(file, id);
        }
        config = deepFreeze({ ...config, id });
      }
      if (taken.has(config.id)) {
        const owner = next.find((s) => s.config.id === config.id);
        logger.error({ file, id: config.id, kept_file: owner?.file }, 'site id already used by an earlier file: this file is skipped');
        continue;
      }
      taken.add(config.id);
      next.push({ file, config });
    }
    served = next;
  }

  function refreshSites(force: boolean): boolean {
    let changed = false;
    const files = new Set(listSiteFiles(sitesDir));
    for (const file of entries.keys()) {
      if (!files.has(file)) {
        entries.delete(file);
        assigned.delete(file);
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
      if (next.config !== entry?.config) changed = true;
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
      for (const [file, e] of entries) if (e.error) out.set(file, e.error);
      return out;
    },
    refresh,
    pendingRestart,
  };
}

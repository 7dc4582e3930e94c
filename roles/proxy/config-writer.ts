/**
 * The admin API's writes (site CRUD, PUT /global): a JSON body becomes the file's new YAML text
 * (comments of an existing file kept), the text is validated by the same loader as the files on
 * disk, a site's hostnames are checked against every other enabled site, and only then is the
 * file replaced and the configuration reloaded. Nothing is written when anything is wrong.
 */
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { parse } from 'yaml';
import { AppError, errorMessage } from '../../src/core/app-error.ts';
import { ConfigError, loadConfigText, type ConfigProblem } from '../../src/core/config-loader.ts';
import type { ProxySiteConfig } from '../../src/contracts/types.ts';
import { globalFileOf, HeaderTarget, headerTag, proxyGlobalSpec, siteSpecFor, type ProxySiteFile } from './config.ts';
import { normalizeName } from './host-router.ts';
import type { ProxyRuntime, ReloadOutcome } from './proxy-runtime.ts';
import { siteIdFrom, uniqueSiteId } from './site-ids.ts';
import { isPlainObject, patchYamlText, writeFileAtomic, yamlText } from './yaml-edit.ts';
import { makeDirs } from '../../src/lib/make-dirs.ts';

/** Every default of a config kind: what its validator fills into an empty document. */
function defaultsOf(validate: (data: unknown) => boolean): Record<string, unknown> {
  const filled: Record<string, unknown> = {};
  validate(filled);
  return filled;
}

/**
 * `value` without the keys the file does not write and whose value is the default: a body from
 * `GET /sites/{id}` (every default filled in) sent back with one change writes that change, not
 * every default, so the file stays as short as the operator wrote it and later defaults apply.
 */
function withoutUnwrittenDefaults(value: Record<string, unknown>, written: unknown, defaults: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const file = isPlainObject(written) ? written : {};
  const given = isPlainObject(defaults) ? defaults : {};
  for (const [key, v] of Object.entries(value)) {
    if (key in file) {
      out[key] = isPlainObject(v) ? withoutUnwrittenDefaults(v, file[key], given[key]) : v;
    } else if (!isDeepStrictEqual(v, given[key])) {
      const kept = isPlainObject(v) && isPlainObject(given[key]) ? withoutUnwrittenDefaults(v, undefined, given[key]) : v;
      if (!isPlainObject(kept) || Object.keys(kept).length > 0) out[key] = kept;
    }
  }
  return out;
}

/** A validation failure: 400 ERR_VALIDATION with every problem. */
export class ValidationError extends AppError {
  readonly problems: ConfigProblem[];

  constructor(problems: ConfigProblem[]) {
    super('ERR_VALIDATION', `${problems.length} problem${problems.length === 1 ? '' : 's'}: ${problems.map((p) => `${p.path || '/'}: ${p.message}`).join('; ')}`, { status: 400 });
    this.problems = problems;
  }
}

/** A hostname or id already taken: 409 ERR_CONFLICT naming the other site. */
export class ConflictError extends AppError {
  readonly site: string;
  readonly file: string;
  readonly hostname: string | undefined;

  constructor(message: string, other: ProxySiteFile, hostname?: string) {
    super('ERR_CONFLICT', message, { status: 409 });
    this.site = other.config.id;
    this.file = other.file;
    this.hostname = hostname;
  }
}

export interface SiteWriteResult {
  site: Readonly<ProxySiteConfig>;
  file: string;
  reload: ReloadOutcome;
}

export interface ConfigWriter {
  createSite(body: unknown): SiteWriteResult;
  replaceSite(id: string, body: unknown): SiteWriteResult;
  deleteSite(id: string): { id: string; file: string; reload: ReloadOutcome };
  replaceGlobal(body: unknown): ReloadOutcome;
}

function plainObject(body: unknown, what: string): Record<string, unknown> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new AppError('ERR_BAD_REQUEST', `the body must be a JSON object (${what})`, { status: 400 });
  return body as Record<string, unknown>;
}

/** JSON header targets (`{"header": "X"}`) become `!header X` in the written YAML. */
function withHeaderTargets(site: Record<string, unknown>): Record<string, unknown> {
  const rules = (site['protection'] as { waf?: { custom_rules?: unknown } } | undefined)?.waf?.custom_rules;
  if (!Array.isArray(rules)) return site;
  const copy = structuredClone(site) as { protection: { waf: { custom_rules: Record<string, unknown>[] } } };
  copy.protection.waf.custom_rules = rules.map((r: unknown) => {
    const target = (r as { target?: unknown } | null)?.target;
    const header = (target as { header?: unknown } | null)?.header;
    if (target !== null && typeof target === 'object' && typeof header === 'string' && Object.keys(target).length === 1) {
      return { ...(r as Record<string, unknown>), target: new HeaderTarget(header) };
    }
    return r as Record<string, unknown>;
  });
  return copy as unknown as Record<string, unknown>;
}

function validated<T>(load: () => { config: Readonly<T> }): Readonly<T> {
  try {
    return load().config;
  } catch (err) {
    if (err instanceof ConfigError) throw new ValidationError(err.problems);
    throw err;
  }
}

/** Creates the writer around the running proxy; runs once at start. */
export function createConfigWriter(runtime: ProxyRuntime): ConfigWriter {
  const { state } = runtime;
  const root = state.root;
  const siteSpec = siteSpecFor(root);
  const siteDefaults = defaultsOf(siteSpec.validate);
  const globalDefaults = defaultsOf(proxyGlobalSpec.validate);
  /** What a file's text holds (null when it does not parse), for withoutUnwrittenDefaults. */
  const writtenIn = (text: string): unknown => {
    try {
      return parse(text, { customTags: [headerTag] }) as unknown;
    } catch {
      return null;
    }
  };

  function served(): readonly ProxySiteFile[] {
    return state.sites();
  }

  function findSite(id: string): ProxySiteFile {
    const site = served().find((s) => s.config.id === id);
    if (!site) throw new AppError('ERR_NOT_FOUND', `no site with id ${JSON.stringify(id)}`, { status: 404 });
    return site;
  }

  /** Spec/3 §2.7: through the API, a hostname another enabled site claims is a conflict. */
  function checkHostnames(config: Readonly<ProxySiteConfig>, selfFile: string | undefined): void {
    if (!config.enabled) return;
    const mine = new Set(config.hostnames.map(normalizeName));
    for (const other of served()) {
      if (other.file === selfFile || !other.config.enabled) continue;
      for (const name of other.config.hostnames) {
        const n = normalizeName(name);
        if (mine.has(n)) {
          throw new ConflictError(`hostname ${n} is already claimed by site ${other.config.id} (${other.file})`, other, n);
        }
      }
    }
  }

  function write(file: string, text: string): void {
    try {
      makeDirs(dirname(file));
      writeFileAtomic(file, text);
    } catch (err) {
      throw new AppError('ERR_IO', `cannot write ${file}: ${errorMessage(err)}`, { status: 500, cause: err });
    }
  }

  function reload(): ReloadOutcome {
    return runtime.reload({ force: true, reason: 'admin API write' });
  }

  return {
    createSite(body) {
      const value = withHeaderTargets(plainObject(body, 'a site'));
      const ids = new Set(served().map((s) => s.config.id));
      const raw = value['id'];
      const given = typeof raw === 'string' ? raw : '';
      if (given !== '' && ids.has(given)) throw new ConflictError(`site id ${given} already exists`, findSite(given));
      const hostnames = Array.isArray(value['hostnames']) ? value['hostnames'] : [];
      const first = typeof hostnames[0] === 'string' ? hostnames[0].replace(/^\*\./, '') : 'site';
      const id = given !== '' ? given : uniqueSiteId(siteIdFrom(first), ids);
      let name = id;
      for (let n = 2; existsSync(join(state.sitesDir, `${name}.yaml`)); n++) name = `${id}-${n}`;
      const file = join(state.sitesDir, `${name}.yaml`);
      const { id: _given, ...rest } = value;
      // id first, as an operator would write it; an id that is no string (`5`) stays as sent, so
      // the loader names the problem instead of an id being made up.
      const text = yamlText({ id: raw === undefined || raw === null || typeof raw === 'string' ? id : raw, ...rest }, [headerTag]);
      const config = validated(() => loadConfigText<ProxySiteConfig>(text, file, siteSpec));
      checkHostnames(config, undefined);
      write(file, text);
      const outcome = reload();
      return { site: outcome.generation.byId.get(id)?.config ?? config, file, reload: outcome };
    },
    replaceSite(id, body) {
      const current = findSite(id);
      const value = withHeaderTargets(plainObject(body, 'a site'));
      if (value['id'] !== undefined && value['id'] !== '' && value['id'] !== id) {
        throw new AppError('ERR_BAD_REQUEST', `the body's id ${JSON.stringify(value['id'])} differs from ${JSON.stringify(id)}: ids cannot change, create a new site instead`, { status: 400 });
      }
      let old = '';
      try {
        old = readFileSync(current.file, 'utf8');
      } catch {
        // The file went away: write it fresh.
      }
      const text = patchYamlText(old, withoutUnwrittenDefaults({ ...value, id }, writtenIn(old), siteDefaults), [headerTag]);
      const config = validated(() => loadConfigText<ProxySiteConfig>(text, current.file, siteSpec));
      checkHostnames(config, current.file);
      write(current.file, text);
      const outcome = reload();
      return { site: outcome.generation.byId.get(id)?.config ?? config, file: current.file, reload: outcome };
    },
    deleteSite(id) {
      const current = findSite(id);
      try {
        rmSync(current.file, { force: true });
      } catch (err) {
        throw new AppError('ERR_IO', `cannot delete ${current.file}: ${errorMessage(err)}`, { status: 500, cause: err });
      }
      return { id, file: current.file, reload: reload() };
    },
    replaceGlobal(body) {
      const value = plainObject(body, 'the global config');
      const file = globalFileOf(root);
      let old = '';
      try {
        old = readFileSync(file, 'utf8');
      } catch {
        // Written fresh.
      }
      const text = patchYamlText(old, withoutUnwrittenDefaults(value, writtenIn(old), globalDefaults));
      validated(() => loadConfigText(text, file, proxyGlobalSpec));
      write(file, text);
      return reload();
    },
  };
}

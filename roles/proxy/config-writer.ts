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
import { ConfigError, loadConfigText, type ConfigProblem, type SchemaNode } from '../../src/core/config-loader.ts';
import type { ProxySiteConfig } from '../../src/contracts/types.ts';
import { globalFileOf, HeaderTarget, headerTag, proxyGlobalSpec, siteSpecFor, type ProxySiteFile } from './config.ts';
import { normalizeName } from './host-router.ts';
import type { ProxyRuntime, ReloadOutcome } from './proxy-runtime.ts';
import { siteIdFrom, uniqueSiteId } from './site-ids.ts';
import { isPlainObject, patchYamlText, writeFileAtomic, yamlText } from './yaml-edit.ts';
import { makeDirs } from '../../src/lib/make-dirs.ts';

/**
 * A key the loader ignores (spec/3 §2.1, §9 "unknown fields are ignored"): one the schema of its
 * object does not list, as the loader's unknown-key warning decides.
 */
function isUnknownKey(schema: SchemaNode | undefined, key: string): boolean {
  return schema?.properties !== undefined && schema.additionalProperties === undefined && !(key in schema.properties);
}

/**
 * What the validator fills in for an absent field: its `default`, with the defaults of that
 * default's own fields (an object section written `default: {}` gets every inner default).
 */
function defaultOf(schema: SchemaNode | undefined): unknown {
  if (schema === undefined || !('default' in schema)) return undefined;
  const value = structuredClone(schema['default']);
  if (isPlainObject(value)) {
    for (const [key, child] of Object.entries(schema.properties ?? {})) {
      const inner = key in value ? undefined : defaultOf(child);
      if (inner !== undefined) value[key] = inner;
    }
  }
  return value;
}

/**
 * A config object as the API presents it: without the keys the loader ignores, which are not
 * configuration (GET /sites/{id} and the answers of site writes). Runs per answer.
 */
export function withoutUnknownKeys(value: unknown, schema: SchemaNode | undefined): unknown {
  if (Array.isArray(value)) return value.map((item) => withoutUnknownKeys(item, schema?.items));
  if (!isPlainObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) if (!isUnknownKey(schema, key)) out[key] = withoutUnknownKeys(v, schema?.properties?.[key]);
  return out;
}

/**
 * The file's entry of a list that a body's list item replaces: the one with the same `id` (a
 * custom rule), else, for items without one (tokens), the one at the same position while the list
 * keeps its length. Undefined when the item is new.
 */
function writtenEntry(item: Record<string, unknown>, i: number, value: unknown[], written: unknown): unknown {
  if (!Array.isArray(written)) return undefined;
  const id = item['id'];
  if (id !== undefined) return written.find((w) => isPlainObject(w) && w['id'] === id);
  return written.length === value.length ? written[i] : undefined;
}

/**
 * A body value as the file should hold it, given what the file holds there (`written`, undefined
 * when nothing): objects, and objects inside lists (custom rules, tokens), go through asWritten;
 * anything else is the body's.
 */
function valueAsWritten(value: unknown, written: unknown, schema: SchemaNode | undefined): unknown {
  if (isPlainObject(value)) return asWritten(value, written, schema);
  if (Array.isArray(value)) return value.map((item, i) => (isPlainObject(item) ? asWritten(item, writtenEntry(item, i, value, written), schema?.items) : item));
  return value;
}

/**
 * `value` (a PUT body) as the file should hold it, given the file's current content `written`.
 * A key the file does not write and whose value is the default is left out: a body from
 * `GET /sites/{id}` (every default filled in) sent back with one change writes that change, not
 * every default, so the file stays as short as the operator wrote it and later defaults apply.
 * Keys the loader ignores (an operator's notes, a later version's fields) are not configuration,
 * so GET does not show them: the file's own are kept where the body leaves them out, and a null
 * in the body removes one.
 */
function asWritten(value: Record<string, unknown>, written: unknown, schema: SchemaNode | undefined): Record<string, unknown> {
  const file = isPlainObject(written) ? written : {};
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    const child = schema?.properties?.[key];
    if (isUnknownKey(schema, key)) {
      if (v !== null) out[key] = v;
    } else if (key in file) {
      out[key] = valueAsWritten(v, file[key], child);
    } else if (!isDeepStrictEqual(v, defaultOf(child))) {
      const kept = valueAsWritten(v, undefined, child);
      if (!isPlainObject(kept) || Object.keys(kept).length > 0) out[key] = kept;
    }
  }
  for (const [key, v] of Object.entries(file)) if (!(key in value) && isUnknownKey(schema, key)) out[key] = v;
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
  /** What a file's text holds (null when it does not parse), for asWritten. */
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
      // Left out, null or "" all say "this site's id", as `id:` left empty does in a file.
      if (value['id'] !== undefined && value['id'] !== null && value['id'] !== '' && value['id'] !== id) {
        throw new AppError('ERR_BAD_REQUEST', `the body's id ${JSON.stringify(value['id'])} differs from ${JSON.stringify(id)}: ids cannot change, create a new site instead`, { status: 400 });
      }
      let old = '';
      try {
        old = readFileSync(current.file, 'utf8');
      } catch {
        // The file went away: write it fresh.
      }
      const text = patchYamlText(old, asWritten({ ...value, id }, writtenIn(old), siteSpec.schema), [headerTag]);
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
      const text = patchYamlText(old, asWritten(value, writtenIn(old), proxyGlobalSpec.schema));
      validated(() => loadConfigText(text, file, proxyGlobalSpec));
      write(file, text);
      return reload();
    },
  };
}

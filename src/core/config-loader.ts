/**
 * Config loading shared by every role: YAML -> `${ENV}` expansion -> JSON Schema validation with
 * defaults (the generated standalone validators) -> the role's cross-field checks -> a deeply
 * frozen object. Every problem is collected with the JSON pointer of its field, so `check` and a
 * refused start can list them all at once. Unknown keys are ignored with a warning.
 */
import { isUtf8 } from 'node:buffer';
import { readFileSync } from 'node:fs';
import { parseDocument, type Tags } from 'yaml';
import { AppError, errorMessage } from './app-error.ts';

/** One thing wrong with a config, at a JSON pointer (`/bandwidth/poll_interval`, `` for the root). */
export interface ConfigProblem {
  path: string;
  message: string;
}

/** The shape of a generated standalone Ajv validator. */
export interface SchemaValidator<T> {
  (data: unknown): data is T;
  errors?: AjvErrorLike[] | null;
}

export interface AjvErrorLike {
  instancePath: string;
  schemaPath: string;
  keyword: string;
  params: Record<string, unknown>;
  message?: string;
}

/** A JSON Schema as far as the unknown-key walk needs it. */
export interface SchemaNode {
  [keyword: string]: unknown;
  type?: string | string[];
  properties?: Record<string, SchemaNode>;
  additionalProperties?: boolean | SchemaNode;
  items?: SchemaNode;
  oneOf?: SchemaNode[];
  anyOf?: SchemaNode[];
  pattern?: string;
  enum?: unknown[];
}

export interface ConfigSpec<T> {
  /** The generated validator; it fills defaults in place. */
  validate: SchemaValidator<T>;
  /** The schema the validator was generated from, for the unknown-key walk and messages. */
  schema: SchemaNode;
  /** Cross-field checks; they see a config that may have schema problems, so they must not trust types. */
  checks?: (config: T, problems: ConfigProblem[]) => void;
  /** Extra YAML tags (the proxy's `!header Name` custom-rule target). */
  customTags?: Tags;
}

export interface LoadedConfig<T> {
  config: Readonly<T>;
  warnings: string[];
}

/**
 * Thrown by loadConfig* when anything is wrong; `problems` has every one of them, `warnings` what
 * the file also got wrong without failing (unknown keys), so one run tells everything.
 */
export class ConfigError extends AppError {
  readonly problems: ConfigProblem[];
  readonly source: string;
  readonly warnings: readonly string[];

  constructor(source: string, problems: ConfigProblem[], warnings: readonly string[] = []) {
    super('ERR_CONFIG', `${source}: ${problems.length} problem${problems.length === 1 ? '' : 's'}\n${formatProblems(problems, warnings)}`, {
      status: 400,
    });
    this.problems = problems;
    this.source = source;
    this.warnings = warnings;
  }
}

/** One line per problem, `  /path: message`, in the order found. */
export function formatProblems(problems: readonly ConfigProblem[], warnings: readonly string[] = []): string {
  return [...problems.map((p) => `  ${p.path || '/'}: ${p.message}`), ...warnings.map((w) => `  warning: ${w}`)].join('\n');
}

/**
 * Reads and loads a config file. A missing or unreadable file is a ConfigError with one problem,
 * so callers print it like any other config problem.
 */
export function loadConfigFile<T>(file: string, spec: ConfigSpec<T>): LoadedConfig<T> {
  // An empty --config (an unset variable in a unit file) would be reported against no name at all.
  if (file === '') throw new ConfigError('(empty config path)', [{ path: '', message: 'no config file named: the config path is empty' }]);
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOENT'
        ? 'file not found'
        : code === 'EACCES'
          ? 'permission denied'
          : code === 'EISDIR'
            ? 'it is a directory, not a file'
            : code === 'ENOTDIR'
              ? 'a part of its path is a file, not a directory'
              : errorMessage(err);
    throw new ConfigError(file, [{ path: '', message: `cannot read config: ${why}` }]);
  }
  // Read as UTF-8 regardless, a Latin-1 file's accented letters would turn into U+FFFD and surface
  // as some field's odd problem (a hostname that is not one) instead of the file's.
  if (!isUtf8(bytes)) throw new ConfigError(file, [{ path: '', message: 'not UTF-8 text: save the file as UTF-8' }]);
  return loadConfigText(bytes.toString('utf8'), file, spec);
}

/** Loads config text (YAML or JSON). Runs when a role starts, on `check`, and on reloads. */
export function loadConfigText<T>(text: string, source: string, spec: ConfigSpec<T>): LoadedConfig<T> {
  const problems: ConfigProblem[] = [];
  // A binary file (a database or an archive given by mistake) would fill the YAML errors with its bytes.
  if (text.includes('\0')) throw new ConfigError(source, [{ path: '', message: 'not a text file (it holds NUL bytes): give the YAML config file' }]);
  const doc = parseDocument(text, { customTags: spec.customTags ?? [], prettyErrors: true, uniqueKeys: true });
  for (const err of doc.errors) {
    const pos = err.linePos?.[0];
    // The parser's own words for this one name a function of its API.
    const what = err.code === 'MULTIPLE_DOCS' ? 'the file holds more than one YAML document (a second ---): a config is one document' : (err.message.split('\n')[0] ?? '').replace(/ at line \d+, column \d+:?$/, '');
    problems.push({ path: '', message: `YAML error${pos ? ` at line ${pos.line} column ${pos.col}` : ''}: ${what}` });
  }
  if (problems.length > 0) throw new ConfigError(source, problems);

  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: 100 }) ?? {};
    // An alias inside its own anchor (`a: &a [*a]`) makes a value that contains itself.
    JSON.stringify(data);
  } catch (err) {
    const why = err instanceof TypeError && /circular/i.test(err.message) ? 'an alias refers to the anchor it is inside' : errorMessage(err);
    throw new ConfigError(source, [{ path: '', message: `YAML error: ${why}` }]);
  }
  if (typeof data !== 'object' || Array.isArray(data)) {
    throw new ConfigError(source, [{ path: '', message: 'the file must hold a mapping of keys' }]);
  }
  data = expandEnv(data, process.env, spec.schema);
  const warnings: string[] = [];
  walkKeys(data, spec.schema, '', warnings);
  walkUnresolvedEnv(data, '', warnings);

  if (!spec.validate(data)) problems.push(...schemaProblems(spec.validate.errors ?? [], spec.schema));
  if (spec.checks) {
    try {
      spec.checks(data as T, problems);
    } catch (err) {
      // A check that trips over a value of the wrong type: the schema problem is already listed.
      if (problems.length === 0) problems.push({ path: '', message: `invalid config: ${errorMessage(err)}` });
    }
  }
  if (problems.length > 0) throw new ConfigError(source, dedupe(problems), warnings);
  return { config: deepFreeze(data as T), warnings };
}

const ENV_REF = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g;
const WHOLE_ENV_REF = /^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$/;

/**
 * A value that is one whole reference, where the schema wants a number or a boolean, takes that
 * type when the variable's text is one (`port: ${PORT}`); anything else stays text for the
 * schema to refuse.
 */
function typedValue(text: string, schema: SchemaNode | undefined): unknown {
  const types = [schema?.type ?? []].flat();
  if ((types.includes('integer') || types.includes('number')) && /^-?\d+(\.\d+)?$/.test(text.trim())) return Number(text.trim());
  if (types.includes('boolean') && (text.trim() === 'true' || text.trim() === 'false')) return text.trim() === 'true';
  return text;
}

/**
 * Replaces `${NAME}` in every string with the variable's value; unknown variables stay literal.
 * With the schema, a whole-value reference to a number or boolean field takes that type.
 */
export function expandEnv<T>(value: T, env: NodeJS.ProcessEnv = process.env, schema?: SchemaNode): T {
  if (typeof value === 'string') {
    const whole = WHOLE_ENV_REF.exec(value)?.[1];
    const set = whole === undefined ? undefined : env[whole];
    if (set !== undefined) return typedValue(set, schema) as T;
    return value.replace(ENV_REF, (ref, name: string) => env[name] ?? ref) as T;
  }
  if (Array.isArray(value)) return value.map((v) => expandEnv(v, env, schema?.items)) as T;
  if (value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = expandEnv(v, env, schema?.properties?.[k]);
    return out as T;
  }
  return value;
}

/** Unknown `${VAR}` references stay literal (spec/3 §2.9); say so, since whatever uses the value will fail. */
function walkUnresolvedEnv(data: unknown, path: string, warnings: string[]): void {
  if (typeof data === 'string') {
    for (const m of data.matchAll(ENV_REF)) warnings.push(`${path}: environment variable ${m[1]} is not set; ${m[0]} stays literal`);
  } else if (data !== null && typeof data === 'object') {
    for (const [k, v] of Object.entries(data)) walkUnresolvedEnv(v, `${path}/${k}`, warnings);
  }
}

/** Warns about keys the schema does not know, and unsets fields written with no value. */
function walkKeys(data: unknown, schema: SchemaNode | undefined, path: string, warnings: string[]): void {
  if (!schema || data === null || typeof data !== 'object') return;
  if (Array.isArray(data)) {
    data.forEach((item, i) => walkKeys(item, schema.items, `${path}/${i}`, warnings));
    return;
  }
  const props = schema.properties;
  for (const [key, value] of Object.entries(data)) {
    const child = props?.[key];
    if (value === null && child && takesDefault(child)) {
      // `key:` with nothing after it is YAML's null: the field is left unset, so its default applies.
      delete (data as Record<string, unknown>)[key];
    } else if (child) {
      walkKeys(value, child, `${path}/${key}`, warnings);
    } else if (props && schema.additionalProperties === undefined) {
      warnings.push(`${path}/${key}: unknown key, ignored`);
    }
  }
}

/** A field with a default that null is not a value of: an empty value there means "unset". */
function takesDefault(schema: SchemaNode): boolean {
  if (!('default' in schema)) return false;
  if (schema.type !== undefined) return ![schema.type].flat().includes('null');
  return schema.enum !== undefined && !schema.enum.includes(null);
}

const DURATION_PATTERN = '^[0-9]+(ms|s|m|h|d)$';

/**
 * Turns Ajv errors into problems with readable messages; one problem per failed oneOf/anyOf,
 * naming its forms, and none for a value whose type is already wrong.
 */
function schemaProblems(errors: readonly AjvErrorLike[], schema: SchemaNode): ConfigProblem[] {
  const unions = errors.filter((e) => e.keyword === 'oneOf' || e.keyword === 'anyOf');
  const insideUnion = (e: AjvErrorLike): boolean => unions.some((u) => u !== e && e.schemaPath.startsWith(u.schemaPath.replace(/\/(oneOf|anyOf)$/, '/$1/')));
  // The field's own type is wrong (not one branch's): that says it, the forms would only repeat it.
  const wrongType = new Set(errors.filter((e) => e.keyword === 'type' && !insideUnion(e)).map((e) => e.instancePath));
  const out: ConfigProblem[] = [];
  for (const e of errors) {
    if (insideUnion(e) || (unions.includes(e) && wrongType.has(e.instancePath))) continue;
    const message = unions.includes(e) ? describeUnion(schemaAt(schema, e.schemaPath)) : isDurationTypeError(e, schema) ? 'must be a duration such as 5s, 1m or 1h (a string)' : describe(e);
    out.push({ path: e.keyword === 'required' ? `${e.instancePath}/${String(e.params['missingProperty'])}` : e.instancePath, message });
  }
  return out;
}

/** A number where a duration goes (`discovery_interval: 10`): say what a duration looks like, not only "must be string". */
function isDurationTypeError(e: AjvErrorLike, schema: SchemaNode): boolean {
  if (e.keyword !== 'type') return false;
  const node = schemaAt(schema, e.schemaPath.replace(/\/type$/, ''));
  return typeof node === 'object' && node !== null && (node as SchemaNode).pattern === DURATION_PATTERN;
}

/** The schema node an Ajv schemaPath (`#/properties/id/anyOf`) points at. */
function schemaAt(schema: SchemaNode, schemaPath: string): unknown {
  let node: unknown = schema;
  for (const part of schemaPath.replace(/^#\/?/, '').split('/')) {
    if (part === '' || node === null || typeof node !== 'object') break;
    node = (node as Record<string, unknown>)[part.replace(/~1/g, '/').replace(/~0/g, '~')];
  }
  return node;
}

/** `must be "" or match ^[a-z]+$`: each form of a oneOf/anyOf, as far as it can be said briefly. */
function describeUnion(branches: unknown): string {
  if (!Array.isArray(branches)) return 'does not match any of the allowed forms';
  const forms = (branches as SchemaNode[]).map((b) => {
    if ('const' in b) return `be ${JSON.stringify(b['const'])}`;
    if (b.pattern !== undefined) return b.pattern === DURATION_PATTERN ? 'be a duration such as 5s, 1m or 1h' : `match ${b.pattern}`;
    if (b.enum !== undefined) return `be one of ${b.enum.map((v) => JSON.stringify(v)).join(', ')}`;
    return b.type === undefined ? undefined : `be ${[b.type].flat().join(' or ')}`;
  });
  return forms.includes(undefined) ? 'does not match any of the allowed forms' : `must ${forms.join(' or ')}`;
}

function describe(e: AjvErrorLike): string {
  const p = e.params;
  switch (e.keyword) {
    case 'required':
      return 'is required';
    case 'type':
      return `must be ${String(p['type']).replace(',', ' or ')}`;
    case 'enum':
      return `must be one of: ${(p['allowedValues'] as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
    case 'const':
      return `must be ${JSON.stringify(p['allowedValue'])}`;
    case 'pattern':
      return p['pattern'] === DURATION_PATTERN ? 'must be a duration such as 5s, 1m or 1h' : `must match ${String(p['pattern'])}`;
    case 'minimum':
      return `must be at least ${String(p['limit'])}`;
    case 'maximum':
      return `must be at most ${String(p['limit'])}`;
    case 'exclusiveMinimum':
      return `must be above ${String(p['limit'])}`;
    case 'minLength':
      return p['limit'] === 1 ? 'must not be empty' : `must be at least ${String(p['limit'])} characters long`;
    case 'maxLength':
      return `must be at most ${String(p['limit'])} characters long`;
    case 'minItems':
      return `must have at least ${String(p['limit'])} item${p['limit'] === 1 ? '' : 's'}`;
    case 'maxItems':
      return `must have at most ${String(p['limit'])} items`;
    case 'additionalProperties':
      return `unknown field ${JSON.stringify(p['additionalProperty'])}`;
    default:
      return e.message ?? `fails ${e.keyword}`;
  }
}

function dedupe(problems: ConfigProblem[]): ConfigProblem[] {
  const seen = new Set<string>();
  return problems.filter((p) => {
    const key = `${p.path}\0${p.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/** Freezes an object graph so no part of a loaded config can be changed by accident. */
export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

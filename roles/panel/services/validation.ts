/**
 * Input validation of the panel's services: JSON Schemas compiled once with Ajv (the validator
 * the contracts and Fastify use), failures as one ERR_VALIDATION AppError listing every bad field,
 * so the APIs, the admin pages and the CLI all reject the same input with the same words.
 */
import AjvModule, { type ErrorObject, type ValidateFunction } from 'ajv';
import { AppError } from '../../../src/core/app-error.ts';

export interface FieldProblem {
  field: string;
  rule: string;
  detail: string;
}

/** The error every service throws for bad input; `cause` carries the FieldProblem list. */
export function validationError(problems: FieldProblem[]): AppError {
  return new AppError('ERR_VALIDATION', problems.map((p) => p.detail).join('; '), { status: 422, cause: { problems } });
}

/** The FieldProblem list of a validation error (one generic entry for other errors). */
export function problemsOf(err: AppError): FieldProblem[] {
  const cause = err.cause as { problems?: FieldProblem[]; field?: string } | undefined;
  if (cause?.problems !== undefined) return cause.problems;
  return [{ field: cause?.field ?? '', rule: 'invalid', detail: err.message }];
}

/**
 * Runs a service call whose input was translated from a request (Pterodactyl's `user` is the
 * service's `owner_id`, say) and names the fields of its validation problems as the request did.
 */
export async function inRequestTerms<T>(names: Readonly<Record<string, string>>, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (!(err instanceof AppError) || err.code !== 'ERR_VALIDATION') throw err;
    throw validationError(
      problemsOf(err).map((p) => {
        const name = names[p.field];
        return name === undefined ? p : { ...p, field: name, detail: p.detail.replace(`the ${p.field} field`, `the ${name} field`) };
      }),
    );
  }
}

const ajv = new AjvModule.default({ allErrors: true, coerceTypes: false, useDefaults: true, removeAdditional: true, verbose: true });
// `trim: true` marks a top-level string property that createValidator trims before validating;
// `trim: 'null'` one that is trimmed and, when blank, becomes null.
ajv.addKeyword('trim');

const ARTICLE: Readonly<Record<string, string>> = { integer: 'an integer', object: 'an object', array: 'an array', string: 'a string', number: 'a number', boolean: 'true or false', null: 'null' };

/** What a rule asks for, said as Pterodactyl's messages say it (`must be at least 8 characters`), not in JSON Schema's words. */
function requirement(e: ErrorObject): string {
  const limit = Number(e.params['limit']);
  switch (e.keyword) {
    case 'minLength':
      return limit === 1 ? 'must not be empty' : `must be at least ${limit} characters`;
    case 'maxLength':
      return `must not be longer than ${limit} characters`;
    case 'minimum':
      return `must be at least ${limit}`;
    case 'maximum':
      return `must not be greater than ${limit}`;
    case 'exclusiveMinimum':
      return `must be greater than ${limit}`;
    case 'exclusiveMaximum':
      return `must be less than ${limit}`;
    case 'minItems':
      return limit === 1 ? 'must not be empty' : `must have at least ${limit} items`;
    case 'maxItems':
      return `must not have more than ${limit} items`;
    case 'enum':
      return `must be one of: ${(e.params['allowedValues'] as unknown[]).map((v) => String(v)).join(', ')}`;
    case 'type':
      return `must be ${String(e.params['type'])
        .split(',')
        .map((t) => ARTICLE[t] ?? t)
        .join(' or ')}`;
    default:
      return e.message ?? 'is invalid';
  }
}

function describe(e: ErrorObject): FieldProblem {
  const path = e.instancePath.replace(/^\//, '').replaceAll('/', '.');
  const field = e.keyword === 'required' ? [path, String(e.params.missingProperty)].filter(Boolean).join('.') : path;
  const label = field === '' ? 'the request' : `the ${field} field`;
  const detail =
    e.keyword === 'required'
      ? `${label} is required`
      : e.keyword === 'pattern' && e.parentSchema?.description !== undefined
        ? `${label} ${String(e.parentSchema.description)}`
        : `${label} ${requirement(e)}`;
  return { field, rule: e.keyword, detail };
}

/**
 * Compiles a schema into a function that returns the (defaulted) input or throws ERR_VALIDATION.
 * Top-level properties marked `trim: true` (the required names) are trimmed first, as the
 * reference framework's TrimStrings does: a blank one is "required", on an update too. Those
 * marked `trim: 'null'` are trimmed and a blank one is null, as its ConvertEmptyStringsToNull does.
 */
export function createValidator<T>(schema: object): (input: unknown) => T {
  const validate: ValidateFunction = ajv.compile({ type: 'object', additionalProperties: false, ...schema });
  const marked = (mark: true | 'null'): string[] =>
    Object.entries((schema as { properties?: Record<string, object> }).properties ?? {})
      .filter(([, s]) => (s as { trim?: unknown }).trim === mark)
      .map(([k]) => k);
  const trimmed = marked(true);
  const nullable = marked('null');
  return (input) => {
    let copy: unknown;
    try {
      copy = structuredClone(input ?? {});
    } catch (err) {
      // JSON nested thousands deep (a body parses fine) overflows the clone's recursion.
      if (!(err instanceof RangeError)) throw err;
      throw validationError([{ field: '', rule: 'depth', detail: 'the request is nested too deeply' }]);
    }
    const out = trimInput(copy, trimmed, nullable);
    const blank = trimmed.filter((k) => Object.hasOwn(copy as object, k) && !Object.hasOwn(out as object, k));
    const problems = blank.map((k) => ({ field: k, rule: 'required', detail: `the ${k} field is required` }));
    if (!validate(out)) problems.push(...(validate.errors ?? []).map(describe).filter((p) => !(p.rule === 'required' && blank.includes(p.field))));
    if (problems.length > 0) throw validationError(problems);
    return out as T;
  };
}

/**
 * Request strings as the reference framework's TrimStrings and ConvertEmptyStringsToNull leave
 * them: the `omitBlank` and `nullable` keys of a JSON object trimmed; a blank `omitBlank` key is
 * left out (so a required one is reported as required), a blank nullable one becomes null.
 * Anything that is not an object is returned as it is, for the validator to refuse. Pure.
 */
export function trimInput(input: unknown, omitBlank: readonly string[], nullable: readonly string[] = []): unknown {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return input;
  const out: Record<string, unknown> = { ...(input as Record<string, unknown>) };
  for (const k of [...omitBlank, ...nullable]) {
    const v = out[k];
    if (typeof v !== 'string') continue;
    const t = v.trim();
    if (t !== '') out[k] = t;
    else if (omitBlank.includes(k)) delete out[k];
    else out[k] = null;
  }
  return out;
}

/**
 * Compiles a check of a request body's outer shape, for a route that reshapes the body before a
 * service validates it (Pterodactyl's nested `limits` flattened, say): the body must be an object,
 * as createValidator requires (absent = `{}`), and each listed field, when present, must match its
 * schema. Returns the body itself; throws ERR_VALIDATION in createValidator's words.
 */
export function createShapeCheck(properties: Record<string, object> = {}): (input: unknown) => Record<string, unknown> {
  const validate: ValidateFunction = ajv.compile({ type: 'object', properties });
  return (input) => {
    const body = input ?? {};
    if (!validate(body)) throw validationError((validate.errors ?? []).map(describe));
    return body as Record<string, unknown>;
  };
}

export const USERNAME = { type: 'string', trim: true, minLength: 1, maxLength: 191, pattern: '^[a-zA-Z0-9_.-]+$', description: 'may only contain letters, digits, dots, dashes and underscores' };
// One mailbox, as a mail client would read it: the characters that address lists and display
// names use as syntax (`a,b@x` is two recipients, `joe<b@x>` is b@x) would send the account's mail
// to someone else, and control characters (NUL, C1) would reach mail headers and pages.
const ADDRESS_PART = String.raw`[^@\s\p{Cc}"(),:;<>[\]\\]+`;
export const EMAIL = { type: 'string', trim: true, maxLength: 191, pattern: `^${ADDRESS_PART}@${ADDRESS_PART}$`, description: 'must be a valid email address' };
/** A required name: trimmed, and blank is missing (see createValidator). */
export const NAME = { type: 'string', trim: true, minLength: 1, maxLength: 191 };
export const TEXT = { type: 'string', maxLength: 2000 };
/** Ids and counts fit a signed 32-bit column, as Pterodactyl's do: 1e300 is an integer to JSON Schema too. */
const INT_MAX = 2_147_483_647;
export const ID = { type: 'integer', minimum: 1, maximum: INT_MAX };
export const COUNT = { type: 'integer', minimum: 0, maximum: INT_MAX };
export const FLAG = { type: 'boolean' };
/**
 * A billing system's own id of a user or server (Pterodactyl's `external_id`, nullable, at most
 * 191 characters): trimmed, and blank is null (none), as Pterodactyl's request middleware leaves it.
 */
export const EXTERNAL_ID = { type: ['string', 'null'], trim: 'null', maxLength: 191 };

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

/** Compiles a schema into a function that returns the (defaulted) input or throws ERR_VALIDATION. */
export function createValidator<T>(schema: object): (input: unknown) => T {
  const validate: ValidateFunction = ajv.compile({ type: 'object', additionalProperties: false, ...schema });
  return (input) => {
    let copy: unknown;
    try {
      copy = structuredClone(input ?? {});
    } catch (err) {
      // JSON nested thousands deep (a body parses fine) overflows the clone's recursion.
      if (!(err instanceof RangeError)) throw err;
      throw validationError([{ field: '', rule: 'depth', detail: 'the request is nested too deeply' }]);
    }
    if (!validate(copy)) throw validationError((validate.errors ?? []).map(describe));
    return copy as T;
  };
}

export const USERNAME = { type: 'string', minLength: 1, maxLength: 191, pattern: '^[a-zA-Z0-9_.-]+$', description: 'may only contain letters, digits, dots, dashes and underscores' };
export const EMAIL = { type: 'string', maxLength: 191, pattern: '^[^@\\s]+@[^@\\s]+$', description: 'must be a valid email address' };
export const NAME = { type: 'string', minLength: 1, maxLength: 191 };
export const TEXT = { type: 'string', maxLength: 2000 };
/** Ids and counts fit a signed 32-bit column, as Pterodactyl's do: 1e300 is an integer to JSON Schema too. */
const INT_MAX = 2_147_483_647;
export const ID = { type: 'integer', minimum: 1, maximum: INT_MAX };
export const COUNT = { type: 'integer', minimum: 0, maximum: INT_MAX };
export const FLAG = { type: 'boolean' };

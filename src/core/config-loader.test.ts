import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Ajv2020Module from 'ajv/dist/2020.js';
import { ConfigError, expandEnv, loadConfigFile, loadConfigText, type ConfigSpec, type SchemaNode, type SchemaValidator } from './config-loader.ts';

interface Sample {
  name: string;
  interval: string;
  nested: { port: number; mode: string };
  list: { url: string }[];
}

const schema = {
  type: 'object',
  properties: {
    name: { type: 'string', default: 'x' },
    interval: { type: 'string', pattern: '^[0-9]+(ms|s|m|h|d)$', default: '5s' },
    nested: {
      type: 'object',
      default: {},
      properties: { port: { type: 'integer', minimum: 1, maximum: 65535, default: 8480 }, mode: { enum: ['a', 'b'], default: 'a' } },
    },
    list: { type: 'array', default: [], items: { type: 'object', required: ['url'], properties: { url: { type: 'string' } } } },
  },
};
const validate = new Ajv2020Module.default({ allErrors: true, useDefaults: true, strict: true }).compile(schema) as unknown as SchemaValidator<Sample>;
const spec: ConfigSpec<Sample> = {
  validate,
  schema: schema as SchemaNode,
  checks(config, problems) {
    if (config.interval === '0s') problems.push({ path: '/interval', message: 'must be a positive duration' });
  },
};

test('an empty file gives every default, frozen', () => {
  const { config, warnings } = loadConfigText('', 'empty.yaml', spec);
  assert.deepEqual(config, { name: 'x', interval: '5s', nested: { port: 8480, mode: 'a' }, list: [] });
  assert.deepEqual(warnings, []);
  assert.ok(Object.isFrozen(config) && Object.isFrozen(config.nested));
  assert.throws(() => {
    (config.nested as { port: number }).port = 1;
  }, TypeError);
});

test('every problem is reported at once with its JSON pointer', () => {
  const text = 'interval: soon\nnested:\n  port: 70000\n  mode: c\nlist:\n  - {}\nintervall: 5s\n';
  const err = (() => {
    try {
      loadConfigText(text, 'bad.yaml', spec);
    } catch (e) {
      return e;
    }
    return undefined;
  })();
  assert.ok(err instanceof ConfigError);
  const byPath = Object.fromEntries(err.problems.map((p) => [p.path, p.message]));
  assert.equal(byPath['/interval'], 'must be a duration such as 5s, 1m or 1h');
  assert.equal(byPath['/nested/port'], 'must be at most 65535');
  assert.equal(byPath['/nested/mode'], 'must be one of: "a", "b"');
  assert.equal(byPath['/list/0/url'], 'is required');
  assert.equal(err.problems.length, 4);
  assert.match(err.message, /bad\.yaml: 4 problems/);
  assert.deepEqual(err.warnings, ['/intervall: unknown key, ignored'], 'a typo is told in the same run as the problems');
  assert.match(err.message, /\n  warning: \/intervall: unknown key, ignored$/);
});

test('cross-field checks run together with schema checks', () => {
  assert.throws(
    () => loadConfigText('interval: 0s\nnested: {port: 0}\n', 'x.yaml', spec),
    (err: unknown) => err instanceof ConfigError && err.problems.length === 2 && err.problems.some((p) => p.message === 'must be a positive duration'),
  );
});

test('a key written with no value (YAML null) takes its default', () => {
  const { config, warnings } = loadConfigText('name:\nnested:\n  port:\n  mode:\nlist:\n', 'x.yaml', spec);
  assert.deepEqual(config, { name: 'x', interval: '5s', nested: { port: 8480, mode: 'a' }, list: [] });
  assert.deepEqual(warnings, []);
  assert.throws(() => loadConfigText('list:\n  - url:\n', 'x.yaml', spec), /\/list\/0\/url/, 'a required field without a default stays required');
});

test('a value outside a oneOf/anyOf gets one problem naming the forms; a wrong type only the type problem', () => {
  const unionSchema = { type: 'object', properties: { id: { type: 'string', default: '', anyOf: [{ const: '' }, { pattern: '^[a-z]{1,8}$' }] } } };
  const unionValidate = new Ajv2020Module.default({ allErrors: true, useDefaults: true, strict: true }).compile(unionSchema) as unknown as SchemaValidator<{ id: string }>;
  const unionSpec: ConfigSpec<{ id: string }> = { validate: unionValidate, schema: unionSchema as SchemaNode };
  const problems = (text: string): string[] => {
    try {
      loadConfigText(text, 'u.yaml', unionSpec);
      return [];
    } catch (err) {
      return (err as ConfigError).problems.map((p) => `${p.path}: ${p.message}`);
    }
  };
  assert.deepEqual(problems('id: "Not OK"\n'), ['/id: must be "" or match ^[a-z]{1,8}$']);
  assert.deepEqual(problems('id: 5\n'), ['/id: must be string']);
  assert.deepEqual(problems('id: ok\n'), []);
});

test('unknown keys are ignored with a warning naming them', () => {
  const { config, warnings } = loadConfigText('nmae: typo\nnested: {prot: 1}\n', 'x.yaml', spec);
  assert.equal(config.name, 'x');
  assert.deepEqual(warnings, ['/nmae: unknown key, ignored', '/nested/prot: unknown key, ignored']);
});

test('${ENV} references are expanded; unknown ones stay literal', () => {
  assert.deepEqual(expandEnv({ a: 'x-${HK_TEST_A}-${HK_TEST_MISSING}', b: ['${HK_TEST_A}'], c: 3 }, { HK_TEST_A: 'v' }), {
    a: 'x-v-${HK_TEST_MISSING}',
    b: ['v'],
    c: 3,
  });
  process.env['HK_TEST_NAME'] = 'from-env';
  assert.equal(loadConfigText('name: ${HK_TEST_NAME}\n', 'x.yaml', spec).config.name, 'from-env');
  const unset = loadConfigText('name: ${HK_TEST_UNSET_VAR}\n', 'x.yaml', spec);
  assert.equal(unset.config.name, '${HK_TEST_UNSET_VAR}');
  assert.deepEqual(unset.warnings, ['/name: environment variable HK_TEST_UNSET_VAR is not set; ${HK_TEST_UNSET_VAR} stays literal']);
});

test('a whole ${ENV} reference to a number or boolean field takes that type', () => {
  const schema: SchemaNode = { type: 'object', properties: { port: { type: 'integer' }, on: { type: 'boolean' }, name: { type: 'string' }, ports: { type: 'array', items: { type: 'integer' } } } };
  const env = { P: '8480', B: 'true', N: '0042', X: 'eighty' };
  assert.deepEqual(expandEnv({ port: '${P}', on: '${B}', name: '${N}', ports: ['${P}', '${X}'] }, env, schema), { port: 8480, on: true, name: '0042', ports: [8480, 'eighty'] });
  assert.deepEqual(expandEnv({ port: 'x${P}' }, env, schema), { port: 'x8480' }, 'only a whole reference is typed');
});

test('YAML syntax errors name the line; a missing file is one clear problem', () => {
  assert.throws(() => loadConfigText('a: [1, 2\n', 'x.yaml', spec), (err: unknown) => err instanceof ConfigError && /line \d+/.test(err.problems[0]?.message ?? ''));
  assert.throws(() => loadConfigText('- 1\n- 2\n', 'x.yaml', spec), /mapping/);
  const dir = mkdtempSync(join(tmpdir(), 'hk-cfg-'));
  assert.throws(() => loadConfigFile(join(dir, 'missing.yaml'), spec), /cannot read config: file not found/);
  writeFileSync(join(dir, 'ok.yaml'), 'name: y\n');
  assert.equal(loadConfigFile(join(dir, 'ok.yaml'), spec).config.name, 'y');
});

test('a directory, a binary file, an alias inside its own anchor and an alias bomb are each one clear problem', () => {
  const dir = mkdtempSync(join(tmpdir(), 'hk-cfg-'));
  const problem = (fn: () => unknown): string => {
    try {
      fn();
    } catch (err) {
      if (err instanceof ConfigError) return err.problems.map((p) => p.message).join('; ');
      throw err;
    }
    return 'no problem';
  };
  assert.equal(problem(() => loadConfigFile(dir, spec)), 'cannot read config: it is a directory, not a file');
  writeFileSync(join(dir, 'plain'), 'x');
  assert.equal(problem(() => loadConfigFile(join(dir, 'plain', 'config.yaml'), spec)), 'cannot read config: a part of its path is a file, not a directory');
  assert.throws(() => loadConfigFile('', spec), (err: unknown) => err instanceof ConfigError && err.source === '(empty config path)' && err.problems[0]?.message === 'no config file named: the config path is empty');
  assert.equal(problem(() => loadConfigText('name: \0\x01\x02garbage', 'x.yaml', spec)), 'not a text file (it holds NUL bytes): give the YAML config file');
  assert.equal(problem(() => loadConfigText('a: &a [*a]\n', 'x.yaml', spec)), 'YAML error: an alias refers to the anchor it is inside');
  assert.match(problem(() => loadConfigText(`a: &a [1]\nb: [${Array.from({ length: 120 }, () => '*a').join(', ')}]\n`, 'x.yaml', spec)), /^YAML error: Excessive alias count/);
});

test('a file of two YAML documents and a file that is not UTF-8 are each one problem in plain words', () => {
  assert.throws(() => loadConfigText('name: a\n---\nname: b\n', 'x.yaml', spec), (err: unknown) => err instanceof ConfigError && /more than one YAML document \(a second ---\)/.test(err.problems[0]?.message ?? '') && !/parseAllDocuments/.test(err.problems[0]?.message ?? ''));
  const dir = mkdtempSync(join(tmpdir(), 'hk-cfg-'));
  writeFileSync(join(dir, 'latin1.yaml'), Buffer.from('name: caf\xe9\n', 'latin1'));
  assert.throws(() => loadConfigFile(join(dir, 'latin1.yaml'), spec), (err: unknown) => err instanceof ConfigError && err.problems.length === 1 && err.problems[0]?.message === 'not UTF-8 text: save the file as UTF-8');
  writeFileSync(join(dir, 'utf8.yaml'), 'name: café\n');
  assert.equal(loadConfigFile(join(dir, 'utf8.yaml'), spec).config.name, 'café');
});

import { createRequire } from 'node:module';
import type { Ajv, ErrorObject, ValidateFunction } from 'ajv';
import type { RegExpEngine } from 'ajv/dist/types/index.js';
import { LIMITS } from '../config/index.js';
import { formatsLinear } from './formats.js';
import { regexCompile } from './regex-engine.js';
import { UNIQUE_ITEMS_LINEAR } from './unique-items.js';

type AjvClass = new (opts: object) => Ajv;
/**
 * ajv loads with the first schema compiled, not with this module: most commands (a DAG without
 * schemas, `--help`) compile none, and loading it is a tenth of the CLI's start-up (docs/benchmarks.md).
 * It is CommonJS, so a synchronous require does.
 */
function ajvLoad(): { draft07: AjvClass; draft2019: AjvClass; draft2020: AjvClass; addFormats: (a: Ajv) => void } {
  const require = createRequire(import.meta.url);
  const plugin = require('ajv-formats') as { default?: (a: Ajv) => void } & ((a: Ajv) => void);
  return {
    draft07: (require('ajv') as { Ajv: AjvClass }).Ajv,
    draft2019: (require('ajv/dist/2019.js') as { Ajv2019: AjvClass }).Ajv2019,
    draft2020: (require('ajv/dist/2020.js') as { Ajv2020: AjvClass }).Ajv2020,
    addFormats: plugin.default ?? plugin,
  };
}

/** The JSON Schema dialects dagent compiles, by their `$schema` URI; a schema without `$schema` is 2020-12. */
const DIALECTS = {
  'https://json-schema.org/draft/2020-12/schema': 'draft2020',
  'https://json-schema.org/draft/2019-09/schema': 'draft2019',
  'http://json-schema.org/draft-07/schema': 'draft07',
} as const;
type Dialect = (typeof DIALECTS)[keyof typeof DIALECTS];

/** `pattern` and `patternProperties` run in the linear-time engine: a schema's regex cannot backtrack. */
const linearRegExp: RegExpEngine = Object.assign((pattern: string, flags: string) => {
  const compiled = regexCompile(pattern, flags);
  if ('error' in compiled) throw new Error(`pattern ${JSON.stringify(pattern)}: ${compiled.error}`);
  return compiled;
}, { code: 'dagentLinearRegExp' });

/**
 * A new ajv instance for `d`. ajv keeps every function it compiles, and every schema, in its instance's scope
 * for as long as the instance lives (ajv.removeSchema clears its maps, not the scope): one shared instance grew
 * by one validate function per compile (20,015 after 20,000 distinct schemas, while the cache held 500), and six
 * DAGs of 10,000 distinct schemas took the server's heap from 38 to 450 MB. So each compiled schema gets an
 * instance of its own, freed with its cache entry: ~0.5 ms more per compile (of 1-3 ms), a few KB per entry.
 * `metaSchemas`: register the dialect's meta-schemas, which only a schema that `$ref`s one needs (~0.3 ms).
 */
function ajvCreate(d: Dialect, metaSchemas: boolean): Ajv {
  // strictSchema refuses unknown keywords (a misspelt "requird" would otherwise check nothing);
  // strictTypes and strictRequired would refuse ordinary schemas that leave `type` implicit.
  // The meta-schema check is the checker's (below), once per dialect, not once per instance.
  const opts = {
    allErrors: true, strictSchema: true, strictTypes: false, strictTuples: false, strictRequired: false, allowUnionTypes: true,
    validateSchema: false, meta: metaSchemas, code: { regExp: linearRegExp },
  };
  const lib = ajvLoad();
  const ajv = new lib[d](opts);
  // What an agent sends is checked in time linear in its size: the formats' regexes run in the
  // linear engine, and uniqueItems hashes instead of comparing every pair (see each file).
  ajv.removeKeyword('uniqueItems');
  ajv.addKeyword(UNIQUE_ITEMS_LINEAR);
  lib.addFormats(ajv);
  for (const [name, format] of Object.entries(formatsLinear())) ajv.addFormat(name, format);
  return ajv;
}

/**
 * Per dialect, the instance that checks schemas against their meta-schema, and compiles nothing else: it holds
 * the meta-schema's validate functions and no DAG's schema, so it does not grow however many schemas it checks.
 */
const checkers = new Map<Dialect, Ajv>();
function checkerFor(d: Dialect): Ajv {
  let ajv = checkers.get(d);
  if (!ajv) {
    ajv = ajvCreate(d, true);
    checkers.set(d, ajv);
  }
  return ajv;
}

export interface SchemaViolation { pointer: string; message: string }

export type CompiledSchema = { validate: (value: unknown) => SchemaViolation[] } | { error: string; pointer?: string };

/**
 * Compiled once per distinct schema text per process (ajv compiles to code, slow to build,
 * fast to run), least recently used first out: a Map keeps insertion order, and a hit is
 * re-inserted at the end. An entry holds the ajv instance its schema was compiled in, and
 * nothing else does: evicting the entry frees both.
 */
const compiled = new Map<string, { result: CompiledSchema; ajv?: Ajv }>();

/** Compile a JSON Schema (2020-12 by default, 2019-09 or draft-07 by `$schema`). An error names what is wrong with the schema. */
export function schemaCompile(schema: unknown): CompiledSchema {
  const text = JSON.stringify(schema);
  const hit = compiled.get(text);
  if (hit) {
    compiled.delete(text);
    compiled.set(text, hit);
    return hit.result;
  }
  const entry = schemaCompileUncached(schema, text);
  while (compiled.size >= LIMITS.schemaCacheEntries) compiled.delete(compiled.keys().next().value!);
  compiled.set(text, entry);
  return entry.result;
}

/** How many compiled schemas this process holds (bounded by LIMITS.schemaCacheEntries). */
export function schemaCacheSize(): number {
  return compiled.size;
}

/**
 * What the compiler keeps alive: its ajv instances (the meta-schema checkers and one per cache entry)
 * and the functions compiled in their scopes, all told.
 */
export function schemaCompilerHeld(): { instances: number; validateFunctions: number } {
  const instances = [...checkers.values(), ...[...compiled.values()].flatMap((e) => (e.ajv ? [e.ajv] : []))];
  const validateFunctions = instances.reduce((n, ajv) => n + ((ajv.scope.get() as Record<string, unknown[] | undefined>).validate?.length ?? 0), 0);
  return { instances: instances.length, validateFunctions };
}

function schemaCompileUncached(schema: unknown, text: string): { result: CompiledSchema; ajv?: Ajv } {
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return { result: { error: 'a JSON Schema must be an object' } };
  const uri = (schema as { $schema?: unknown }).$schema;
  let dialect: Dialect = 'draft2020';
  if (uri !== undefined) {
    const known = typeof uri === 'string' ? DIALECTS[uri.replace(/#$/, '') as keyof typeof DIALECTS] : undefined;
    if (!known) return { result: { error: `unsupported $schema ${JSON.stringify(uri)}: use ${Object.keys(DIALECTS).join(', ')}`, pointer: '/$schema' } };
    dialect = known;
  }
  let ajv: Ajv;
  let validate: ValidateFunction;
  try {
    // The meta-schema check first: its errors carry a pointer into the schema, compile errors do not.
    const checker = checkerFor(dialect);
    if (!checker.validateSchema(schema)) {
      // The first error is the specific one; the rest are the alternatives of the meta-schema's anyOf.
      const [first] = violationsOf(checker.errors);
      return { result: { error: `invalid JSON Schema: ${first ? `${first.pointer} ${first.message}` : 'rejected by its meta-schema'}`, pointer: first?.pointer } };
    }
    // Isolation: the schema's `$id`s (nested ones included) are registered in its own instance only, so
    // one cannot squat another DAG's id nor be reached by another schema's `$ref`.
    // Every meta-schema's URI is on json-schema.org: a schema that never names it cannot `$ref` one.
    ajv = ajvCreate(dialect, text.includes('json-schema.org'));
    validate = ajv.compile(schema);
  } catch (e) {
    const message = (e as Error).message;
    const keyword = /unknown keyword: "([^"]+)"/.exec(message)?.[1];
    return { result: { error: `invalid JSON Schema: ${message.replace(/^strict mode: /, '')}`, pointer: keyword ? keyPointer(schema, keyword) : undefined } };
  }
  return { result: { validate: (value) => (validate(value) ? [] : violationsOf(validate.errors)) }, ajv };
}

function violationsOf(errors: ErrorObject[] | null | undefined): SchemaViolation[] {
  return (errors ?? []).map((e) => {
    const extra = e.keyword === 'additionalProperties' ? ` (${JSON.stringify((e.params as { additionalProperty: string }).additionalProperty)})`
      : e.keyword === 'enum' ? ` (${(e.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(', ')})` : '';
    return { pointer: e.instancePath || '/', message: `${e.message ?? e.keyword}${extra}` };
  });
}

/** JSON pointer of the first object key named `key` (depth first): where an unknown keyword was written. */
function keyPointer(node: unknown, key: string, at = ''): string | undefined {
  if (typeof node !== 'object' || node === null) return undefined;
  if (!Array.isArray(node) && Object.hasOwn(node, key)) return `${at}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`;
  for (const [k, v] of Object.entries(node)) {
    const found = keyPointer(v, key, `${at}/${k.replaceAll('~', '~0').replaceAll('/', '~1')}`);
    if (found) return found;
  }
  return undefined;
}

import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import formatsPlugin from 'ajv-formats';

/** The JSON Schema dialects dagent compiles, by their `$schema` URI; a schema without `$schema` is 2020-12. */
const DIALECTS = {
  'https://json-schema.org/draft/2020-12/schema': 'draft2020',
  'https://json-schema.org/draft/2019-09/schema': 'draft2019',
  'http://json-schema.org/draft-07/schema': 'draft07',
} as const;
type Dialect = (typeof DIALECTS)[keyof typeof DIALECTS];

// ajv-formats is CommonJS with `exports.default`: under NodeNext the default import is the module object.
const addFormats = ((formatsPlugin as unknown as { default?: typeof formatsPlugin }).default ?? formatsPlugin) as unknown as (a: Ajv) => void;

const engines = new Map<Dialect, Ajv>();
function engineFor(d: Dialect): Ajv {
  let ajv = engines.get(d);
  if (!ajv) {
    // strictSchema refuses unknown keywords (a misspelt "requird" would otherwise check nothing);
    // strictTypes and strictRequired would refuse ordinary schemas that leave `type` implicit.
    const opts = { allErrors: true, strictSchema: true, strictTypes: false, strictTuples: false, strictRequired: false, allowUnionTypes: true };
    ajv = d === 'draft2020' ? new Ajv2020(opts) : d === 'draft2019' ? new Ajv2019(opts) : new Ajv(opts);
    addFormats(ajv);
    engines.set(d, ajv);
  }
  return ajv;
}

export interface SchemaViolation { pointer: string; message: string }

export type CompiledSchema = { validate: (value: unknown) => SchemaViolation[] } | { error: string; pointer?: string };

// Compiled once per distinct schema text per process: ajv compiles to code, which is slow to build and fast to run.
const compiled = new Map<string, CompiledSchema>();
const MAX_CACHED = 500;

/** Compile a JSON Schema (2020-12 by default, 2019-09 or draft-07 by `$schema`). An error names what is wrong with the schema. */
export function schemaCompile(schema: unknown): CompiledSchema {
  const text = JSON.stringify(schema);
  const hit = compiled.get(text);
  if (hit) return hit;
  const result = schemaCompileUncached(schema);
  if (compiled.size >= MAX_CACHED) compiled.delete(compiled.keys().next().value!);
  compiled.set(text, result);
  return result;
}

function schemaCompileUncached(schema: unknown): CompiledSchema {
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return { error: 'a JSON Schema must be an object' };
  const uri = (schema as { $schema?: unknown }).$schema;
  let dialect: Dialect = 'draft2020';
  if (uri !== undefined) {
    const known = typeof uri === 'string' ? DIALECTS[uri.replace(/#$/, '') as keyof typeof DIALECTS] : undefined;
    if (!known) return { error: `unsupported $schema ${JSON.stringify(uri)}: use ${Object.keys(DIALECTS).join(', ')}`, pointer: '/$schema' };
    dialect = known;
  }
  const ajv = engineFor(dialect);
  let validate: ValidateFunction;
  try {
    // The meta-schema check first: its errors carry a pointer into the schema, compile errors do not.
    if (!ajv.validateSchema(schema)) {
      // The first error is the specific one; the rest are the alternatives of the meta-schema's anyOf.
      const [first] = violationsOf(ajv.errors);
      return { error: `invalid JSON Schema: ${first ? `${first.pointer} ${first.message}` : 'rejected by its meta-schema'}`, pointer: first?.pointer };
    }
    validate = ajv.compile(schema);
  } catch (e) {
    const message = (e as Error).message;
    const keyword = /unknown keyword: "([^"]+)"/.exec(message)?.[1];
    return { error: `invalid JSON Schema: ${message.replace(/^strict mode: /, '')}`, pointer: keyword ? keyPointer(schema, keyword) : undefined };
  }
  return {
    validate: (value) => (validate(value) ? [] : violationsOf(validate.errors)),
  };
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

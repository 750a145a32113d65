import { LineCounter } from 'yaml';
import { z } from 'zod';
import { LIMITS, limitEnvName } from '../../config/index.js';
import { yamlDocumentParse } from '../../yaml-document.js';
import { projectFileRead, type ProjectRoots } from '../project-files.js';
import { schemaCompile } from '../schema-compiler.js';
import type { DagResolution, InlineStepKind, StepProblem } from './kind.js';
/** Most violations listed in one verdict; the rest are counted. */
const MAX_REASONS = 50;

const fileSchema = z.strictObject({
  kind: z.literal('json-schema'),
  schema: z.record(z.string(), z.unknown()).optional(),
  schema_file: z.string().max(500).optional().describe('JSON or YAML file holding the schema, relative to the DAG file'),
}).describe('JSON Schema (2020-12 by default; 2019-09 or draft-07 by $schema), inline or from a file');

export interface JsonSchemaStep { kind: 'json-schema'; schema: Record<string, unknown>; schemaFile?: string }

/** The output must satisfy a JSON Schema; each violation is reported with its JSON pointer. */
export const jsonSchemaStep: InlineStepKind<'json-schema', typeof fileSchema, JsonSchemaStep> = {
  kind: 'json-schema',
  mode: 'inline',
  fileSchema,
  async resolve(s, ctx) {
    if ((s.schema === undefined) === (s.schema_file === undefined)) {
      return [{ path: [], message: 'a json-schema step needs exactly one of schema or schema_file' }];
    }
    const fromFile = s.schema_file !== undefined ? await schemaFileRead(s.schema_file, ctx) : undefined;
    if (fromFile && 'error' in fromFile) return [{ path: ['schema_file'], message: fromFile.error }];
    const schema = fromFile ? fromFile.schema : s.schema!;
    const compiled = schemaCompileOnce(schema, ctx.dag);
    if ('limit' in compiled) {
      return [{ path: [s.schema_file !== undefined ? 'schema_file' : 'schema'], message: compiled.limit, limit: true }];
    }
    if ('error' in compiled) {
      const problem: StepProblem = s.schema_file !== undefined
        ? { path: ['schema_file'], message: `${s.schema_file}${compiled.pointer ? ` at ${compiled.pointer}` : ''}: ${compiled.error}` }
        : { path: ['schema', ...pointerPath(compiled.pointer)], message: compiled.error };
      return [problem];
    }
    return { kind: 'json-schema', schema, ...(s.schema_file !== undefined ? { schemaFile: s.schema_file } : {}) };
  },
  check(step, output) {
    const compiled = schemaCompile(step.schema);
    // Refused at submission; reaching here means the stored spec was edited by hand.
    if ('error' in compiled) return { pass: false, reasons: [`the schema itself is invalid: ${compiled.error}`] };
    const violations = compiled.validate(output);
    const reasons = violations.slice(0, MAX_REASONS).map((v) => `${v.pointer} ${v.message}`);
    if (violations.length > MAX_REASONS) reasons.push(`… and ${violations.length - MAX_REASONS} more`);
    return { pass: violations.length === 0, reasons };
  },
};

/**
 * What compiling `schema` finds wrong, once per distinct schema in a DAG: the tasks of a generated DAG often
 * share a few schemas, and each is compiled once however many steps use it. More distinct schemas than
 * LIMITS.schemasPerDag is a limit passed, before the next is compiled.
 */
function schemaCompileOnce(schema: Record<string, unknown>, dag: DagResolution): { error: string; pointer?: string } | { limit: string } | { ok: true } {
  const text = JSON.stringify(schema);
  if (dag.schemas.has(text)) return dag.schemas.get(text) ?? { ok: true };
  if (dag.schemas.size >= LIMITS.schemasPerDag) {
    return { limit: `more than ${LIMITS.schemasPerDag} distinct JSON Schemas in one DAG (${limitEnvName('schemasPerDag')}): steps that check the same shape can share one schema (a YAML anchor, or a schema_file)` };
  }
  const compiled = schemaCompile(schema);
  const fault = 'error' in compiled ? { error: compiled.error, pointer: compiled.pointer } : undefined;
  dag.schemas.set(text, fault);
  return fault ?? { ok: true };
}

/** The schema a step's schema_file holds: inside the project, a regular file, size-capped; errors never quote it. */
async function schemaFileRead(written: string, where: ProjectRoots): Promise<{ schema: Record<string, unknown> } | { error: string }> {
  const read = await projectFileRead(written, where);
  if ('error' in read) return { error: `schema file ${read.error}` };
  const shown = written;
  let schema: unknown;
  try {
    // YAML is a superset of JSON: one parser reads both kinds of schema file.
    const doc = await yamlDocumentParse(read.text, { lineCounter: new LineCounter() });
    // Where, not what: the parser's message would quote the file.
    if (doc.errors.length) return { error: `${shown} is neither JSON nor YAML (${lineColumn(read.text, doc.errors[0]!.pos[0])})` };
    schema = doc.toJS();
  } catch {
    return { error: `${shown} is neither JSON nor YAML` };
  }
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return { error: `${shown} must hold a JSON Schema object` };
  return { schema: schema as Record<string, unknown> };
}

/** `line L, column C` of an offset in a text. */
function lineColumn(text: string, offset: number): string {
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  return `line ${line}, column ${offset - before.lastIndexOf('\n')}`;
}

/** `/properties/a~1b/type` → ['properties', 'a/b', 'type'] (numeric segments as indices). */
function pointerPath(pointer: string | undefined): (string | number)[] {
  if (!pointer || pointer === '/') return [];
  return pointer.split('/').slice(1).map((s) => {
    const k = s.replaceAll('~1', '/').replaceAll('~0', '~');
    return /^\d+$/.test(k) ? Number(k) : k;
  });
}

import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { parse as yamlParse } from 'yaml';
import type { z } from 'zod';
import type { validationStepSchema } from '../dag/file-schema.js';
import { durationSeconds } from '../dag/durations.js';
import type { Path } from '../dag/locate.js';
import { schemaCompile } from './json-schema.js';
import { TEST_STEP_DEFAULT_TIMEOUT_SEC, type ValidationStep } from './steps.js';

type StepFile = z.infer<typeof validationStepSchema>;
export interface StepProblem { path: Path; message: string }

const MAX_SCHEMA_FILE_BYTES = 1024 * 1024;

/**
 * A task's `output.validation` as stored steps: schema files read (relative to
 * `baseDir`, the DAG file's directory), every schema compiled and every pattern
 * built, so a bad one is refused at submission with its location, not at completion.
 */
export function validationResolve(
  v: StepFile | StepFile[] | undefined, at: Path, baseDir: string,
): { steps: ValidationStep[]; problems: StepProblem[] } {
  const listed = Array.isArray(v) ? v : v ? [v] : [];
  const steps: ValidationStep[] = [];
  const problems: StepProblem[] = [];
  listed.forEach((s, i) => {
    const p = Array.isArray(v) ? [...at, i] : at;
    const step = stepResolve(s, p, baseDir, problems);
    if (step) steps.push(step);
  });
  return { steps, problems };
}

function stepResolve(s: StepFile, p: Path, baseDir: string, problems: StepProblem[]): ValidationStep | undefined {
  switch (s.kind) {
    case 'none': return undefined;
    case 'json-schema': {
      if ((s.schema === undefined) === (s.schema_file === undefined)) {
        problems.push({ path: p, message: 'a json-schema step needs exactly one of schema or schema_file' });
        return undefined;
      }
      const fromFile = s.schema_file !== undefined ? schemaFileRead(path.resolve(baseDir, s.schema_file), s.schema_file) : undefined;
      if (fromFile && 'error' in fromFile) {
        problems.push({ path: [...p, 'schema_file'], message: fromFile.error });
        return undefined;
      }
      const schema = fromFile ? fromFile.schema : s.schema!;
      const compiled = schemaCompile(schema);
      if ('error' in compiled) {
        if (s.schema_file !== undefined) problems.push({ path: [...p, 'schema_file'], message: `${s.schema_file}${compiled.pointer ? ` at ${compiled.pointer}` : ''}: ${compiled.error}` });
        else problems.push({ path: [...p, 'schema', ...pointerPath(compiled.pointer)], message: compiled.error });
        return undefined;
      }
      return { kind: 'json-schema', schema, ...(s.schema_file !== undefined ? { schemaFile: s.schema_file } : {}) };
    }
    case 'regex': {
      try {
        new RegExp(s.pattern, s.flags);
      } catch (e) {
        problems.push({ path: [...p, 'pattern'], message: `not a valid regular expression: ${(e as Error).message}` });
        return undefined;
      }
      return { kind: 'regex', pattern: s.pattern, ...(s.flags ? { flags: s.flags } : {}), ...(s.field !== undefined ? { field: s.field } : {}) };
    }
    case 'test':
      return {
        kind: 'test',
        command: s.command,
        cwd: path.resolve(baseDir, s.cwd ?? '.'),
        timeoutSec: s.timeout === undefined ? TEST_STEP_DEFAULT_TIMEOUT_SEC : durationSeconds(s.timeout),
        env: s.env ?? {},
      };
    case 'llm-judge':
      return { kind: 'llm-judge', rubric: s.rubric, threshold: s.threshold, ...(s.model ? { model: s.model } : {}) };
  }
}

function schemaFileRead(file: string, shown: string): { schema: Record<string, unknown> } | { error: string } {
  let text: string;
  try {
    if (statSync(file).size > MAX_SCHEMA_FILE_BYTES) return { error: `${shown} is larger than ${MAX_SCHEMA_FILE_BYTES} bytes` };
    text = readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return { error: code === 'ENOENT' ? `schema file ${shown} not found (looked in ${path.dirname(file)})` : `cannot read ${shown}: ${(e as Error).message}` };
  }
  let schema: unknown;
  try {
    // YAML is a superset of JSON: one parser reads both kinds of schema file.
    schema = yamlParse(text, { prettyErrors: true });
  } catch (e) {
    return { error: `${shown} is neither JSON nor YAML: ${(e as Error).message.split('\n')[0]}` };
  }
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return { error: `${shown} must hold a JSON Schema object` };
  return { schema: schema as Record<string, unknown> };
}

/** `/properties/a~1b/type` → ['properties', 'a/b', 'type'] (numeric segments as indices). */
function pointerPath(pointer: string | undefined): (string | number)[] {
  if (!pointer || pointer === '/') return [];
  return pointer.split('/').slice(1).map((s) => {
    const k = s.replaceAll('~1', '/').replaceAll('~0', '~');
    return /^\d+$/.test(k) ? Number(k) : k;
  });
}

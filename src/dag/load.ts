import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { LineCounter, parseDocument, type Document } from 'yaml';
import type { z } from 'zod';
import { DagValidationError, type SpecProblem } from '../errors.js';
import { dagFileSchema, objectKeysAt, type DagFile } from './file-schema.js';
import { pathFormat, positionOf, type Path } from './locate.js';
import { paramsResolve, paramsSubstitute, type ParamProblem } from './params.js';
import { dagFileCheck } from './check.js';
import { dagFileNormalize } from './normalize.js';
import { closestMatch, didYouMean } from './suggest.js';
import type { DagSpec } from './spec.js';

export const MAX_FILE_BYTES = 1024 * 1024;

export interface LoadOptions {
  /** --param values, as given on the command line. */
  params?: Record<string, string>;
  /** Accept --param names this file does not declare (several files submitted together). */
  ignoreUndeclaredParams?: boolean;
}

/** Read, check and normalize one DAG file. Throws DagValidationError listing every problem with file:line:col. */
export function dagFileLoad(file: string, opts: LoadOptions = {}): DagSpec {
  const display = path.relative(process.cwd(), file) || file;
  let size: number;
  try {
    size = statSync(file).size;
  } catch (e) {
    throw new DagValidationError([{ file: display, line: 0, column: 0, path: '', message: `cannot read: ${(e as Error).message}` }]);
  }
  if (size > MAX_FILE_BYTES) {
    throw new DagValidationError([{ file: display, line: 1, column: 1, path: '', message: `file is ${size} bytes; the limit is ${MAX_FILE_BYTES}` }]);
  }
  return dagSourceLoad(readFileSync(file, 'utf8'), display, opts);
}

/** Same as dagFileLoad, from a string; `file` is the name used in messages. */
export function dagSourceLoad(source: string, file: string, opts: LoadOptions = {}): DagSpec {
  const lc = new LineCounter();
  const doc = parseDocument(source, { lineCounter: lc, uniqueKeys: true, prettyErrors: false, strict: true });
  const at = (p: Path, message: string, atKey = false): SpecProblem => {
    const pos = positionOf(doc, lc, p, atKey);
    return { file, line: pos.line, column: pos.col, path: pathFormat(p), message };
  };

  if (doc.errors.length) {
    throw new DagValidationError(doc.errors.map((e) => {
      const pos = lc.linePos(e.pos[0]);
      const rest = source.slice(e.pos[0]);
      return { file, line: pos.line, column: pos.col, path: '', message: yamlMessage(e.code, e.message, rest.slice(0, rest.search(/:|\n|$/))) };
    }));
  }
  const raw = doc.toJS({ maxAliasCount: 100 }) as unknown;
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new DagValidationError([at([], 'a DAG file must be a YAML mapping with name and tasks')]);
  }

  // Params first: their values are substituted before the rest is type-checked.
  const rawParams = (raw as Record<string, unknown>).params ?? {};
  const paramsParsed = dagFileSchema.shape.params.safeParse(rawParams);
  if (!paramsParsed.success) throw new DagValidationError(zodProblems(paramsParsed.error, ['params'], raw, at));
  const { values, missing, problems: paramProblems } = paramsResolve(paramsParsed.data ?? {}, opts.params ?? {}, { ignoreUndeclared: opts.ignoreUndeclaredParams });
  const substituted: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(raw)) substituted[k] = k === 'params' ? v : paramsSubstitute(v, values, [k], paramProblems, missing);
  if (paramProblems.length) throw new DagValidationError(paramProblems.map((p: ParamProblem) => at(p.path, p.message)));

  const parsed = dagFileSchema.safeParse(substituted);
  if (!parsed.success) throw new DagValidationError(zodProblems(parsed.error, [], substituted, at));
  const semantic = dagFileCheck(parsed.data as DagFile);
  if (semantic.length) throw new DagValidationError(semantic.map((p) => at(p.path, p.message, p.atKey)));
  return dagFileNormalize(parsed.data as DagFile, values, file);
}

type At = (p: Path, message: string, atKey?: boolean) => SpecProblem;

function zodProblems(error: z.ZodError, prefix: Path, root: unknown, at: At): SpecProblem[] {
  const out: SpecProblem[] = [];
  for (const issue of error.issues) {
    const p = [...prefix, ...(issue.path as (string | number)[])];
    if (issue.code === 'unrecognized_keys') {
      const allowed = objectKeysAt(p) ?? [];
      for (const k of issue.keys) out.push(at([...p, k], `unknown field "${k}"${unknownFieldHint(k, p, allowed)}`, true));
    } else if (issue.code === 'invalid_type' && valueAt(root, issue.path as Path) === undefined) {
      out.push(at(p, 'required field is missing'));
    } else if (issue.code === 'invalid_union') {
      out.push(at(p, unionMessage(issue)));
    } else if (issue.code === 'invalid_value') {
      const got = valueAt(root, issue.path as Path);
      const options = issue.values.map(String);
      out.push(at(p, `must be one of ${options.join(', ')}${typeof got === 'string' ? didYouMean(got, options) : ''}`));
    } else {
      out.push(at(p, issue.message.replace(/^Invalid input: /, '')));
    }
  }
  return out;
}

function unionMessage(issue: z.core.$ZodIssueInvalidUnion): string {
  if (issue.discriminator) return `kind must be one of json-schema, regex, test, llm-judge, none`;
  // Report the branch whose type matched: its complaint is the specific one.
  for (const branch of issue.errors) {
    const specific = branch.find((i) => i.code !== 'invalid_type');
    if (specific && branch.every((i) => i.code !== 'invalid_type')) return specific.message.replace(/^Invalid input: /, '');
  }
  const expected = [...new Set(issue.errors.flatMap((b) => b.filter((i) => i.code === 'invalid_type').map((i) => (i as { expected: string }).expected)))];
  return `expected ${expected.join(' or ') || 'a different value'}`;
}

/** A field written one level too high (a spec field on the task) is a common slip: say where it belongs. */
function unknownFieldHint(key: string, p: Path, allowed: string[]): string {
  const isTaskLevel = p.length === 2 && p[0] === 'tasks';
  const here = closestMatch(key, allowed);
  if (here || !isTaskLevel) return didYouMean(key, allowed);
  const inSpec = closestMatch(key, objectKeysAt(['spec']) ?? []);
  if (inSpec) return ` (did you mean spec.${inSpec}?)`;
  const inConstraints = closestMatch(key, objectKeysAt(['constraints']) ?? []);
  return inConstraints ? ` (did you mean spec.constraints.${inConstraints}?)` : '';
}

function valueAt(root: unknown, p: Path): unknown {
  let v = root;
  for (const seg of p) v = v && typeof v === 'object' ? (v as Record<string | number, unknown>)[seg] : undefined;
  return v;
}

function yamlMessage(code: string, message: string, text: string): string {
  if (code === 'DUPLICATE_KEY') return `duplicate key "${text.trim()}"`;
  return `invalid YAML: ${message.split('\n')[0]}`;
}

export type { Document };

import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { LineCounter, parseDocument, visit, type Document } from 'yaml';
import type { z } from 'zod';
import { CONFIG_DEFAULTS, LIMITS, limitEnvName } from '../config/index.js';
import { DagValidationError, type SpecProblem } from '../errors.js';
import { jsonProblem, jsonSizeExceeds, utf8Decode } from '../json-guard.js';
import { dagFileSchema, objectKeysAt, type DagFile } from './file-schema.js';
import { pathFormat, positionOf, type Path } from './locate.js';
import { paramsResolve, paramsSubstitute, type ParamProblem } from './params.js';
import { dagFileCheck } from './check.js';
import { dagFileNormalize } from './normalize.js';
import { closestMatch, didYouMean } from './suggest.js';
import type { DagSpec } from './spec.js';
import { validationResolve, type ValidationStep } from '../validation/steps/index.js';

const MAX_FILE_BYTES = LIMITS.dagFileBytes;
/** Top-level fields with this prefix are ignored (x-common: &common …). */
export const EXTENSION_PREFIX = 'x-';

export interface LoadOptions {
  /** --param values, as given on the command line. */
  params?: Record<string, string>;
  /** Accept --param names this file does not declare (several files submitted together). */
  ignoreUndeclaredParams?: boolean;
  /** Where relative paths in the file (schema_file, a test step's cwd) start, and must stay under. Default: the file's directory, else the working directory. */
  baseDir?: string;
  /** More directories those paths may reach (DAGENT_FILE_ROOTS). Default CONFIG_DEFAULTS.fileRoots: the working directory. */
  roots?: readonly string[];
}

/** Read, check and normalize one DAG file. Throws DagValidationError listing every problem with file:line:col. */
export async function dagFileLoad(file: string, opts: LoadOptions = {}): Promise<DagSpec> {
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
  const bytes = readFileSync(file);
  const decoded = utf8Decode(bytes);
  if ('invalidAt' in decoded) {
    const before = bytes.subarray(0, decoded.invalidAt);
    const line = before.filter((b) => b === 0x0a).length + 1;
    const column = decoded.invalidAt - (before.lastIndexOf(0x0a) + 1) + 1;
    throw new DagValidationError([{ file: display, line, column, path: '', message: `not valid UTF-8 (byte ${decoded.invalidAt}): save the file as UTF-8` }]);
  }
  return dagSourceLoad(decoded.text, display, { baseDir: path.dirname(path.resolve(file)), ...opts });
}

/** Same as dagFileLoad, from a string; `file` is the name used in messages. */
export async function dagSourceLoad(source: string, file: string, opts: LoadOptions = {}): Promise<DagSpec> {
  const lc = new LineCounter();
  // `<<` merge keys, as Docker Compose files use them (`b: { <<: *common, depends_on: [a] }`).
  const doc = parseDocument(source, { lineCounter: lc, uniqueKeys: true, prettyErrors: false, strict: true, merge: true });
  const at = (p: Path, message: string, atKey = false): SpecProblem => {
    const pos = positionOf(doc, lc, p, atKey);
    return { file, line: pos.line, column: pos.col, path: pathFormat(p), message };
  };

  if (doc.errors.length) {
    throw new DagValidationError(doc.errors.map((e) => {
      // The parser notices an unclosed [ or { only at the next key; point at the bracket instead.
      const unclosed = /flow (sequence|mapping|collection)/i.test(e.message) ? unclosedBracketBefore(source, e.pos[0]) : undefined;
      const pos = lc.linePos(unclosed ?? e.pos[0]);
      const rest = source.slice(e.pos[0]);
      return { file, line: pos.line, column: pos.col, path: '', message: yamlMessage(e.code, e.message, rest.slice(0, rest.search(/:|\n|$/))) };
    }));
  }
  let raw: unknown;
  try {
    raw = doc.toJS({ maxAliasCount: 100 });
  } catch (e) {
    throw new DagValidationError([aliasProblem(doc, lc, file, e as Error)]);
  }
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new DagValidationError([at([], 'a DAG file must be a YAML mapping with name and tasks')]);
  }
  // Top-level `x-…` fields are the file's own (a place to park anchors that tasks merge in, as in Docker Compose):
  // their aliases were expanded above; the fields themselves are not part of the DAG.
  for (const k of Object.keys(raw)) if (k.startsWith(EXTENSION_PREFIX)) delete (raw as Record<string, unknown>)[k];
  // A NUL ("\0"), an unpaired surrogate ("\ud800") or runaway nesting: located here, never a database error later.
  const hostile = jsonProblem(raw, LIMITS.jsonDepth);
  if (hostile) throw new DagValidationError([at(hostile.path, hostile.message)]);
  if (jsonSizeExceeds(raw, LIMITS.specChars)) {
    throw new DagValidationError([at([], `YAML aliases expand the DAG to more than ${LIMITS.specChars} characters (${limitEnvName('specChars')})`)]);
  }

  // Params first: their values are substituted before the rest is type-checked.
  const rawParams = (raw as Record<string, unknown>).params ?? {};
  if (rawParams && typeof rawParams === 'object' && Object.keys(rawParams).length > LIMITS.params) {
    throw new DagValidationError([at(['params'], `${Object.keys(rawParams).length} params; at most ${LIMITS.params} (${limitEnvName('params')})`, true)]);
  }
  const paramsParsed = dagFileSchema.shape.params.safeParse(rawParams);
  if (!paramsParsed.success) throw new DagValidationError(zodProblems(paramsParsed.error, ['params'], raw, at));
  const { values, missing, problems: paramProblems } = paramsResolve(paramsParsed.data ?? {}, opts.params ?? {}, { ignoreUndeclared: opts.ignoreUndeclaredParams });
  const substituted: Record<string, unknown> = {};
  // Expansion is budgeted as it goes: a 100 kB param used a thousand times stops at the limit, not at 100 MB.
  const budget = { left: LIMITS.specChars };
  for (const [k, v] of Object.entries(raw)) substituted[k] = k === 'params' ? v : paramsSubstitute(v, values, [k], paramProblems, missing, budget);
  if (paramProblems.length) throw new DagValidationError(paramProblems.map((p: ParamProblem) => at(p.path, p.message)));

  const parsed = dagFileSchema.safeParse(substituted);
  if (!parsed.success) throw new DagValidationError(zodProblems(parsed.error, [], substituted, at));
  const wide = Object.entries(parsed.data.tasks).find(([, t]) => (t.depends_on?.length ?? 0) > LIMITS.upstreamPerTask);
  if (wide) {
    throw new DagValidationError([at(['tasks', wide[0], 'depends_on'], `${wide[1].depends_on!.length} upstream tasks; at most ${LIMITS.upstreamPerTask} (${limitEnvName('upstreamPerTask')})`, true)]);
  }
  const semantic = dagFileCheck(parsed.data as DagFile);
  if (semantic.length) throw new DagValidationError(semantic.map((p) => at(p.path, p.message, p.atKey)));
  const where = { baseDir: opts.baseDir ?? process.cwd(), roots: opts.roots ?? CONFIG_DEFAULTS.fileRoots };
  const stepProblems: SpecProblem[] = [];
  const resolveAll = async (group: 'tasks' | 'templates', entries: Array<[string, { output?: DagFile['tasks'][string]['output'] }]>) => {
    const steps: Record<string, ValidationStep[]> = {};
    for (const [name, t] of entries) {
      const at0 = group === 'tasks' ? ['tasks', name] : ['spawn', 'templates', name];
      const r = await validationResolve(t.output?.validation, [...at0, 'output', 'validation'], where);
      steps[name] = r.steps;
      stepProblems.push(...r.problems.map((p) => at(p.path, p.message)));
    }
    return steps;
  };
  const validation = await resolveAll('tasks', Object.entries(parsed.data.tasks));
  const templateValidation = await resolveAll('templates', Object.entries(parsed.data.spawn?.templates ?? {}));
  if (stepProblems.length) throw new DagValidationError(stepProblems);
  return dagFileNormalize(parsed.data as DagFile, values, file, validation, templateValidation);
}

type At = (p: Path, message: string, atKey?: boolean) => SpecProblem;

function zodProblems(error: z.ZodError, prefix: Path, root: unknown, at: At): SpecProblem[] {
  return misspeltExplained(error.issues as z.core.$ZodIssue[], root)
    .flatMap((issue) => issueProblems(issue, [...prefix, ...(issue.path as (string | number)[])], root, at));
}

/**
 * A required field that is missing because it was misspelt (`taks:` for `tasks:`) is one mistake: the unknown
 * field, at its line, says it (did you mean "tasks"?). The "missing" issue it explains is dropped.
 */
function misspeltExplained(issues: z.core.$ZodIssue[], root: unknown): z.core.$ZodIssue[] {
  const unknownAt = new Map<string, string[]>();
  for (const i of issues) if (i.code === 'unrecognized_keys') unknownAt.set(JSON.stringify(i.path), i.keys);
  if (unknownAt.size === 0) return issues;
  return issues.filter((i) => {
    if (i.code !== 'invalid_type' || i.path.length === 0 || valueAt(root, i.path as Path) !== undefined) return true;
    const field = String(i.path[i.path.length - 1]);
    const siblings = unknownAt.get(JSON.stringify(i.path.slice(0, -1))) ?? [];
    return !siblings.some((k) => closestMatch(k, [field]) === field);
  });
}

/** One zod issue as located problems; unions are unfolded into the branch whose type matched. */
function issueProblems(issue: z.core.$ZodIssue, p: Path, root: unknown, at: At): SpecProblem[] {
  const clean = (m: string) => m.replace(/^Invalid (input|string): /, '');
  switch (issue.code) {
    case 'unrecognized_keys': {
      const allowed = objectKeysAt(p) ?? [];
      return issue.keys.map((k) => at([...p, k], `unknown field "${k}"${unknownFieldHint(k, p, allowed)}`, true));
    }
    case 'invalid_key':
      return [at(p, issue.issues.map((i) => clean(i.message)).join('; '), true)];
    case 'invalid_type':
      if (valueAt(root, p) === undefined) return [at(p, 'required field is missing')];
      if (issue.expected === 'int') return [at(p, 'must be a whole number')];
      return [at(p, clean(issue.message))];
    case 'invalid_value': {
      const got = valueAt(root, p);
      const options = issue.values.map(String);
      return [at(p, `must be one of ${options.join(', ')}${typeof got === 'string' ? didYouMean(got, options) : ''}`)];
    }
    case 'invalid_union': {
      if (issue.errors.length === 0 && 'discriminator' in issue && issue.discriminator) {
        const got = valueAt(root, p);
        const options = ('options' in issue ? issue.options ?? [] : []).map(String);
        return [at(p, `${issue.discriminator} must be one of ${options.join(', ')}${typeof got === 'string' ? didYouMean(got, options) : ''}`)];
      }
      // A branch whose complaints are all below its root matched the value's type: its complaints are the specific ones.
      const matched = issue.errors.find((branch) => branch.length > 0 && branch.every((i) => i.path.length > 0 || i.code !== 'invalid_type'));
      if (matched) return matched.flatMap((i) => issueProblems(i, [...p, ...(i.path as (string | number)[])], root, at));
      const expected = [...new Set(issue.errors.flatMap((b) => b.filter((i) => i.code === 'invalid_type').map((i) => (i as { expected: string }).expected)))];
      return [at(p, `expected ${expected.join(' or ') || 'a different value'}`)];
    }
    default:
      return [at(p, clean(issue.message))];
  }
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

/** An alias that names no anchor, or expands too much: point at the first offending alias. */
function aliasProblem(doc: Document, lc: LineCounter, file: string, e: Error): SpecProblem {
  let offset = 0;
  let name = '';
  visit(doc, {
    Alias(_, node) {
      if (name) return visit.BREAK;
      if (!node.resolve(doc) || /alias count/i.test(e.message)) {
        name = node.source;
        offset = node.range?.[0] ?? 0;
        return visit.BREAK;
      }
      return undefined;
    },
  });
  const pos = lc.linePos(offset);
  const message = /alias count/i.test(e.message)
    ? 'YAML aliases expand too much (more than 100 expansions): write the values out'
    : `alias *${name} refers to no anchor &${name}`;
  return { file, line: pos.line, column: pos.col, path: '', message };
}

/** Offset of the last [ or { before `end` that is not closed, skipping quoted text and comments. */
function unclosedBracketBefore(source: string, end: number): number | undefined {
  const open: number[] = [];
  let quote: string | undefined;
  for (let i = 0; i < end; i++) {
    const c = source[i]!;
    if (quote) {
      if (c === quote) quote = undefined;
    } else if (c === '"' || c === "'") quote = c;
    else if (c === '#' && (i === 0 || /\s/.test(source[i - 1]!))) i = source.indexOf('\n', i) < 0 ? end : source.indexOf('\n', i);
    else if (c === '[' || c === '{') open.push(i);
    else if (c === ']' || c === '}') open.pop();
  }
  return open.at(-1);
}

function yamlMessage(code: string, message: string, text: string): string {
  if (code === 'DUPLICATE_KEY') return `duplicate key "${text.trim()}"`;
  if (code === 'MULTIPLE_DOCS') {
    return 'a second YAML document starts here (---): a DAG file holds one DAG; put each in a file of its own (dagent submit a.yaml b.yaml creates them in one transaction)';
  }
  return `invalid YAML: ${message.split('\n')[0]}`;
}

export type { Document };

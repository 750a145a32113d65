import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { CONFIG_DEFAULTS, configFromEnv, LIMITS, limitEnvName } from '../config/index.js';
import { DagValidationError, type SpecProblem } from '../errors.js';
import { utf8Decode } from '../json-guard.js';
import { dagExpandedSchema, dagFileSchema, type DagFile } from './file-schema.js';
import { paramsResolve, paramsSubstitute, type ParamProblem } from './params.js';
import { dagFileCheck } from './check.js';
import { dagFileNormalize } from './normalize.js';
import { zodProblems } from './problems.js';
import { groupedAt, taskGroupsExpand } from './templates.js';
import { yamlSourceParse } from './yaml-source.js';
import { workspaceReposResolve } from './workspace-repos.js';
import { mergeQueuesCheck } from './merge-check.js';
import type { DagSpec } from './spec.js';
import { validationResolve, type DagResolution, type ValidationStep } from '../validation/steps/index.js';
import { eventLoopTurn, forEachSlicedAsync } from '../event-loop.js';

const MAX_FILE_BYTES = LIMITS.dagFileBytes;
export { EXTENSION_PREFIX } from './yaml-source.js';

export interface LoadOptions {
  /** --param values, as given on the command line. */
  params?: Record<string, string>;
  /** Accept --param names this file does not declare (several files submitted together). */
  ignoreUndeclaredParams?: boolean;
  /** Where relative paths in the file (schema_file, a test step's cwd, a workspace's repo) start, and must stay under. Default: the file's directory, else the working directory. */
  baseDir?: string;
  /** More directories those paths may reach (DAGENT_FILE_ROOTS). Default CONFIG_DEFAULTS.fileRoots: the working directory. */
  roots?: readonly string[];
  /**
   * The repository URLs (or prefixes) a workspace may name (DAGENT_WORKSPACE_REPO_URLS): the operator's allow-list.
   * Default: this process's DAGENT_WORKSPACE_REPO_URLS, else none (a path only).
   */
  repoUrls?: readonly string[];
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
  const { raw, at: atWritten } = await yamlSourceParse(source, file, 'DAG');

  // Params first: their values are substituted before the rest is type-checked.
  const rawParams = raw.params ?? {};
  if (rawParams && typeof rawParams === 'object' && Object.keys(rawParams).length > LIMITS.params) {
    throw new DagValidationError([atWritten(['params'], `${Object.keys(rawParams).length} params; at most ${LIMITS.params} (${limitEnvName('params')})`, true)]);
  }
  const paramsParsed = dagFileSchema.shape.params.safeParse(rawParams);
  if (!paramsParsed.success) throw new DagValidationError(zodProblems(paramsParsed.error, ['params'], raw, atWritten));
  const { values, missing, problems: paramProblems } = paramsResolve(paramsParsed.data ?? {}, { as: 'param', values: opts.params ?? {} }, { ignoreUndeclared: opts.ignoreUndeclaredParams });
  const substituted: Record<string, unknown> = {};
  // Expansion is budgeted as it goes: a 100 kB param used a thousand times stops at the limit, not at 100 MB.
  const budget = { left: LIMITS.specChars };
  for (const [k, v] of Object.entries(raw)) substituted[k] = k === 'params' ? v : paramsSubstitute(v, values, [k], paramProblems, missing, budget);
  if (paramProblems.length) throw new DagValidationError(paramProblems.map((p: ParamProblem) => atWritten(p.path, p.message)));
  // Each pass over a large DAG (substitution, type checks, the graph's checks) takes ~0.1-0.3 s for 15,000
  // tasks: the server answers other requests between them.
  await eventLoopTurn();

  // Groups next: a template's tasks join the DAG's as `group/key`, checked with them below, located where written.
  const where = { baseDir: opts.baseDir ?? process.cwd(), roots: opts.roots ?? CONFIG_DEFAULTS.fileRoots };
  const groups = await taskGroupsExpand(substituted.tasks, { at: atWritten, where, budget });
  const expanded = substituted.tasks === undefined ? substituted : { ...substituted, tasks: groups.tasks };
  const at = groupedAt(atWritten, groups.grouped);

  const parsed = dagExpandedSchema.safeParse(expanded);
  if (!parsed.success) throw new DagValidationError(zodProblems(parsed.error, [], expanded, at));
  const wide = Object.entries(parsed.data.tasks).find(([, t]) => (t.depends_on?.length ?? 0) > LIMITS.upstreamPerTask);
  if (wide) {
    throw new DagValidationError([at(['tasks', wide[0], 'depends_on'], `${wide[1].depends_on!.length} upstream tasks; at most ${LIMITS.upstreamPerTask} (${limitEnvName('upstreamPerTask')})`, true)]);
  }
  await eventLoopTurn();
  const semantic = await dagFileCheck(parsed.data, groups.exits);
  if (semantic.length) throw new DagValidationError(semantic.map((p) => at(p.path, p.message, p.atKey)));
  // Each workspace's repository is checked, and stored as its real path, as a schema_file is.
  const repos = await workspaceReposResolve(parsed.data, { ...where, repoUrls: opts.repoUrls ?? repoUrlsOfEnv() }, (key) => groups.grouped.get(key)?.baseDir);
  if ('problems' in repos) throw new DagValidationError(repos.problems.map((p) => at(p.path, p.message)));
  const mergeProblems = mergeQueuesCheck(repos.file);
  if (mergeProblems.length) throw new DagValidationError(mergeProblems.map((p) => at(p.path, p.message)));
  await eventLoopTurn();
  const stepProblems: SpecProblem[] = [];
  // One per DAG: what its steps share (each distinct schema compiled once), and the limits that count across them.
  const dag: DagResolution = { schemas: new Map() };
  const resolveAll = async (group: 'tasks' | 'templates', entries: Array<[string, { output?: DagFile['tasks'][string]['output'] }]>) => {
    const steps: Record<string, ValidationStep[]> = {};
    // In slices: a DAG of a thousand distinct schemas compiles for 1-3 s (event-loop.ts).
    await forEachSlicedAsync(entries, async ([name, t]) => {
      const at0 = group === 'tasks' ? ['tasks', name] : ['spawn', 'templates', name];
      // A group's task names files relative to its template.
      const baseDir = (group === 'tasks' ? groups.grouped.get(name)?.baseDir : undefined) ?? where.baseDir;
      const r = await validationResolve(t.output?.validation, [...at0, 'output', 'validation'], { ...where, baseDir, dag });
      steps[name] = r.steps;
      const limit = r.problems.find((p) => p.limit);
      // A limit passed: every step after it would say the same.
      if (limit) throw new DagValidationError([...stepProblems, at(limit.path, limit.message)]);
      stepProblems.push(...r.problems.map((p) => at(p.path, p.message)));
    });
    return steps;
  };
  const validation = await resolveAll('tasks', Object.entries(parsed.data.tasks));
  const templateValidation = await resolveAll('templates', Object.entries(parsed.data.spawn?.templates ?? {}));
  if (stepProblems.length) throw new DagValidationError(stepProblems);
  return dagFileNormalize(repos.file, values, file, validation, templateValidation);
}

/** This process's DAGENT_WORKSPACE_REPO_URLS (none when its environment does not read). */
function repoUrlsOfEnv(): readonly string[] {
  try {
    return configFromEnv().workspaceRepoUrls;
  } catch {
    return [];
  }
}

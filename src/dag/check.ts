import type { Path } from './locate.js';
import type { DagFile, RetryFile } from './file-schema.js';
import { instantParse, durationSeconds } from '../durations.js';
import { dagGraphBuildSliced, cycleFind, ancestors } from './graph.js';
import { didYouMean } from './suggest.js';
import { cronProblem } from './cron.js';
import { LIMITS, limitEnvName } from '../config/index.js';
import { cyclePathText } from '../errors.js';
import { groupHint } from './templates.js';

export interface CheckProblem { path: Path; message: string; atKey?: boolean }

/**
 * What the "did you mean" hints for unknown task names may cost one DAG, in edit-distance cells (a name's length
 * times a key's, over every key): ~0.1 s. Unbudgeted, a DAG of 4,000 tasks each naming an unknown task spent 67 s
 * on them (quadratic), and one hint against 20,000 keys of 64 characters takes ~0.9 s. A 15,000-task DAG of
 * short keys affords a few hints; past the budget, an unknown name is said alone.
 */
const UNKNOWN_TASK_HINT_CELLS = 10_000_000;

/**
 * Checks zod cannot express: references between tasks, cycles, context refs, times, retry consistency.
 * The graph is built in slices (graph.ts): ~0.2-0.4 s in one go for a 15,000-task chain.
 */
export async function dagFileCheck(file: DagFile, groups: ReadonlyMap<string, string[]> = new Map()): Promise<CheckProblem[]> {
  const problems: CheckProblem[] = [];
  const keys = Object.keys(file.tasks);
  const edges: Array<[string, string]> = [];
  const keyChars = keys.reduce((n, k) => n + k.length, 0);
  let hintCells = UNKNOWN_TASK_HINT_CELLS;
  const unknownTask = (name: string) => {
    let hint = groupHint(name, groups);
    if (!hint && name.length * keyChars <= hintCells) {
      hintCells -= name.length * keyChars;
      hint = didYouMean(name, keys);
    }
    return `unknown task "${name}"${hint}`;
  };

  if (keys.length > LIMITS.tasksPerDag) {
    return [{ path: ['tasks'], message: `${keys.length} tasks; at most ${LIMITS.tasksPerDag} in a DAG (${limitEnvName('tasksPerDag')})`, atKey: true }];
  }
  for (const [key, task] of Object.entries(file.tasks)) {
    const seen = new Set<string>();
    (task.depends_on ?? []).forEach((dep, i) => {
      const path = ['tasks', key, 'depends_on', i];
      if (dep === key) problems.push({ path, message: `task "${key}" depends on itself` });
      else if (!Object.hasOwn(file.tasks, dep)) problems.push({ path, message: unknownTask(dep) });
      else if (seen.has(dep)) problems.push({ path, message: `"${dep}" is listed twice` });
      else edges.push([dep, key]);
      seen.add(dep);
    });
    if (edges.length > LIMITS.edgesPerDag) {
      return [{ path: ['tasks', key, 'depends_on'], message: `more than ${LIMITS.edgesPerDag} dependencies in the DAG (${limitEnvName('edgesPerDag')})` }];
    }
    for (const field of ['deadline', 'not_before'] as const) {
      const v = task[field];
      if (v !== undefined) {
        const parsed = instantParse(v);
        if (typeof parsed === 'string') problems.push({ path: ['tasks', key, field], message: parsed });
      }
    }
    retryCheck({ ...file.defaults?.retry, ...task.retry }, ['tasks', key, 'retry'], problems);
    if (Array.isArray(task.for_each) && task.for_each.length > LIMITS.mapItems) {
      problems.push({ path: ['tasks', key, 'for_each'], message: `${task.for_each.length} items; a for_each maps over at most ${LIMITS.mapItems} (${limitEnvName('mapItems')})` });
    }
  }
  if (file.schedule) {
    const bad = cronProblem(file.schedule.cron, file.schedule.timezone);
    if (bad) problems.push({ path: ['schedule', bad.field], message: bad.message });
    for (const name of Object.keys(file.schedule.params ?? {})) {
      if (!Object.hasOwn(file.params ?? {}, name)) {
        problems.push({ path: ['schedule', 'params', name], message: `"${name}" is not a param of this DAG${didYouMean(name, Object.keys(file.params ?? {}))}`, atKey: true });
      }
    }
  }
  for (const [name, t] of Object.entries(file.spawn?.templates ?? {})) {
    const at = ['spawn', 'templates', name];
    // Compared without case: the shell agent hands fields to the command as DAGENT_INPUT_<NAME>, so an
    // accepted `Name` would overwrite the fixed `name` the command relies on.
    const fixed = new Map(Object.keys(t.spec?.input ?? {}).map((f) => [f.toLowerCase(), f]));
    (t.accepts ?? []).forEach((field, i) => {
      const same = fixed.get(field.toLowerCase());
      if (same !== undefined) {
        const how = same === field ? '' : ` (as ${same}: names are compared without case, since they may become environment variables)`;
        problems.push({ path: [...at, 'accepts', i], message: `${field} is fixed in spec.input${how}; a template cannot both fix a field and accept it from agents` });
      }
    });
    if (t.spec?.context?.length) problems.push({ path: [...at, 'spec', 'context'], message: 'a template takes its context from the agent that spawns it; leave context out' });
  }
  if (problems.length) return problems;

  const graph = await dagGraphBuildSliced(keys, edges);
  const cycle = cycleFind(graph);
  if (cycle) {
    const from = cycle[cycle.length - 2]!;
    const to = cycle[cycle.length - 1]!;
    const i = file.tasks[to]!.depends_on!.indexOf(from);
    problems.push({ path: ['tasks', to, 'depends_on', i], message: `dependency cycle: ${cyclePathText(cycle)}` });
    return problems;
  }

  for (const [key, task] of Object.entries(file.tasks)) {
    const refs: Array<[string, Path]> = (task.spec?.context ?? []).map((ref, i) => [ref, ['tasks', key, 'spec', 'context', i]]);
    if (typeof task.for_each === 'string') refs.push([task.for_each, ['tasks', key, 'for_each']]);
    // A task's whole upstream only when a ref is not one of its own dependencies: computed for every task, it
    // made a 15,000-task chain quadratic (49 s in this loop).
    let direct: Set<string> | undefined;
    let upstream: Set<string> | undefined;
    for (const [ref, path] of refs) {
      const refKey = ref.split('.')[0]!;
      if (!Object.hasOwn(file.tasks, refKey)) problems.push({ path, message: unknownTask(refKey) });
      else if (!(direct ??= new Set(task.depends_on)).has(refKey) && !(upstream ??= ancestors(graph, key)).has(refKey)) {
        problems.push({ path, message: `"${refKey}" is not upstream of "${key}", so its output is not ready in time (add it to depends_on)` });
      }
    }
  }
  return problems;
}

function retryCheck(retry: RetryFile | undefined, path: Path, problems: CheckProblem[]) {
  if (!retry) return;
  const both = (retry.retry_on ?? []).filter((c) => (retry.no_retry_on ?? []).includes(c));
  if (both.length) problems.push({ path: [...path, 'no_retry_on'], message: `${both.join(', ')} listed in both retry_on and no_retry_on` });
  if (retry.initial_delay !== undefined && retry.max_delay !== undefined && durationSeconds(retry.max_delay) < durationSeconds(retry.initial_delay)) {
    problems.push({ path: [...path, 'max_delay'], message: 'max_delay is shorter than initial_delay' });
  }
}

import path from 'node:path';
import { z } from 'zod';
import { LIMITS, limitEnvName } from '../config/index.js';
import { DagValidationError, type SpecProblem } from '../errors.js';
import { projectFileRead, projectPathResolve, type ProjectRoots } from '../validation/project-files.js';
import { keySchema, taskGroupSchema, templateFileSchema, type TaskGroupFile } from './file-schema.js';
import type { Path } from './locate.js';
import { closestMatch, didYouMean } from './suggest.js';
import { paramsResolve, paramsSubstitute, type ParamProblem } from './params.js';
import { zodProblems } from './problems.js';
import { yamlSourceParse, type At } from './yaml-source.js';

/**
 * Task groups: a DAG task written `review_api: { use: templates/review.yaml, with: {…} }` becomes the template's
 * tasks, keyed `review_api/<key>`, before the DAG is checked. Inside the group, depends_on and context refs name the
 * template's own tasks (anything else is passed through, so a param may name a task of the DAG). The group's
 * depends_on reaches its first tasks (no upstream inside it); a task that depends on the group waits for its last
 * ones (no downstream inside it). Every problem in a group's task is reported at its line in the template, with the
 * place in the DAG that used it.
 */

export interface GroupedTask {
  group: string;
  /** The task's key in the template. */
  local: string;
  /** Locates a path of the template file (['tasks', local, …]) with the group's place in the DAG appended. */
  at: At;
  /** How many depends_on entries the template wrote: those after them came from the group's depends_on. */
  ownDeps: number;
  /** Where the template's relative paths (a schema_file) start. */
  baseDir: string;
}

export interface GroupsExpanded {
  /** The DAG's tasks with each group replaced by its tasks, in the file's order. */
  tasks: Record<string, unknown>;
  /** Each group's task, by its key in the DAG. */
  grouped: Map<string, GroupedTask>;
  /** Each group's last tasks (what a task depending on the group waits for), by group. */
  exits: Map<string, string[]>;
}

/** The separator of a group and its tasks' keys, as of a parent and the subtasks it spawns. */
export const GROUP_SEPARATOR = '/';

const templateTopSchema = templateFileSchema.extend({
  tasks: z.record(z.string(), z.unknown()).refine((t) => Object.keys(t).length > 0, { error: 'a template needs at least one task' }),
});
const GROUP_FIELDS = Object.keys(taskGroupSchema.shape);

/** Expand every group of a DAG's (params-substituted) `tasks`. Throws DagValidationError with every problem found. */
export async function taskGroupsExpand(
  tasks: unknown, o: { at: At; where: ProjectRoots; budget: { left: number } },
): Promise<GroupsExpanded> {
  const out: GroupsExpanded = { tasks: {}, grouped: new Map(), exits: new Map() };
  if (!tasks || typeof tasks !== 'object' || Array.isArray(tasks)) return { ...out, tasks: tasks as Record<string, unknown> };
  const problems: SpecProblem[] = [];
  const templates = new Map<string, Promise<LoadedTemplate | SpecProblem[] | { readError: string }>>();
  for (const [key, value] of Object.entries(tasks as Record<string, unknown>)) {
    if (key.includes(GROUP_SEPARATOR)) {
      problems.push(o.at(['tasks', key], `a task key has no "${GROUP_SEPARATOR}": it joins a group and its tasks' keys (review_api/lint)`, true));
      continue;
    }
    if (!value || typeof value !== 'object' || !Object.hasOwn(value, 'use')) {
      out.tasks[key] = value;
      continue;
    }
    // A group's key begins its tasks' keys: a task key, never a name every JavaScript object has (`constructor`).
    const named = keySchema.safeParse(key);
    if (!named.success) {
      problems.push(...named.error.issues.map((i) => o.at(['tasks', key], i.message, true)));
      continue;
    }
    const parsed = taskGroupSchema.safeParse(value);
    if (!parsed.success) {
      problems.push(...zodProblems(parsed.error, ['tasks', key], { tasks }, o.at, () => GROUP_FIELDS).map((p) => {
        const unknown = /^unknown field "([^"]*)"/.exec(p.message);
        if (!unknown) return p;
        const field = unknown[1]!;
        return { ...p, message: `unknown field "${field}"${didYouMean(field, GROUP_FIELDS)}: a task that uses a template takes ${GROUP_FIELDS.join(', ')}; the template's tasks say what runs` };
      }));
      continue;
    }
    const group = parsed.data;
    // One load per file, however it is spelt (`a/../t.yaml`, `./t.yaml`); each use is charged to the DAG's expansion budget.
    const real = await projectPathResolve(group.use, o.where);
    const cacheKey = 'real' in real ? real.real : group.use;
    const loaded = templates.get(cacheKey) ?? templateLoad(group.use, o.where);
    templates.set(cacheKey, loaded);
    const t = await loaded;
    if (!('readError' in t) && !Array.isArray(t)) {
      o.budget.left -= t.size;
      if (o.budget.left < 0) {
        problems.push(o.at(['tasks', key, 'use'], `templates expand the DAG to more than ${LIMITS.specChars} characters (${limitEnvName('specChars')})`));
        break;
      }
    }
    const usedAt = o.at(['tasks', key], '', true);
    const suffix = ` (in group ${key}, used at ${usedAt.file}:${usedAt.line}:${usedAt.column})`;
    if ('readError' in t) {
      problems.push(o.at(['tasks', key, 'use'], `template ${t.readError}`));
      continue;
    }
    if (Array.isArray(t)) {
      problems.push(...t.map((p) => ({ ...p, message: p.message + suffix })));
      continue;
    }
    const tAt: At = (p, message, atKey) => {
      const r = t.at(p, message, atKey);
      return { ...r, message: r.message + suffix };
    };
    const { values, missing, problems: paramProblems } = paramsResolve(t.params, { as: 'with', values: group.with ?? {}, withAt: ['tasks', key, 'with'] });
    problems.push(...paramProblems.map((p) => o.at(p.path, p.message, true)));
    const substProblems: ParamProblem[] = [];
    const body = paramsSubstitute(t.tasks, values, ['tasks'], substProblems, missing, o.budget) as Record<string, unknown>;
    problems.push(...substProblems.map((p) => tAt(p.path, p.message)));
    if (paramProblems.length || substProblems.length) continue;
    groupExpand(key, group, body, tAt, t.baseDir, out, problems);
  }
  // A dependency on a group is one on each of its last tasks: in the written entry's place, then after the rest.
  for (const [key, value] of Object.entries(out.tasks)) {
    const deps = (value as { depends_on?: unknown })?.depends_on;
    if (!Array.isArray(deps) || !deps.some((d) => typeof d === 'string' && out.exits.has(d))) continue;
    const head: unknown[] = [];
    const tail: string[] = [];
    for (const d of deps) {
      const exits = typeof d === 'string' ? out.exits.get(d) : undefined;
      if (!exits) head.push(d);
      else {
        head.push(exits[0]);
        tail.push(...exits.slice(1));
      }
    }
    const written = new Set(head);
    out.tasks[key] = { ...(value as object), depends_on: [...head, ...tail.filter((d) => !written.has(d))] };
  }
  if (problems.length) throw new DagValidationError(problems);
  return out;
}

interface LoadedTemplate { at: At; params: Record<string, unknown>; tasks: Record<string, unknown>; baseDir: string; size: number }

/** Read, parse and shape-check a template file once per DAG; its tasks are checked as the DAG's, after expansion. */
async function templateLoad(written: string, where: ProjectRoots): Promise<LoadedTemplate | SpecProblem[] | { readError: string }> {
  const display = path.relative(process.cwd(), path.resolve(where.baseDir, written)) || written;
  const read = await projectFileRead(written, where, LIMITS.dagFileBytes);
  if ('error' in read) return { readError: read.error };
  let source;
  try {
    source = await yamlSourceParse(read.text, display, 'template');
  } catch (e) {
    if (e instanceof DagValidationError) return e.problems;
    throw e;
  }
  const shape = templateTopSchema.safeParse(source.raw);
  if (!shape.success) {
    return zodProblems(shape.error, [], source.raw, source.at, (p) => (p.length === 0 ? Object.keys(templateFileSchema.shape) : undefined));
  }
  return { at: source.at, params: shape.data.params ?? {}, tasks: shape.data.tasks, baseDir: path.dirname(path.resolve(where.baseDir, written)), size: read.text.length };
}

function groupExpand(
  group: string, use: TaskGroupFile, body: Record<string, unknown>, at: At, baseDir: string, out: GroupsExpanded, problems: SpecProblem[],
): void {
  const locals = Object.keys(body);
  const full = (k: string) => `${group}${GROUP_SEPARATOR}${k}`;
  const upstreamInside = new Set<string>();
  const hasDownstreamInside = new Set<string>();
  for (const [local, raw] of Object.entries(body)) {
    if (raw && typeof raw === 'object' && Object.hasOwn(raw, 'use')) {
      problems.push(at(['tasks', local, 'use'], 'a template\'s task cannot use another template (templates do not nest): write its tasks here', true));
      continue;
    }
    const deps = (raw as { depends_on?: unknown } | null)?.depends_on;
    if (Array.isArray(deps)) {
      deps.forEach((d, i) => {
        if (typeof d === 'string' && Object.hasOwn(body, d)) {
          upstreamInside.add(local);
          hasDownstreamInside.add(d);
        } else if (typeof d === 'string' && closestMatch(d, locals)) {
          // A name that is not the template's but close to one is a typo, not a task of the DAG.
          problems.push(at(['tasks', local, 'depends_on', i], `unknown task "${d}"${didYouMean(d, locals)}`));
        }
      });
    }
  }
  for (const [local, raw] of Object.entries(body)) {
    if (!raw || typeof raw !== 'object' || Array.isArray(raw)) {
      out.tasks[full(local)] = raw;
      out.grouped.set(full(local), { group, local, at, ownDeps: 0, baseDir });
      continue;
    }
    const t = { ...(raw as Record<string, unknown>) };
    const deps = Array.isArray(t.depends_on) ? t.depends_on : [];
    const inside = (k: unknown) => (typeof k === 'string' && Object.hasOwn(body, k) ? full(k) : k);
    // A depends_on that is not a list is left as written, for the schema check to report at its line.
    if (t.depends_on === undefined || Array.isArray(t.depends_on)) {
      const own = deps.map(inside);
      // A first task gets the group's upstream tasks, less any it names itself (a param may name the same task).
      const fromGroup = upstreamInside.has(local) ? [] : (use.depends_on ?? []).filter((d) => !own.includes(d));
      t.depends_on = [...own, ...fromGroup];
    }
    if (t.spec && typeof t.spec === 'object' && Array.isArray((t.spec as { context?: unknown }).context)) {
      const spec = t.spec as { context: unknown[] };
      t.spec = { ...spec, context: spec.context.map((ref) => (typeof ref === 'string' ? contextInside(ref, body, full) : ref)) };
    }
    if (typeof t.for_each === 'string') t.for_each = contextInside(t.for_each, body, full);
    if (use.tags?.length) t.tags = [...(Array.isArray(t.tags) ? t.tags : []), ...use.tags];
    if (Array.isArray(t.depends_on) && t.depends_on.length === 0) delete t.depends_on;
    out.tasks[full(local)] = t;
    out.grouped.set(full(local), { group, local, at, ownDeps: deps.length, baseDir });
  }
  out.exits.set(group, locals.filter((k) => !hasDownstreamInside.has(k)).map(full));
}

/** A context ref inside a group: `lint.summary` names the group's lint; a ref to anything else is the DAG's. */
function contextInside(ref: string, body: Record<string, unknown>, full: (k: string) => string): string {
  const dot = ref.indexOf('.');
  const head = dot < 0 ? ref : ref.slice(0, dot);
  return Object.hasOwn(body, head) ? full(head) + ref.slice(head.length) : ref;
}

/** A path into the expanded DAG located where it was written: in the template, or at the group's depends_on in the DAG. */
export function groupedAt(at: At, grouped: Map<string, GroupedTask>): At {
  if (grouped.size === 0) return at;
  return (p: Path, message: string, atKey?: boolean) => {
    const g = p[0] === 'tasks' && typeof p[1] === 'string' ? grouped.get(p[1]) : undefined;
    if (!g) return at(p, message, atKey);
    const rest = p.slice(2);
    if (rest[0] === 'depends_on' && typeof rest[1] === 'number' && rest[1] >= g.ownDeps) {
      return at(['tasks', g.group, 'depends_on', rest[1] - g.ownDeps, ...rest.slice(2)], message, atKey);
    }
    return g.at(['tasks', g.local, ...rest], message, atKey);
  };
}

/** `unknown task "review_api"` is clearer when it says the name is a group's ('' when it is not one). */
export function groupHint(name: string, exits: ReadonlyMap<string, string[]>): string {
  const e = exits.get(name);
  return e ? ` ("${name}" is a group: name one of its tasks, such as ${e[e.length - 1]})` : '';
}

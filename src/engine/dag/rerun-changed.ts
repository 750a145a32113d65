import type { Logger } from 'pino';
import { withTx } from '../../db/tx.js';
import type { Db } from '../../db/handle.js';
import { dagGet, dagLockGraph } from '../../db/queries/dags.js';
import { edgeListForDag } from '../../db/queries/edges.js';
import { taskListForDag } from '../../db/queries/tasks-read.js';
import { SET_FIELDS_TEXT, SETTINGS_MAX, specSettingParse, specsChange, type SpecSetting } from '../../dag/spec-change.js';
import type { TaskSpec } from '../../dag/spec.js';
import { ConflictError, DagStateError, InvalidInputError, NotFoundError } from '../../errors.js';
import { judgeGapsFind, judgeGapText } from './judge-check.js';
import { backpressureCheck, dagCreateInTx, type CarriedTask } from './submit.js';
import { dagSpecRebuild } from './rerun-spec.js';

/**
 * Re-run a finished DAG with a change, as a NEW DAG (`dagent dag rerun DAG --model M --set PATH=VALUE`, POST
 * /api/dags/:id/reruns): the original stays as it was, so the two can be compared (dag compare). The DAG is rebuilt
 * from its rows (rerun-spec.ts), the change made to its task specs (dag/spec-change.ts), and the new DAG created
 * by the same insert as a submit (dagCreateInTx), in one transaction: all of it or nothing.
 *
 * Which tasks run: each task whose spec the change altered, every task downstream of one, and each task that had
 * not completed (the original was cancelled before it). Every other task is carried over: inserted completed with
 * the original's output, marked `reused_from` (the task that made that output), with no attempt and no cost.
 */

/** The change, as the CLI and the HTTP API take it. */
export interface RerunChange {
  /** Run every LLM task on this model (its models become [model], its fallback models none). */
  model?: string;
  /** Spec fields to set, by path (`prompt`, `write.prompt`, `constraints.max_cost_usd`): see dag/spec-change.ts. */
  set?: Readonly<Record<string, unknown>>;
  /** The values of `set` are text as typed on a command line (prompt as it is, any other field read as YAML). */
  setFromText?: boolean;
}

export interface RerunChangedOptions {
  /** Who asked: the new DAG's created_by (`cli:$USER`, `api:<token>`). Default `api`. */
  by?: string;
  /** Why, recorded with the change. */
  note?: string;
  /** Accept a DAG whose llm-judge steps no active judge can serve now (the result then carries warnings), as submit's force. */
  force?: boolean;
  /** Backpressure, as submit's: refuse while READY + PENDING tasks number this many or more. */
  maxQueued?: number;
  log?: Logger;
}

/** What a rerun changed and ran, as stored on the new DAG (dags.rerun_change) and shown by status, the API and the dashboard. */
export interface RerunChangeRecord {
  model: string | null;
  /** Each `--set` as applied: the task it named (null: every LLM task), the field and the value. */
  set: SpecSetting[];
  /** The tasks whose spec the change altered. */
  changed: string[];
  /** How many tasks run (those changed, downstream of one, or not completed before) and how many were carried over. */
  rerunTasks: number;
  reusedTasks: number;
  by: string;
  note: string | null;
}

export interface RerunChangedResult {
  dagId: string;
  rerunOf: string;
  name: string;
  tasks: number;
  change: RerunChangeRecord;
  /** The tasks that run, and those carried over, by key. */
  rerun: string[];
  reused: string[];
  /** What `force` let through (llm-judge steps no active judge can serve now). */
  warnings?: string[];
}

export async function dagRerunChanged(db: Db, dagId: string, change: RerunChange, opts: RerunChangedOptions = {}): Promise<RerunChangedResult> {
  // The change is checked before anything is read: a bad field or model is refused for any DAG.
  const given = Object.entries(change.set ?? {});
  if (given.length > SETTINGS_MAX) throw new InvalidInputError(`set: ${given.length} fields; at most ${SETTINGS_MAX} in one rerun`, { field: 'set' });
  const settings = given.map(([path, value]) => specSettingParse(path, value, change.setFromText));
  if (change.model === undefined && settings.length === 0) {
    throw new InvalidInputError(`a rerun needs a change: a model (--model M) or a spec field (--set ${SET_FIELDS_TEXT}=VALUE); to run failed tasks again in the same DAG, use --from-failed`, { field: 'model' });
  }
  const by = opts.by ?? 'api';
  const result = await withTx(db, async (tx) => {
    const dag = await dagGet(tx, dagId);
    if (!dag) throw new NotFoundError('DAG', dagId);
    if (opts.maxQueued !== undefined) await backpressureCheck(tx, opts.maxQueued, dag.tenantId);
    // Under the graph lock: nothing adds a task or an edge to it while it is read (a late spawn, dagEdgesAdd).
    await dagLockGraph(tx, dagId);
    if (dag.prunedAt) throw new ConflictError(`DAG ${dagId} is being pruned (it finished before the retention period): it cannot be re-run`, { dagId });
    if (dag.status !== 'completed' && dag.status !== 'cancelled') {
      throw new DagStateError(dagId, dag.status, 'only a finished DAG (completed or cancelled) is re-run with a change; wait for it to finish, or cancel it first');
    }
    const rows = await taskListForDag(tx, dagId);
    const edges = await edgeListForDag(tx, dagId);
    const original = dagSpecRebuild(dag, rows, edges);
    const { tasks, changed } = specsChange(original.spec.tasks, { model: change.model, settings });
    if (changed.length === 0) {
      throw new InvalidInputError(`nothing would change: no task's spec differs with this change (--model and --set FIELD change the LLM tasks: those that name a model or require capability llm; --set TASK.FIELD changes one task); nothing was created`, { field: change.model !== undefined ? 'model' : 'set' });
    }
    const runs = runningKeys(tasks, new Set([...changed, ...tasks.filter((t) => original.rows.get(t.key)!.status !== 'completed').map((t) => t.key)]));
    const carried = new Map<string, CarriedTask>();
    for (const t of tasks) {
      if (runs.has(t.key)) continue;
      const row = original.rows.get(t.key)!;
      carried.set(t.key, { fromTaskId: row.reusedFrom ?? row.id, output: row.output });
    }
    const spec = { ...original.spec, tasks };
    const gaps = await judgeGapsFind(tx, [spec], dag.tenantId);
    if (gaps.length && !opts.force) throw new InvalidInputError(`${gaps.map(judgeGapText).join('; ')}; nothing was created (--force, or force: true over HTTP, re-runs anyway)`, { gaps });
    const record: RerunChangeRecord = {
      model: change.model ?? null, set: settings, changed, rerunTasks: runs.size, reusedTasks: carried.size, by, note: opts.note ?? null,
    };
    const created = await dagCreateInTx(tx, spec, { createdBy: by, tenant: dag.tenantId, rerun: { of: dagId, change: record, carried } });
    return {
      dagId: created.dagId, rerunOf: dagId, name: created.name, tasks: created.tasks, change: record,
      rerun: tasks.filter((t) => runs.has(t.key)).map((t) => t.key), reused: [...carried.keys()],
      ...(gaps.length ? { warnings: gaps.map(judgeGapText) } : {}),
    };
  });
  opts.log?.info({ dagId: result.dagId, rerunOf: dagId, rerun: result.rerun.length, reused: result.reused.length }, 'dag rerun with a change');
  return result;
}

/** `start` and every task downstream of one of them. */
function runningKeys(tasks: readonly TaskSpec[], start: ReadonlySet<string>): Set<string> {
  const below = new Map<string, string[]>();
  for (const t of tasks) for (const d of t.dependsOn) below.set(d, [...(below.get(d) ?? []), t.key]);
  const out = new Set(start);
  const queue = [...start];
  for (let i = 0; i < queue.length; i++) {
    for (const k of below.get(queue[i]!) ?? []) {
      if (out.has(k)) continue;
      out.add(k);
      queue.push(k);
    }
  }
  return out;
}

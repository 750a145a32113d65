import type { Db } from '../../db/handle.js';
import { taskRankInputs, taskRanksSet, taskTypeMedians } from '../../db/queries/tasks-priority.js';
import { dagGraphBuild, upwardRanks, type DagGraph } from '../../dag/graph.js';
import type { TaskSpec } from '../../dag/spec.js';
import { priorityConstants } from '../../model/priority.js';
import type { TaskPlan } from '../attempt/task-row.js';


/** Each task's estimate: declared (`estimate:`), else the learned median of its type, else the default. */
export async function estimatesResolve(db: Db, tasks: Pick<TaskSpec, 'key' | 'type' | 'estimateSec'>[]): Promise<Map<string, number>> {
  const unknown = [...new Set(tasks.filter((t) => t.estimateSec === undefined).map((t) => t.type))];
  const learned = await taskTypeMedians(db, unknown);
  const fallback = priorityConstants().defaultEstimateSec;
  return new Map(tasks.map((t) => [t.key, t.estimateSec ?? learned.get(t.type) ?? fallback]));
}

/** Estimates and upward ranks of a new DAG's tasks, before they are inserted; `graph`: theirs, by key (the cycle check's). */
export async function dagPlan(db: Db, tasks: TaskSpec[], graph: DagGraph): Promise<Map<string, TaskPlan>> {
  const estimates = await estimatesResolve(db, tasks);
  const ranks = upwardRanks(graph, (k) => estimates.get(k)!);
  return new Map(tasks.map((t) => [t.key, { estimateSec: estimates.get(t.key)!, cpRankSec: ranks.get(t.key)! }]));
}

/**
 * Recompute the upward ranks of a DAG after its graph changed (a spawn, added
 * edges), under the DAG's graph lock; only changed ranks are written. Validation
 * tasks are outside the graph and keep their own.
 *
 * `spawn`: the graph grew by what an agent added (subtasks, or a for_each's items over its output). Nothing an
 * agent adds may make any task more urgent than the task it spawned from was: the tasks that were there keep their
 * ranks (a chain of subtasks, or a dependent with a huge estimate, would otherwise lift the tasks upstream of it,
 * ones the agent does not hold among them), and the new ones rank at most as that task did.
 */
export async function dagRanksRefresh(db: Db, dagId: string, spawn?: { parentId: string; added: ReadonlySet<string> }): Promise<void> {
  const { tasks, edges } = await taskRankInputs(db, dagId);
  const estimate = new Map(tasks.map((t) => [t.id, t.estimateSec]));
  const ranks = upwardRanks(dagGraphBuild(tasks.map((t) => t.id), edges), (id) => estimate.get(id)!);
  if (spawn) {
    const parentRank = tasks.find((t) => t.id === spawn.parentId)?.cpRankSec ?? 0;
    for (const t of tasks) ranks.set(t.id, Math.min(ranks.get(t.id)!, spawn.added.has(t.id) ? parentRank : t.cpRankSec));
  }
  const changed = tasks.filter((t) => Math.abs(t.cpRankSec - ranks.get(t.id)!) > 1e-9).map((t) => ({ id: t.id, rank: ranks.get(t.id)! }));
  await taskRanksSet(db, changed);
}

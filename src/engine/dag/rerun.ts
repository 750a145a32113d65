import { withTx } from '../../db/tx.js';
import type { Db } from '../../db/handle.js';
import { dagGet, dagLockGraph, dagReopen, dagStatusRefresh, dagTasksReopened } from '../../db/queries/dags.js';
import { deadLetterResolveForTasks } from '../../db/queries/dead-letters.js';
import { eventInsertMany } from '../../db/queries/events.js';
import { taskGet } from '../../db/queries/tasks-read.js';
import {
  taskDownstreamStates, taskFailedIds, taskMapChildrenRetire, taskReopen, taskWaitingDependents, type ReopenedRow,
} from '../../db/queries/tasks-rerun.js';
import { ConflictError, IllegalTransitionError, InvalidInputError, NotFoundError } from '../../errors.js';
import { HELD_STATES, TRANSITIONS } from '../../model/state-machine.js';
import { taskDepsRecountReopened } from '../../db/queries/task-deps.js';
import { taskStepsDrop, taskStepsDropFrom } from '../../db/queries/task-steps.js';

export interface RerunOptions { by?: string; note?: string }
/** `stepsDropped`: durable steps deleted, so the re-run does that work again (those it keeps, it replays). */
export interface RerunResult { dagId: string; reopened: Array<{ id: string; key: string; previous: string }>; stepsDropped: number }

/**
 * Run a finished task again (completed, dead-lettered or cancelled), with `downstream` everything after it
 * too: each reopened task gets a fresh attempt budget and waits for its upstream tasks as on the first run;
 * its attempts and outputs so far stay in the history. Dependents that had not started wait for it again.
 * A task downstream that an agent holds right now is a 409: wait for it, or cancel it, first.
 * The re-run starts without the tasks' durable steps; with `fromStep`, the task keeps the steps it recorded before
 * that one and replays them (a name it never recorded is a 400, and nothing changes).
 */
export async function taskRerun(db: Db, taskId: string, opts: RerunOptions & { downstream?: boolean; fromStep?: string } = {}): Promise<RerunResult> {
  return withTx(db, async (tx) => {
    const task = await taskGet(tx, taskId);
    if (!task) throw new NotFoundError('task', taskId);
    if (!(TRANSITIONS.rerun.from as readonly string[]).includes(task.status)) {
      throw new IllegalTransitionError(taskId, 'rerun', task.status, TRANSITIONS.rerun.from);
    }
    await dagLockGraph(tx, task.dagId);
    await dagNotPruning(tx, task.dagId);
    let ids = [taskId];
    if (opts.downstream) {
      const below = await taskDownstreamStates(tx, [taskId]);
      const busy = below.filter((t) => (HELD_STATES as readonly string[]).includes(t.status));
      if (busy.length) throw new ConflictError(`task ${busy[0]!.key} downstream of ${task.key} is ${busy[0]!.status} now: wait for it, or cancel it, before re-running with --downstream`, { taskId: busy[0]!.id });
      // A for_each task whose children are still at work would collect what they make of the old list.
      const mapping = below.find((t) => t.mapping);
      if (mapping) throw new ConflictError(`for_each task ${mapping.key} downstream of ${task.key} is waiting for its children: wait for them, or cancel it, before re-running with --downstream`, { taskId: mapping.id });
      ids = below.filter((t) => (TRANSITIONS.rerun.from as readonly string[]).includes(t.status)).map((t) => t.id);
    }
    let kept: { taskId: string; dropped: number } | undefined;
    if (opts.fromStep !== undefined) {
      const dropped = await taskStepsDropFrom(tx, taskId, opts.fromStep);
      if (dropped === null) throw new InvalidInputError(`task ${taskId} recorded no step named ${JSON.stringify(opts.fromStep)}: --from-step names a task-scoped step it recorded (dagent task steps)`, { field: 'fromStep' });
      kept = { taskId, dropped };
    }
    return reopen(tx, task.dagId, ids, opts, kept);
  });
}

/** Run a DAG's failed tasks again (dead-lettered, and cancelled ones): a cancelled or blocked DAG runs on. */
export async function dagRerunFailed(db: Db, dagId: string, opts: RerunOptions = {}): Promise<RerunResult> {
  return withTx(db, async (tx) => {
    const dag = await dagGet(tx, dagId);
    if (!dag) throw new NotFoundError('DAG', dagId);
    await dagLockGraph(tx, dagId);
    await dagNotPruning(tx, dagId);
    const ids = (await taskFailedIds(tx, dagId)).map((r) => r.id);
    if (ids.length === 0) throw new InvalidInputError(`DAG ${dagId} has no dead-lettered or cancelled task to run again`);
    return reopen(tx, dagId, ids, opts);
  });
}

/** Under the DAG's graph lock: a DAG retention has begun deleting is not run again (retention marks under the same lock). */
async function dagNotPruning(tx: Db, dagId: string): Promise<void> {
  const dag = await dagGet(tx, dagId);
  if (dag?.prunedAt) throw new ConflictError(`DAG ${dagId} is being pruned (it finished before the retention period): it cannot run again`, { dagId });
}

/** `kept`: the task whose steps before one were kept (already trimmed), and how many of its steps went. */
async function reopen(tx: Db, dagId: string, ids: string[], opts: RerunOptions, kept?: { taskId: string; dropped: number }): Promise<RerunResult> {
  const by = opts.by ?? 'human';
  // A for_each task among them maps again when it is ready: its previous children step aside (kept as history).
  const retired = await taskMapChildrenRetire(tx, ids);
  if (retired.openChild) {
    throw new ConflictError(`${retired.openChild.key} is ${retired.openChild.status}: a for_each task runs again only once its children are completed or cancelled (retry or cancel it first)`);
  }
  // A retired child is history: it does not run again with its old item (its task maps anew).
  const gone = new Set(retired.retired);
  const reopened: ReopenedRow[] = await taskReopen(tx, ids.filter((id) => !gone.has(id)));
  const reopenedIds = reopened.map((r) => r.id);
  // Closed tasks (completed, cancelled) count as open again; a dead-lettered one never stopped counting.
  await dagTasksReopened(tx, dagId, reopened.filter((r) => r.previous !== 'dead_lettered').length);
  await deadLetterResolveForTasks(tx, reopened.filter((r) => r.previous === 'dead_lettered').map((r) => r.id), by, opts.note ?? 'run again', 'retried');
  await taskDepsRecountReopened(tx, [...reopenedIds, ...(await taskWaitingDependents(tx, reopenedIds))]);
  // A re-run does the work again: its durable steps go (all of them, but for those `kept` trimmed already).
  const stepsDropped = (kept?.dropped ?? 0) + await taskStepsDrop(tx, reopenedIds.filter((id) => id !== kept?.taskId));
  await dagReopen(tx, dagId);
  await dagStatusRefresh(tx, [dagId]);
  await eventInsertMany(tx, [
    ...reopened.map((r) => ({ type: 'task.rerun', dagId, taskId: r.id, data: { previous: r.previous, by, note: opts.note ?? null } })),
    { type: 'dag.rerun', dagId, data: { tasks: reopened.length, by, note: opts.note ?? null, stepsDropped } },
  ]);
  return { dagId, reopened: reopened.map((r) => ({ id: r.id, key: r.key, previous: r.previous })), stepsDropped };
}

import { withTx } from '../../db/tx.js';
import type { Db } from '../../db/handle.js';
import { dagGet, dagLockGraph, dagMarkCancelled, dagStatusRefresh, dagTasksClosed } from '../../db/queries/dags.js';
import { deadLetterResolveForTasks } from '../../db/queries/dead-letters.js';
import { eventInsertMany } from '../../db/queries/events.js';
import { taskCancelCascade, taskNonTerminalIdsForDag } from '../../db/queries/tasks-cancel.js';
import { taskGet } from '../../db/queries/tasks-read.js';
import { DagStateError, IllegalTransitionError, NotFoundError } from '../../errors.js';
import { HELD_STATES, TRANSITIONS } from '../../model/state-machine.js';
import { attemptsEndedEmit, dagsFinishedEmit } from '../../observability/engine-events.js';
import type { CancelledRow } from '../../db/rows.js';

/** Cancel one task and everything downstream that can no longer run. Returns the cancelled tasks. */
export async function taskCancel(db: Db, taskId: string, by = 'human', note?: string): Promise<CancelledRow[]> {
  return withTx(db, async (tx) => {
    const task = await taskGet(tx, taskId);
    if (!task) throw new NotFoundError('task', taskId);
    await dagLockGraph(tx, task.dagId);
    const cancelled = await taskCancelCascade(tx, [taskId]);
    if (!cancelled.some((c) => c.id === taskId)) {
      throw new IllegalTransitionError(taskId, 'cancel', task.status, TRANSITIONS.cancel.from);
    }
    await cancelledSettle(tx, cancelled, by, note);
    return cancelled;
  });
}

/** Cancel every unfinished task of a DAG and mark the DAG cancelled. */
export async function dagCancel(db: Db, dagId: string, by = 'human', note?: string): Promise<CancelledRow[]> {
  return withTx(db, async (tx) => {
    const dag = await dagGet(tx, dagId);
    if (!dag) throw new NotFoundError('DAG', dagId);
    await dagLockGraph(tx, dagId);
    const ids = (await taskNonTerminalIdsForDag(tx, dagId)).map((r) => r.id);
    const cancelled = ids.length ? await taskCancelCascade(tx, ids) : [];
    if (!(await dagMarkCancelled(tx, dagId))) {
      throw new DagStateError(dagId, dag.status, 'only running or blocked DAGs can be cancelled');
    }
    await cancelledSettle(tx, cancelled, by, note);
    await eventInsertMany(tx, [{ type: 'dag.cancelled', dagId, data: { by, note: note ?? null, tasks: cancelled.length } }]);
    dagsFinishedEmit([dagId]);
    return cancelled;
  });
}

/** Count cancelled tasks out of their DAGs, close their dead letters, and re-derive DAG status. */
export async function cancelledSettle(tx: Db, cancelled: CancelledRow[], by: string, note?: string): Promise<void> {
  const perDag = new Map<string, number>();
  for (const c of cancelled) perDag.set(c.dagId, (perDag.get(c.dagId) ?? 0) + 1);
  await dagTasksClosed(tx, perDag);
  await deadLetterResolveForTasks(tx, cancelled.filter((c) => c.previous === 'dead_lettered').map((c) => c.id), by, note ?? 'task cancelled');
  const refreshed = await dagStatusRefresh(tx, [...perDag.keys()]);
  attemptsEndedEmit(() => cancelled.filter((c) => (HELD_STATES as readonly string[]).includes(c.previous)).map((c) => ({ taskId: c.id, fence: c.fence })));
  dagsFinishedEmit(refreshed.filter((d) => d.status === 'completed' || d.status === 'cancelled').map((d) => d.id));
  await eventInsertMany(tx, refreshed.filter((d) => d.status === 'completed').map((d) => ({ type: 'dag.completed', dagId: d.id, data: { by } })));
  await eventInsertMany(tx, cancelled.map((c) => ({ type: 'task.cancelled', dagId: c.dagId, taskId: c.id, data: { previous: c.previous, by, note: note ?? null } })));
}

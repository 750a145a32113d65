import type { Db } from '../../db/connection.js';
import { taskGet } from '../../db/queries/tasks-read.js';
import { LeaseLostError, NotFoundError, TransitionRacedError } from '../../errors.js';
import { LEASED_STATES, assertTransition, type TaskState, type Transition } from '../../model/state-machine.js';

/** A task as its holder names it: its id and the fencing token its claim returned. */
export interface TaskRef { taskId: string; fence: number }

/**
 * A guarded UPDATE changed nothing: say why. A caller whose token is stale, or
 * whose task is no longer leased, has lost its lease; otherwise the transition is illegal.
 */
export async function guardExplain(db: Db, taskId: string, fence: number, transition: Transition): Promise<never> {
  const task = await taskGet(db, taskId);
  if (!task) throw new NotFoundError('task', taskId);
  if (task.fence !== fence || !LEASED_STATES.includes(task.status as TaskState)) {
    throw new LeaseLostError(taskId, fence, task.fence, task.status);
  }
  assertTransition(taskId, transition, task.status);
  // State and token match now, so the row changed between the UPDATE and this read (a reaper's expiry re-check lost to a heartbeat).
  throw new TransitionRacedError(taskId, transition, task.status);
}

import { withTx } from '../../db/tx.js';
import type { Db } from '../../db/handle.js';
import { eventInsertMany } from '../../db/queries/events.js';
import { taskReleaseMark } from '../../db/queries/tasks-lifecycle.js';
import type { AttemptSpend } from '../../db/rows.js';
import { attemptsEndedEmit } from '../../observability/engine-events.js';
import { refusalExplain, type TaskRef } from './refusal.js';

/** Hand a leased task back to READY without consuming an attempt (agent shutdown); cost reported so far is charged. */
export async function taskRelease(db: Db, ref: TaskRef & AttemptSpend & { reason?: string }): Promise<void> {
  const ok = await withTx(db, async (tx) => {
    const released = await taskReleaseMark(tx, ref.taskId, ref.fence, ref.reason ?? 'released by agent', ref);
    if (released) {
      await eventInsertMany(tx, [{ type: 'task.released', taskId: ref.taskId, dagId: released.dagId, agentId: released.agentId, data: { reason: ref.reason ?? null } }]);
    }
    return released !== null;
  });
  if (!ok) await refusalExplain(db, ref, 'release');
  attemptsEndedEmit(() => [{ taskId: ref.taskId, fence: ref.fence }]);
}

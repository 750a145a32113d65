import { withTx, type Db } from '../db/connection.js';
import { eventInsertMany } from '../db/queries/events.js';
import type { CompletionResult } from '../db/queries/tasks-complete.js';
import { taskLeaseExtend, taskReleaseMark, taskStartMark } from '../db/queries/tasks-lifecycle.js';
import { taskIdsNeedingValidation } from '../db/queries/tasks-validate.js';
import { IllegalTransitionError, LeaseLostError } from '../errors.js';
import { completionInput, completionWrite, type Completion } from './completion.js';
import { guardExplain, type TaskRef } from './guard.js';
import { taskOutputSettle, type OutputOutcome } from './output-settle.js';

/**
 * What an agent does with a task it holds: start it, keep it, complete it or
 * hand it back. Failing is in failure.ts; what a completion goes through when
 * the output must be validated is in output-settle.ts.
 */

/** claimed → running; the heartbeat lease starts (default: three of the task's heartbeat_sec, else 60 s). */
export async function taskStart(db: Db, ref: TaskRef, leaseSec?: number): Promise<Date> {
  return (await taskStartMark(db, ref.taskId, ref.fence, leaseSec)) ?? guardExplain(db, ref.taskId, ref.fence, 'start');
}

/** Extend the lease and record progress. Throws LeaseLostError if the caller no longer holds the task. */
export async function taskHeartbeat(
  db: Db, ref: TaskRef & { progress?: number; message?: string; leaseSec?: number },
): Promise<Date> {
  const lease = await taskLeaseExtend(db, ref.taskId, ref.fence, ref.leaseSec, ref.progress, ref.message);
  return lease ?? guardExplain(db, ref.taskId, ref.fence, 'heartbeat');
}

/**
 * Complete one task; throws LeaseLostError / IllegalTransitionError if it was refused.
 * A task that declares output validation (or is a validation task) is settled by
 * taskOutputSettle instead: `settled` says whether it completed, waits in VALIDATING or was rejected.
 */
export async function taskComplete(db: Db, c: Completion): Promise<CompletionResult & { settled?: OutputOutcome }> {
  const r = await completionWrite(db, [completionInput(c)]);
  if (r.completed.length > 0) return r;
  if ((await taskIdsNeedingValidation(db, [c.taskId])).size > 0) return { ...r, settled: await taskOutputSettle(db, c) };
  return guardExplain(db, c.taskId, c.fence, 'complete');
}

/**
 * Complete a batch in one statement. Refused items (stale token, wrong state) are
 * reported in `refused`, not thrown, so one zombie does not fail a batch. Items the
 * statement refused because their output must be validated are settled one by one
 * (`settled`).
 */
export async function taskCompleteMany(
  db: Db, items: Completion[],
): Promise<CompletionResult & { refused: string[]; settled: Map<string, OutputOutcome> }> {
  const r = await completionWrite(db, items.map((c) => completionInput(c)));
  const done = new Set(r.completed);
  const settled = new Map<string, OutputOutcome>();
  const notDone = items.filter((i) => !done.has(i.taskId));
  const checked = await taskIdsNeedingValidation(db, notDone.map((i) => i.taskId));
  for (const item of notDone.filter((i) => checked.has(i.taskId))) {
    try {
      settled.set(item.taskId, await taskOutputSettle(db, item));
    } catch (e) {
      // Refused like any stale completion: the caller sees it in `refused`.
      if (!(e instanceof LeaseLostError || e instanceof IllegalTransitionError)) throw e;
    }
  }
  return { ...r, refused: notDone.filter((i) => !settled.has(i.taskId)).map((i) => i.taskId), settled };
}

/** Hand a leased task back to READY without consuming an attempt (agent shutdown); cost reported so far is charged. */
export async function taskRelease(
  db: Db, ref: TaskRef & { reason?: string; costUsd?: number; tokensIn?: number; tokensOut?: number; model?: string | null },
): Promise<void> {
  const ok = await withTx(db, async (tx) => {
    const released = await taskReleaseMark(tx, ref.taskId, ref.fence, ref.reason ?? 'released by agent', ref);
    if (released) {
      await eventInsertMany(tx, [{ type: 'task.released', taskId: ref.taskId, dagId: released.dagId, agentId: released.agentId, data: { reason: ref.reason ?? null } }]);
    }
    return released !== null;
  });
  if (!ok) await guardExplain(db, ref.taskId, ref.fence, 'release');
}

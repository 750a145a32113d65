import { withTx, type Db } from '../../db/connection.js';
import { eventInsertMany } from '../../db/queries/events.js';
import { attemptsEndedEmit } from '../../observability/engine-events.js';

import { taskLeaseExtend, taskReleaseMark, taskStartMark } from '../../db/queries/tasks-lifecycle.js';
import { taskIdsNeedingValidation } from '../../db/queries/tasks-validate.js';
import { ConflictError, IllegalTransitionError, LeaseLostError } from '../../errors.js';
import { completionReplayed } from './replay.js';
import { completionInput, completionWrite, type Completion } from './completion.js';
import { guardExplain, type TaskRef } from './refusal.js';
import { taskOutputSettle, type OutputOutcome } from './settle.js';
import type { CompletionResult, HandOff } from '../../db/rows.js';
import type { ClaimedTask } from './claim.js';

/**
 * What an agent does with a task it holds: start it, keep it, complete it or
 * hand it back. Failing is in fail.ts; what a completion goes through when
 * the output must be validated is in settle.ts.
 */

/** claimed → running; the heartbeat lease starts (default: three of the task's heartbeat_sec, else 60 s). */
export async function taskStart(db: Db, ref: TaskRef, leaseSec?: number): Promise<Date> {
  return (await taskStartMark(db, ref.taskId, ref.fence, leaseSec)) ?? guardExplain(db, ref.taskId, ref.fence, 'start');
}

/** Extend the lease and record progress. Throws LeaseLostError if the caller no longer holds the task. */
export async function taskHeartbeat(
  db: Db, ref: TaskRef & { progress?: number; message?: string; leaseSec?: number },
): Promise<Date> {
  // Four decimals are plenty, and a value like 1e-320 would underflow the column's real type.
  const progress = ref.progress === undefined ? undefined : Math.round(ref.progress * 10_000) / 10_000;
  const lease = await taskLeaseExtend(db, ref.taskId, ref.fence, ref.leaseSec, progress, ref.message);
  return lease ?? guardExplain(db, ref.taskId, ref.fence, 'heartbeat');
}

/**
 * Complete one task; throws LeaseLostError / IllegalTransitionError if it was refused.
 * A task that declares output validation (or is a validation task) is settled by
 * taskOutputSettle instead: `settled` says whether it completed, waits in VALIDATING or was rejected.
 */
export async function taskComplete(db: Db, c: Completion): Promise<CompletionResult & { settled?: OutputOutcome; replayed?: boolean }> {
  const r = await completionWrite(db, [completionInput(c)]);
  if (r.completed.length > 0) return r;
  if ((await taskIdsNeedingValidation(db, [c.taskId])).size > 0) {
    try {
      return { ...r, settled: await taskOutputSettle(db, c) };
    } catch (e) {
      // A replay finds the task moved on: taken back (lease lost) or waiting for its verdict (VALIDATING, no second submission).
      if (!(e instanceof LeaseLostError || e instanceof IllegalTransitionError) || !(await completionReplayed(db, c))) throw e;
      return { ...r, replayed: true };
    }
  }
  // The same completion made again (its reply was lost) is answered as done; a different one is a 409.
  const replay = await completionReplayed(db, c);
  if (replay) return { ...r, completed: replay.status === 'completed' ? [c.taskId] : [], replayed: true };
  return guardExplain(db, c.taskId, c.fence, 'complete');
}

/**
 * Complete a batch in one statement. Refused items (stale token, wrong state) are
 * reported in `refused`, not thrown, so one zombie does not fail a batch. Items the
 * statement refused because their output must be validated are settled one by one
 * (`settled`). With `handTo` (one agent completing its own tasks), the dependents they unblock
 * that a claim of that agent would take first come back claimed for it (`handed`; tasks-hand-off.ts).
 */
export async function taskCompleteMany(
  db: Db, items: Completion[], opts: { handTo?: HandOff } = {},
): Promise<CompletionResult & { refused: string[]; settled: Map<string, OutputOutcome>; replayed: string[]; handed: ClaimedTask[] }> {
  const r = await completionWrite(db, items.map((c) => completionInput(c)), { handTo: opts.handTo });
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
  // A completion made again after its reply was lost (the runtime retries across a dropped connection)
  // was applied the first time: it is not refused. A different result still is.
  const replayed = new Set<string>();
  for (const item of notDone.filter((i) => !settled.has(i.taskId))) {
    try {
      if (await completionReplayed(db, item)) replayed.add(item.taskId);
    } catch (e) {
      if (!(e instanceof ConflictError)) throw e;
    }
  }
  return { ...r, refused: notDone.filter((i) => !settled.has(i.taskId) && !replayed.has(i.taskId)).map((i) => i.taskId), settled, replayed: [...replayed] };
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
  attemptsEndedEmit(() => [{ taskId: ref.taskId, fence: ref.fence }]);
}

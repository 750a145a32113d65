import type { Db } from '../../db/handle.js';
import { taskRefusalRead } from '../../db/queries/tasks-refusal.js';
import type { RefusedRow } from '../../db/rows.js';
import { BudgetExceededError, ConflictError, LeaseLostError, NotFoundError, TransitionRacedError, type DagentError } from '../../errors.js';
import { attemptBudgetStop } from '../../db/queries/attempts.js';
import { limitText, type LimitReached } from './usage-limits.js';
import { LEASED_STATES, assertTransition, fromStates, type TaskState, type Transition } from '../../model/state-machine.js';
import type { FailureOutcome } from './outcome.js';

/**
 * Why a guarded statement did not apply a report. The completion and failure statements return, for each report
 * they skipped, the task's row and the attempt under the reported fence as their snapshot saw them (RefusedRow,
 * db/queries/tasks-refusal.ts); these pure functions turn that into the answer: a replay of a report already
 * applied, LEASE_LOST, ILLEGAL_TRANSITION, CONFLICT or NOT_FOUND, with no further read.
 *
 * `race`: the snapshot shows a row the guard should have matched, so it changed between the snapshot and the
 * UPDATE (a reaper's or a canceller's statement committed meanwhile). Only then is the row read again
 * (refusalExplain), as it stands now.
 */

/** A task as its holder names it: its id and the fencing token its claim returned. */
export interface TaskRef { taskId: string; fence: number }

/**
 * Why a holder's statement that needs a live lease (a durable step's record or replay, a usage report) was refused:
 * NOT_FOUND for no such task, else LEASE_LOST, saying when the fence and state still match but the lease lapsed (the
 * reaper is about to take the task back).
 */
export function holdRefusal(ref: TaskRef, task: { status: string; fence: number; leaseLapsed: boolean } | null): NotFoundError | LeaseLostError {
  if (!task) return new NotFoundError('task', ref.taskId);
  return new LeaseLostError(ref.taskId, ref.fence, task.fence, task.leaseLapsed && task.fence === ref.fence ? `${task.status}, lease lapsed` : task.status);
}

/**
 * holdRefusal, except for an attempt a spend limit stopped: its later reports and step writes are BUDGET_EXCEEDED
 * (409), naming the limit, rather than LEASE_LOST. Reads the attempt's row, on the refusal path only.
 */
export async function holdRefusalRead(db: Db, ref: TaskRef, task: { status: string; fence: number; leaseLapsed: boolean } | null): Promise<DagentError> {
  const refused = holdRefusal(ref, task);
  if (refused instanceof NotFoundError) return refused;
  const stop = await attemptBudgetStop(db, ref.taskId, ref.fence) as LimitReached | undefined;
  if (!stop) return refused;
  return new BudgetExceededError(
    `task ${ref.taskId}: the attempt under fence ${ref.fence} was stopped (${limitText(stop)}); it may report nothing more`,
    { taskId: ref.taskId, fence: ref.fence, ...stop },
  );
}

/** The guard's answer for `transition` from the row as it stood: LEASE_LOST, ILLEGAL_TRANSITION, NOT_FOUND, or `race`. */
export function guardRefusal(ref: TaskRef, transition: Transition, row: Pick<RefusedRow, 'status' | 'fence'> | null): DagentError | 'race' {
  if (!row || row.status === null || row.fence === null) return new NotFoundError('task', ref.taskId);
  if (row.fence !== ref.fence || !LEASED_STATES.includes(row.status as TaskState)) {
    return new LeaseLostError(ref.taskId, ref.fence, row.fence, row.status);
  }
  try {
    assertTransition(ref.taskId, transition, row.status);
  } catch (e) {
    return e as DagentError;
  }
  return 'race';
}

/** What to do with a completion the statement skipped. */
export type CompletionRefusal =
  /** Its output must be validated, and the task is still the reporter's to submit: settle.ts takes it. */
  | { kind: 'settle' }
  | { kind: 'replayed'; completed: boolean }
  | { kind: 'refused'; error: DagentError }
  | { kind: 'race' };

/**
 * A completion the statement did not apply. The same completion made again (same fence, same output: its reply
 * was lost) is a replay; a different one for an attempt that already ended is a CONFLICT (an attempt has one
 * result); else the guard's answer.
 */
export function completionRefusal(c: TaskRef, row: RefusedRow | null): CompletionRefusal {
  if (row?.validated && row.fence === c.fence && fromStates('submitOutput').includes(row.status as TaskState)) return { kind: 'settle' };
  if (row && row.fence === c.fence) {
    if ((row.status === 'completed' || row.status === 'validating') && row.outcome !== 'failed') {
      // `completed` as the first answer said it: a validated output was settled, not completed by the statement.
      if (row.sameOutput) return { kind: 'replayed', completed: row.status === 'completed' && !row.validated };
      return { kind: 'refused', error: new ConflictError(`task ${c.taskId}: the attempt under fence ${c.fence} already reported a different output; an attempt has one result`, { taskId: c.taskId, fence: c.fence }) };
    }
    // The reaper failed the attempt (its lease lapsed): the holder lost its lease, whatever came first.
    if (row.outcome === 'failed' && row.reaped && row.status !== null) return { kind: 'refused', error: new LeaseLostError(c.taskId, c.fence, row.fence, row.status) };
    if (row.outcome === 'failed') {
      return { kind: 'refused', error: new ConflictError(`task ${c.taskId}: the attempt under fence ${c.fence} already failed (${row.errorClass}); it cannot also complete`, { taskId: c.taskId, fence: c.fence }) };
    }
  }
  const guard = guardRefusal(c, row?.validated ? 'submitOutput' : 'complete', row);
  return guard === 'race' ? { kind: 'race' } : { kind: 'refused', error: guard };
}

/**
 * A failure the statement did not record. The same failure reported again (same fence, class and message)
 * gets the outcome it had; a different result for an attempt that already ended is a CONFLICT; else the
 * guard's answer. `reaping`: the reaper's own failure, re-checked in its statement (never a replay): a row that
 * still matches means the holder renewed its lease meanwhile, TRANSITION_RACED.
 */
export function failureRefusal(
  f: TaskRef & { errorClass: string; message: string }, row: RefusedRow | null, reaping = false,
): { replayed: FailureOutcome } | { error: DagentError } | 'race' {
  if (row && !reaping && row.fence === f.fence && row.outcome !== null) {
    if (row.outcome === 'rate_limited' && f.errorClass === 'rate_limit') {
      return { replayed: { status: row.status === 'ready' ? 'ready' : 'retrying', retryAt: row.runAt ?? new Date(), rateLimited: true } };
    }
    if (row.outcome === 'failed' && row.errorClass === f.errorClass && row.errorMessage === f.message) {
      if (row.status === 'dead_lettered' && row.deadLetter) {
        return { replayed: { status: 'dead_lettered', deadLetterId: row.deadLetter.id, reason: row.deadLetter.reason, poisonPill: row.deadLetter.poisonPill } };
      }
      if (row.status === 'retrying' || row.status === 'ready') return { replayed: { status: row.status, retryAt: row.runAt ?? new Date() } };
    } else if (row.outcome === 'failed' && row.reaped && row.status !== null) {
      // The reaper failed the attempt (its lease lapsed): the holder lost its lease, as for a completion.
      return { error: new LeaseLostError(f.taskId, f.fence, row.fence, row.status) };
    } else if (row.outcome === 'failed' || row.outcome === 'completed') {
      const ended = row.outcome === 'completed' ? 'completed' : `failed with ${row.errorClass}: ${row.errorMessage}`;
      return { error: new ConflictError(`task ${f.taskId}: the attempt under fence ${f.fence} already ${ended}; an attempt has one result`, { taskId: f.taskId, fence: f.fence }) };
    }
  }
  const guard = guardRefusal(f, 'fail', row);
  if (guard !== 'race') return { error: guard };
  return reaping && row?.status ? { error: new TransitionRacedError(f.taskId, 'fail', row.status) } : 'race';
}

/**
 * A guarded UPDATE changed nothing: read the row as it stands now and say why. For the statements that do not
 * return their refusal (start, heartbeat, release, a spawn's wait), and for a `race`.
 */
export async function refusalExplain(db: Db, ref: TaskRef, transition: Transition): Promise<never> {
  const row = await taskRefusalRead(db, ref.taskId, ref.fence);
  const guard = guardRefusal(ref, transition, row);
  // State and token match now, so the row changed between the UPDATE and this read (a reaper's expiry re-check lost to a heartbeat).
  throw guard === 'race' ? new TransitionRacedError(ref.taskId, transition, row!.status!) : guard;
}

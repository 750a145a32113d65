import type { Logger } from 'pino';
import { withTx } from '../../db/tx.js';
import type { Db } from '../../db/handle.js';
import { eventInsertMany } from '../../db/queries/events.js';
import { approvalWaitingList, approvalWaitingFind, taskWaitingExpired, type ApprovalWaitingRow } from '../../db/queries/signals.js';
import { taskGet } from '../../db/queries/tasks-read.js';
import { ConflictError, IllegalTransitionError, InvalidInputError, LeaseLostError, NotFoundError, TransitionRacedError } from '../../errors.js';
import type { ApprovalStep } from '../../validation/steps/approval.js';
import type { Verdict } from '../../validation/verdict.js';
import { completionInput, completionWrite, outputProblem } from '../attempt/completion-write.js';
import { taskFail, type FailureOutcome } from '../attempt/fail.js';
import { personVerdictSettle, type OutputOutcome } from '../attempt/settle.js';

/**
 * Approvals: an `approval` validation step waits for a person (its validation task WAITING, never
 * claimed). Approving settles the step with a passing verdict (the output kept, or replaced by the
 * approver's edit where the step allows it); rejecting fails the judged attempt with the comment as its
 * reason, which its retry reads in its previous attempts. Agents cannot do either: these are the
 * admin routes and the CLI only.
 */

export type ApprovalWaiting = ApprovalWaitingRow;

export function approvalList(db: Db, o: { dagId?: string; limit?: number; tenants?: readonly string[] | null } = {}): Promise<ApprovalWaiting[]> {
  return approvalWaitingList(db, { dagId: o.dagId, limit: o.limit ?? 100, tenants: o.tenants });
}

export interface ApprovalDecision {
  /** Who decided: `cli:<user>`, `admin:<token id>`. */
  by: string;
  comment?: string;
}

/** An approval task's decision: it completed with the approver's output, or failed (class rejected) under its retry policy. */
export type ApprovalTaskOutcome =
  | { status: 'completed'; unblocked: number; dagsCompleted: string[] }
  | { status: 'rejected'; failure: FailureOutcome };

export interface ApprovalResult { taskId: string; approvalTaskId: string; decision: 'approved' | 'rejected'; outcome: OutputOutcome | ApprovalTaskOutcome }

/** Approve the output waiting on `id` (the task, or its approval's own task); `output` replaces it where the step allows. */
export async function taskApprove(db: Db, id: string, d: ApprovalDecision & { output?: unknown }, opts: { log?: Logger } = {}): Promise<ApprovalResult> {
  if (d.output !== undefined) {
    const bad = outputProblem(d.output);
    if (bad) throw new InvalidInputError(`the edited ${bad}`, { taskId: id });
  }
  return decide(db, id, 'approved', d.by, d.output, (step) => {
    if (d.output !== undefined && !step.allowEdit) throw new InvalidInputError(`task ${id}: its approval step does not allow editing the output (allow_edit: false); approve it as it is, or reject it with a comment`, { taskId: id });
    return { pass: true, reasons: d.comment ? [d.comment] : [], approved_by: d.by, ...(d.output !== undefined ? { edited_output: d.output } : {}) };
  }, opts);
}

/** Reject the output waiting on `id`: the attempt fails (class invalid_output) with the comment as its reason, and the retry policy decides. */
export async function taskReject(db: Db, id: string, d: ApprovalDecision & { comment: string }, opts: { log?: Logger } = {}): Promise<ApprovalResult> {
  if (!d.comment.trim()) throw new InvalidInputError('a rejection needs a comment: it is what the retry is told to fix', { field: 'comment' });
  return decide(db, id, 'rejected', d.by, undefined, () => ({ pass: false, reasons: [d.comment], rejected_by: d.by }), opts);
}

async function decide(
  db: Db, id: string, decision: 'approved' | 'rejected', by: string, output: unknown, verdictOf: (step: ApprovalStep) => Verdict, opts: { log?: Logger },
): Promise<ApprovalResult> {
  const waiting = await approvalWaitingFind(db, id);
  if (!waiting) {
    if (!(await taskGet(db, id))) throw new NotFoundError('task', id);
    throw new ConflictError(`no approval is waiting on task ${id}: it was decided already, timed out, or the task has no approval step waiting now (dagent approvals lists those that are)`, { taskId: id });
  }
  const step = (waiting.spec.input as { step: ApprovalStep }).step;
  const verdict = verdictOf(step);
  if (waiting.validatesId === null) {
    const outcome = await approvalTaskSettle(db, waiting, decision, { by, comment: verdict.reasons[0] ?? null, output }, opts);
    if (!outcome) throw new ConflictError(`the approval task ${waiting.id} was decided meanwhile; nothing was changed`, { taskId: waiting.id });
    opts.log?.info({ taskId: waiting.id, decision, by }, 'approval decided');
    return { taskId: waiting.id, approvalTaskId: waiting.id, decision, outcome };
  }
  const event = { type: `task.${decision}`, data: { by, comment: verdict.reasons[0] ?? null, edited: verdict.edited_output !== undefined } };
  const outcome = await personVerdictSettle(db, { taskId: waiting.id, fence: waiting.fence, output: verdict }, { ...opts, event });
  // Someone else decided between the look-up and the settle: theirs stands.
  if (!outcome) throw new ConflictError(`the approval of task ${waiting.validatesId} was decided meanwhile; nothing was changed`, { taskId: waiting.validatesId });
  opts.log?.info({ taskId: waiting.validatesId, decision, by }, 'approval decided');
  return { taskId: waiting.validatesId, approvalTaskId: waiting.id, decision, outcome };
}

/**
 * Approvals past their timeout take their step's action: approve or reject (as a person would, by
 * `waits`), or dead_letter: the approval's task fails with class timeout and goes to the dead-letter
 * queue, where `dlq retry` makes it wait again. Returns how many it settled.
 */
export async function approvalsExpiredSettle(db: Db, opts: { batch: number; log?: Logger }): Promise<number> {
  let settled = 0;
  for (const t of await taskWaitingExpired(db, opts.batch, 'approval')) {
    const row = await taskGet(db, t.id);
    const step = ((row?.spec as { input?: { step?: ApprovalStep } } | undefined)?.input?.step);
    const action = step?.onTimeout ?? 'dead_letter';
    const why = `no decision within ${t.waitTimeoutSec ?? 0}s`;
    if (action === 'dead_letter') {
      const failed = await taskFail(db, { taskId: t.id, fence: t.fence, errorClass: 'timeout', message: `approval: ${why}` }, { log: opts.log, reapCondition: 'lease_expired' })
        .then(() => true, () => false);
      if (failed) settled++;
      continue;
    }
    if (!row?.validatesId) {
      const decided = await approvalTaskSettle(db, { id: t.id, dagId: t.dagId, fence: t.fence }, action === 'approve' ? 'approved' : 'rejected',
        { by: 'timeout', comment: `${action === 'approve' ? 'approved' : 'rejected'} on timeout: ${why}` }, { log: opts.log, reapCondition: 'lease_expired' });
      if (decided) settled++;
      continue;
    }
    const verdict: Verdict = action === 'approve'
      ? { pass: true, reasons: [`approved on timeout: ${why}`], approved_by: 'timeout' }
      : { pass: false, reasons: [`rejected on timeout: ${why}`], rejected_by: 'timeout', error_class: 'timeout' };
    const event = { type: `task.${action === 'approve' ? 'approved' : 'rejected'}`, data: { by: 'timeout', comment: verdict.reasons[0], edited: false } };
    if (await personVerdictSettle(db, { taskId: t.id, fence: t.fence, output: verdict }, { ...opts, event })) settled++;
  }
  return settled;
}

/**
 * Decide an approval task (no agent's output behind it): approving completes it with the approver's output, else
 * {approved: true, by, comment}; rejecting fails its attempt with class `rejected` and the comment, under its retry
 * policy (by default one attempt: the dead-letter queue, where `dlq retry` makes it wait again). Both are guarded by
 * the task's fence while WAITING: null when it was decided, cancelled or timed out meanwhile.
 */
async function approvalTaskSettle(
  db: Db, t: { id: string; dagId: string; fence: number }, decision: 'approved' | 'rejected',
  d: { by: string; comment: string | null; output?: unknown }, opts: { log?: Logger; reapCondition?: 'lease_expired' },
): Promise<ApprovalTaskOutcome | null> {
  const event = { type: `task.${decision}`, dagId: t.dagId, taskId: t.id, data: { by: d.by, comment: d.comment, edited: d.output !== undefined, approvalTaskId: t.id } };
  if (decision === 'approved') {
    const output = d.output !== undefined ? d.output : { approved: true, by: d.by, comment: d.comment };
    return withTx(db, async (tx) => {
      const r = await completionWrite(tx, [completionInput({ taskId: t.id, fence: t.fence, output }, { approved_by: d.by, comment: d.comment })]);
      if (r.completed.length === 0) return null;
      await eventInsertMany(tx, [event]);
      return { status: 'completed' as const, unblocked: r.unblocked, dagsCompleted: r.dagsCompleted };
    });
  }
  const failure = await taskFail(db, {
    taskId: t.id, fence: t.fence, errorClass: d.by === 'timeout' ? 'timeout' : 'rejected', message: d.comment ?? 'rejected', details: { rejected_by: d.by },
  }, { log: opts.log, reapCondition: opts.reapCondition }).catch((e: unknown) => {
    // Decided, cancelled or timed out meanwhile (the fenced transition refused): a conflict, not a failure.
    if (e instanceof LeaseLostError || e instanceof IllegalTransitionError || e instanceof TransitionRacedError) return null;
    throw e;
  });
  if (!failure) return null;
  await eventInsertMany(db, [event]);
  return { status: 'rejected', failure };
}

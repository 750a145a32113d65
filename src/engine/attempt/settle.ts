import type { Logger } from 'pino';
import { withTx } from '../../db/tx.js';
import type { Db } from '../../db/handle.js';
import { agentsLock } from '../../db/queries/agents.js';
import { eventInsertMany } from '../../db/queries/events.js';
import {
  attemptVerdictsAppend, taskLockForOutput, taskLockValidating, taskOutputSubmit, taskValidationStepSet, type OutputTaskRow,
} from '../../db/queries/tasks-validate.js';
import { stepKindOf, validationStepsOf, type AnyTaskStepKind, type ValidationStep } from '../../validation/steps/index.js';
import { verdictParse, verdictSummary, type StepVerdict } from '../../validation/verdict.js';
import { completionInput, completionWrite, spendOf, type Completion } from './completion-write.js';
import { taskFail } from './fail.js';
import type { OutputOutcome } from './outcome.js';
import { refusalExplain } from './refusal.js';
import { validationTaskCreate } from './validation-task.js';

export type { OutputOutcome } from './outcome.js';

/** Where a walk through the steps stands: the output, the step to run next, the verdicts so far. */
interface Walk {
  output: unknown;
  from: number;
  verdicts: StepVerdict[];
  /**
   * The submitting agent's completion, while its attempt is still leased (the walk
   * began at its submission). Absent when a verdict resumed the walk: the task is VALIDATING.
   */
  fresh?: Completion;
}

/**
 * Settle, in one transaction, an output whose task declares validation (its
 * steps are walked from the first), or a validation task's verdict (it completes,
 * and the task it judges moves on from that step).
 */
export async function taskOutputSettle(db: Db, c: Completion, opts: { log?: Logger } = {}): Promise<OutputOutcome> {
  const outcome = await withTx(db, async (tx) => {
    const t = await taskLockForOutput(tx, c.taskId, c.fence);
    if (!t) return null;
    if (t.validatesId) return verdictSettle(tx, t, c);
    return stepsWalk(tx, t, { output: c.output, from: 0, verdicts: [], fresh: c });
  });
  if (!outcome) return refusalExplain(db, c, 'submitOutput');
  opts.log?.info({ taskId: c.taskId, status: outcome.status }, 'output settled');
  return outcome;
}

/**
 * Settle a person's verdict (an approval step's validation task, WAITING for it) as a validator's answer
 * is settled: the validation task completes with it, and the task it judges moves on from that step.
 * Null when the validation task no longer waits under `c.fence` (settled meanwhile, cancelled, timed out).
 */
export async function personVerdictSettle(
  db: Db, c: Completion, opts: { log?: Logger; event?: { type: string; data: Record<string, unknown> } } = {},
): Promise<OutputOutcome | null> {
  const outcome = await withTx(db, async (tx) => {
    const vt = await taskLockForOutput(tx, c.taskId, c.fence, ['waiting']);
    if (!vt?.validatesId) return null;
    // The decision, on the judged task, in the transaction that applies it.
    if (opts.event) await eventInsertMany(tx, [{ ...opts.event, dagId: vt.dagId, taskId: vt.validatesId, data: { ...opts.event.data, approvalTaskId: vt.id } }]);
    return verdictSettle(tx, vt, c);
  });
  if (outcome) opts.log?.info({ taskId: c.taskId, status: outcome.status }, 'verdict settled');
  return outcome;
}

/**
 * Run the steps from `w.from` on: inline kinds here, until one rejects the output
 * or a kind must run as a validation task; past the last step, the task completes.
 */
async function stepsWalk(tx: Db, t: OutputTaskRow, w: Walk): Promise<OutputOutcome> {
  const steps = validationStepsOf(t.outputSpec);
  for (let i = w.from; i < steps.length; i++) {
    const step = steps[i]!;
    const kind = stepKindOf(step);
    switch (kind.mode) {
      case 'inline': {
        const verdict: StepVerdict = { ...kind.check(step, w.output), step: i, kind: step.kind };
        w.verdicts.push(verdict);
        if (!verdict.pass) return outputReject(tx, t, verdict, w);
        continue;
      }
      case 'task':
        return stepDelegate(tx, t, kind, step, i, w);
      default: {
        const unknown: never = kind;
        throw new Error(`validation step kind with unknown mode: ${JSON.stringify(unknown)}`);
      }
    }
  }
  return outputAccept(tx, t, w);
}

/** Every step passed: the task completes with its output, the verdicts on its attempt. */
async function outputAccept(tx: Db, t: OutputTaskRow, w: Walk): Promise<OutputOutcome> {
  if (!w.fresh) await attemptVerdictsAppend(tx, t.id, t.fence, w.verdicts);
  const spent = w.fresh ? spendOf(w.fresh) : {};
  const details = w.fresh && w.verdicts.length ? { verdicts: w.verdicts } : undefined;
  const r = await completionWrite(tx, [completionInput({ taskId: t.id, fence: t.fence, output: w.output, ...spent }, details)], { checked: true });
  return { status: 'completed', unblocked: r.unblocked, dagsCompleted: r.dagsCompleted };
}

/** A negative verdict fails the validated attempt: it counts toward retries and poison pills like any failure. */
async function outputReject(tx: Db, t: OutputTaskRow, verdict: StepVerdict, w: Walk): Promise<OutputOutcome> {
  if (!w.fresh) await attemptVerdictsAppend(tx, t.id, t.fence, w.verdicts);
  const failure = await taskFail(tx, {
    taskId: t.id, fence: t.fence, errorClass: verdict.error_class ?? 'invalid_output', message: verdictSummary(verdict),
    // The rejected output goes on the attempt: the retry's agent sees what was wrong with it (claim: previousAttempts).
    details: { ...(w.fresh ? { verdicts: w.verdicts } : {}), failed_step: verdict.step, rejected_output: w.output ?? null }, ...(w.fresh ? spendOf(w.fresh) : {}),
  });
  return { status: 'rejected', verdict, failure };
}

/** Step `i` runs as a validation task: the task waits in VALIDATING (its agent's attempt ends here if it was still leased). */
async function stepDelegate(tx: Db, t: OutputTaskRow, kind: AnyTaskStepKind, step: ValidationStep, i: number, w: Walk): Promise<OutputOutcome> {
  if (w.fresh) await taskOutputSubmit(tx, { id: t.id, fence: t.fence, output: w.output, step: i, spent: spendOf(w.fresh), reservedUsd: t.reservedUsd });
  else await taskValidationStepSet(tx, t.id, t.fence, i);
  await attemptVerdictsAppend(tx, t.id, t.fence, w.verdicts);
  const validationTaskId = await validationTaskCreate(tx, t, kind, step, i, w.output);
  await eventInsertMany(tx, [{ type: 'task.validating', dagId: t.dagId, taskId: t.id, agentId: t.claimedBy, data: { step: i, kind: step.kind, validationTaskId } }]);
  return { status: 'validating', step: i, validationTaskId };
}

/** A validation task finished: check its verdict, complete it, and settle the task it judged. */
async function verdictSettle(tx: Db, vt: OutputTaskRow, c: Completion): Promise<OutputOutcome> {
  const parsed = verdictParse(c.output);
  // A verdict that is well-formed but lacks what its step needs (a judge's score) is no verdict either.
  // The step is the one the validation task was made for (its input, written by the engine).
  const ownStep = (vt.spec.input as { step?: ValidationStep } | undefined)?.step;
  const ownKind = ownStep ? stepKindOf(ownStep) : undefined;
  const problem = 'error' in parsed ? parsed.error : ownKind?.mode === 'task' ? ownKind.verdictProblem?.(ownStep, parsed.verdict) : undefined;
  if (problem !== undefined || 'error' in parsed) {
    // The validator crashed in all but name: retry it; the validated task keeps its attempts.
    const error = `not a verdict: ${problem}`;
    const failure = await taskFail(tx, { taskId: vt.id, fence: vt.fence, errorClass: 'invalid_output', message: error, ...spendOf(c) });
    return { status: 'verdict_invalid', error, failure };
  }
  const target = vt.validatesId && vt.validatesFence !== null ? await taskLockValidating(tx, vt.validatesId, vt.validatesFence) : null;
  // Both agents may be charged below (the validator's completion, the judged attempt's failure), after the DAG's row: take them first.
  await agentsLock(tx, [vt.claimedBy, target?.claimedBy ?? null]);
  const stepIndex = vt.validationStep ?? 0;
  const step = target ? validationStepsOf(target.outputSpec)[stepIndex] : undefined;
  const kind = step ? stepKindOf(step) : undefined;
  const returned: StepVerdict = { ...parsed.verdict, step: stepIndex, kind: step?.kind ?? vt.type, validation_task_id: vt.id };
  const verdict = kind?.mode === 'task' && kind.verdictApply ? kind.verdictApply(step, returned) : returned;
  // The validation task itself completes with the verdict as its output.
  // What the validator sent is kept on its attempt, so the same report made again is known as such (replay.ts).
  const done = await completionWrite(tx, [completionInput({ ...c, output: verdict }, { reported: c.output ?? null })], { checked: true });
  // The judged task moved on without this verdict (cancelled, or a human settled it): nothing left to decide.
  if (!target || target.validationStep !== stepIndex) return { status: 'completed', unblocked: done.unblocked, dagsCompleted: done.dagsCompleted };
  await eventInsertMany(tx, [{
    type: 'task.verdict', dagId: target.dagId, taskId: target.id,
    data: { step: stepIndex, kind: verdict.kind, pass: verdict.pass, score: verdict.score ?? null, validationTaskId: vt.id },
  }]);
  // An approver may have replaced the output (a kind whose verdict comes from a person): later steps check the new one.
  const edited = kind?.mode === 'task' ? kind.outputEdit?.(step, verdict) : undefined;
  const resumed: Walk = { output: edited ? edited.output : target.output, from: stepIndex + 1, verdicts: [verdict] };
  if (!verdict.pass) return outputReject(tx, target, verdict, resumed);
  return stepsWalk(tx, target, resumed);
}

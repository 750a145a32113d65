import type { Logger } from 'pino';
import { engineEvents } from '../observability/engine-events.js';
import { withTx, type Db } from '../db/connection.js';
import { dagTasksAdded } from '../db/queries/dags.js';
import { eventInsertMany } from '../db/queries/events.js';
import { taskCompleteMany as taskCompleteManyQuery } from '../db/queries/tasks-complete.js';
import { taskActivateCreated, taskInsertMany } from '../db/queries/tasks.js';
import {
  attemptVerdictsAppend, taskLockForOutput, taskLockValidating, taskOutputSubmit, taskValidationStepSet, type OutputTaskRow,
} from '../db/queries/tasks-validate.js';
import type { RetryPolicy, TaskBody, TaskSpec } from '../dag/spec.js';
import { newTaskId } from '../ids.js';
import { stepKindOf, validationStepsOf, type ValidationStep } from '../validation/steps/index.js';
import { verdictParse, verdictSummary, type StepVerdict } from '../validation/verdict.js';
import { guardExplain } from './guard.js';
import { taskFail, type Completion, type FailureOutcome } from './lifecycle.js';
import { taskRow } from './submit.js';

/**
 * Validation tasks retry soon: what failed is the validator (a crash, an answer
 * that is not a verdict), not the output, and the validated task waits meanwhile.
 */
export const VALIDATION_TASK_DEFAULTS = {
  maxAttempts: 5,
  retry: { strategy: 'exponential', initialDelaySec: 1, multiplier: 3, maxDelaySec: 120, jitter: 0.1, noRetryOn: [] } satisfies RetryPolicy,
} as const;

/** What became of a submitted output. */
export type OutputOutcome =
  | { status: 'completed'; unblocked: number; dagsCompleted: string[] }
  /** A delegated step is running as a validation task; the task is VALIDATING until its verdict. */
  | { status: 'validating'; step: number; validationTaskId: string }
  /** A step rejected the output: the task failed (class invalid_output or timeout) and the retry policy decided. */
  | { status: 'rejected'; verdict: StepVerdict; failure: FailureOutcome }
  /** A validation task returned something that is not a verdict: the validation task failed, the validated task waits. */
  | { status: 'verdict_invalid'; error: string; failure: FailureOutcome };

type Spent = Pick<Completion, 'costUsd' | 'tokensIn' | 'tokensOut' | 'model'>;

/** What the submitting attempt reported spending. */
function spentOf(c: Completion): Spent {
  return { costUsd: c.costUsd, tokensIn: c.tokensIn, tokensOut: c.tokensOut, model: c.model };
}

/**
 * Settle an output whose task declares validation, or a validation task's verdict,
 * in one transaction. Inline steps (json-schema, regex) are checked here; the
 * first delegated step (test, llm-judge) becomes a validation task and the task
 * waits in VALIDATING. A verdict settles the task it judges: on to the next step,
 * COMPLETED after the last, or an invalid_output failure that uses an attempt.
 */
export async function taskOutputSettle(db: Db, c: Completion, opts: { log?: Logger } = {}): Promise<OutputOutcome> {
  const outcome = await withTx(db, async (tx) => {
    const t = await taskLockForOutput(tx, c.taskId, c.fence);
    if (!t) return null;
    if (t.validatesId) return verdictSettle(tx, t, c);
    return stepsAdvance(tx, t, c.output, 0, [], c);
  });
  if (!outcome) return guardExplain(db, c.taskId, c.fence, 'submitOutput');
  opts.log?.info({ taskId: c.taskId, status: outcome.status }, 'output settled');
  return outcome;
}

/**
 * Run the steps from `from` on: inline ones now, until one fails or a delegated one
 * must run elsewhere. `fresh` is the submitting agent's completion (the attempt is
 * still leased); without it the task is VALIDATING and a verdict brought us here.
 */
async function stepsAdvance(
  tx: Db, t: OutputTaskRow, output: unknown, from: number, verdicts: StepVerdict[], fresh?: Completion,
): Promise<OutputOutcome> {
  const steps = validationStepsOf(t.outputSpec);
  const spent: Spent = fresh ? spentOf(fresh) : {};
  for (let i = from; i < steps.length; i++) {
    const step = steps[i]!;
    const kind = stepKindOf(step);
    if (kind.mode === 'inline') {
      const verdict: StepVerdict = { ...kind.check(step, output), step: i, kind: step.kind };
      verdicts.push(verdict);
      if (!verdict.pass) return validatedReject(tx, t, verdict, verdicts, fresh ? spent : undefined);
      continue;
    }
    if (fresh) await taskOutputSubmit(tx, { id: t.id, fence: t.fence, output, step: i, spent, reservedUsd: t.reservedUsd });
    else await taskValidationStepSet(tx, t.id, t.fence, i);
    await attemptVerdictsAppend(tx, t.id, t.fence, verdicts);
    const validationTaskId = await validationTaskCreate(tx, t, step, i, output);
    await eventInsertMany(tx, [{ type: 'task.validating', dagId: t.dagId, taskId: t.id, agentId: t.claimedBy, data: { step: i, kind: step.kind, validationTaskId } }]);
    return { status: 'validating', step: i, validationTaskId };
  }
  if (!fresh) await attemptVerdictsAppend(tx, t.id, t.fence, verdicts);
  const r = await taskCompleteManyQuery(tx, [{
    id: t.id, fence: t.fence, output, ...spent, ...(fresh && verdicts.length ? { details: { verdicts } } : {}),
  }], { checked: true });
  if (r.completed.length > 0) engineEvents.emit('completed', { byType: r.completedByType });
  return { status: 'completed', unblocked: r.unblocked, dagsCompleted: r.dagsCompleted };
}

/** A negative verdict fails the validated attempt: it counts toward retries and poison pills like any failure. */
async function validatedReject(tx: Db, t: OutputTaskRow, verdict: StepVerdict, verdicts: StepVerdict[], fresh?: Spent): Promise<OutputOutcome> {
  if (!fresh) await attemptVerdictsAppend(tx, t.id, t.fence, verdicts);
  const failure = await taskFail(tx, {
    taskId: t.id, fence: t.fence, errorClass: verdict.error_class ?? 'invalid_output', message: verdictSummary(verdict),
    details: { ...(fresh ? { verdicts } : {}), failed_step: verdict.step }, ...fresh,
  });
  return { status: 'rejected', verdict, failure };
}

/** A validation task finished: check its verdict, complete it, and settle the task it judged. */
async function verdictSettle(tx: Db, vt: OutputTaskRow, c: Completion): Promise<OutputOutcome> {
  const spent = spentOf(c);
  const parsed = verdictParse(c.output);
  if ('error' in parsed) {
    // The validator crashed in all but name: retry it; the validated task keeps its attempts.
    const error = `not a verdict: ${parsed.error}`;
    const failure = await taskFail(tx, { taskId: vt.id, fence: vt.fence, errorClass: 'invalid_output', message: error, ...spent });
    return { status: 'verdict_invalid', error, failure };
  }
  const target = vt.validatesId && vt.validatesFence !== null ? await taskLockValidating(tx, vt.validatesId, vt.validatesFence) : null;
  const stepIndex = vt.validationStep ?? 0;
  const step = target ? validationStepsOf(target.outputSpec)[stepIndex] : undefined;
  const raw: StepVerdict = { ...parsed.verdict, step: stepIndex, kind: step?.kind ?? vt.type, validation_task_id: vt.id };
  const kind = step ? stepKindOf(step) : undefined;
  const verdict: StepVerdict = kind?.mode === 'task' && kind.verdictApply ? { ...kind.verdictApply(step, raw), step: stepIndex, kind: raw.kind, validation_task_id: vt.id } : raw;
  const done = await taskCompleteManyQuery(tx, [{ id: vt.id, fence: vt.fence, output: verdict, ...spent }], { checked: true });
  // The judged task moved on without this verdict (cancelled, or a human settled it): nothing left to decide.
  if (!target || target.validationStep !== stepIndex) return { status: 'completed', unblocked: done.unblocked, dagsCompleted: done.dagsCompleted };
  await eventInsertMany(tx, [{
    type: 'task.verdict', dagId: target.dagId, taskId: target.id,
    data: { step: stepIndex, kind: verdict.kind, pass: verdict.pass, score: verdict.score ?? null, validationTaskId: vt.id },
  }]);
  if (!verdict.pass) return validatedReject(tx, target, verdict, [verdict]);
  return stepsAdvance(tx, target, target.output, stepIndex + 1, [verdict]);
}

/** The task that runs a delegated step: claimable by agents with validate:test / validate:judge, in the same DAG. */
async function validationTaskCreate(tx: Db, t: OutputTaskRow, step: ValidationStep, index: number, output: unknown): Promise<string> {
  const kind = stepKindOf(step);
  if (kind.mode !== 'task') throw new Error(`step ${index + 1} (${step.kind}) runs inline, not as a validation task`);
  const type = kind.capability;
  const plan = kind.task(step);
  const subject = t.spec as unknown as TaskBody;
  const body: TaskBody = {
    prompt: plan.prompt,
    context: [],
    models: plan.models,
    fallbackModels: [],
    input: { step, output, subject: { id: t.id, key: t.key, type: t.type, title: t.title, prompt: subject.prompt ?? null, attempt: t.attempt } },
  };
  const spec: TaskSpec = {
    key: `${t.key}/validate-${index + 1}@${t.fence}`,
    type,
    title: `${step.kind} step ${index + 1} of ${t.key}`,
    body,
    requiredCapabilities: [type],
    maxDurationSec: plan.maxDurationSec,
    priority: t.priority,
    boostPerMinute: 0,
    dependsOn: [],
    maxAttempts: VALIDATION_TASK_DEFAULTS.maxAttempts,
    retry: VALIDATION_TASK_DEFAULTS.retry,
    tags: ['validation'],
  };
  const id = newTaskId();
  await taskInsertMany(tx, [{ ...taskRow(spec, t.dagId, id), validatesId: t.id, validatesFence: t.fence, validationStep: index }]);
  await dagTasksAdded(tx, t.dagId, 1);
  await taskActivateCreated(tx, t.dagId);
  return id;
}

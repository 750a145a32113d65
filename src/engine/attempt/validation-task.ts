import type { Db } from '../../db/handle.js';
import { dagTasksAdded } from '../../db/queries/dags.js';
import { taskActivateCreated, taskInsertMany } from '../../db/queries/tasks-intake.js';
import { APPROVAL_WAIT_PREFIX } from '../../db/queries/signals.js';
import type { OutputTaskRow } from '../../db/queries/tasks-validate.js';
import type { RetryPolicy, TaskBody, TaskSpec } from '../../dag/spec.js';
import { newTaskId } from '../../ids.js';
import type { AnyTaskStepKind, ValidationStep } from '../../validation/steps/index.js';
import { taskRow } from './task-row.js';

/**
 * Validation tasks retry soon: what failed is the validator (a crash, an answer
 * that is not a verdict), not the output, and the validated task waits meanwhile.
 */
export const VALIDATION_TASK_DEFAULTS = {
  maxAttempts: 5,
  retry: { strategy: 'exponential', initialDelaySec: 1, multiplier: 3, maxDelaySec: 120, jitter: 0.1, noRetryOn: [] } satisfies RetryPolicy,
} as const;

/**
 * The task that runs step `index` of `t`'s output validation: of the kind's
 * capability (`validate:test`, `validate:judge`), in the same DAG, outside its
 * graph; its input is the step, the output and who produced it.
 */
export async function validationTaskCreate(
  tx: Db, t: OutputTaskRow, kind: AnyTaskStepKind, step: ValidationStep, index: number, output: unknown,
): Promise<string> {
  const plan = kind.task(step);
  const subject = t.spec as unknown as TaskBody;
  const body: TaskBody = {
    prompt: plan.prompt,
    context: [],
    models: plan.modelsOfSubject ? [...(subject.models ?? []), ...(subject.fallbackModels ?? [])] : plan.models,
    fallbackModels: [],
    input: {
      step, output,
      // The fence and the workspace name the judged attempt's worktree, which a test step runs in (runtime/attempt-workspace.ts).
      subject: {
        id: t.id, key: t.key, type: t.type, title: t.title, prompt: subject.prompt ?? null, attempt: t.attempt, fence: t.fence,
        ...(subject.workspace ? { workspace: subject.workspace } : {}),
      },
    },
  };
  const spec: TaskSpec = {
    key: `${t.key}/validate-${index + 1}@${t.fence}`,
    type: kind.capability,
    title: `${step.kind} step ${index + 1} of ${t.key}`,
    body,
    requiredCapabilities: [kind.capability],
    maxDurationSec: plan.maxDurationSec,
    priority: t.priority,
    boostPerMinute: 0,
    dependsOn: [],
    // A person's verdict (an approval) is waited for, never claimed: its timeout dead-letters it unless the step says otherwise.
    maxAttempts: plan.person ? 1 : VALIDATION_TASK_DEFAULTS.maxAttempts,
    retry: VALIDATION_TASK_DEFAULTS.retry,
    tags: ['validation'],
    origin: 'validation',
    ...(plan.person ? { waitFor: { signal: `${APPROVAL_WAIT_PREFIX}${t.id}`, timeoutSec: plan.person.timeoutSec } } : {}),
  };
  const id = newTaskId();
  // validatesAgent: whoever produced the output may never claim the task that judges it.
  await taskInsertMany(tx, [{
    ...taskRow(spec, t.dagId, id), validatesId: t.id, validatesFence: t.fence, validationStep: index, validatesAgent: t.claimedBy, tenantId: t.tenantId,
  }]);
  await dagTasksAdded(tx, t.dagId, 1);
  await taskActivateCreated(tx, t.dagId);
  return id;
}

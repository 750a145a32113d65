import { z } from 'zod';
import { STEP_NAME_MAX } from '../engine/attempt/steps.js';
import { STEP_SCOPES } from '../db/schema/task-steps.js';
import { LIMITS } from '../config/index.js';
import { instant } from './instant.js';
import type { TaskStepRow } from '../db/rows.js';

/** What the durable-step routes answer (src/http/routes/steps.ts), as sent (engine/attempt/steps.ts). */

/** A recorded step without its result. */
export const stepViewSchema = z.object({
  name: z.string().describe(`1-${STEP_NAME_MAX} printable characters`),
  scope: z.enum(STEP_SCOPES).describe('task: replayed by every later attempt; attempt: recorded for visibility, never replayed'),
  attempt: z.number().describe('the attempt that recorded it'),
  fence: z.number().describe('the fence of the claim that recorded it'),
  recordedAt: instant,
  sizeBytes: z.number().describe(`the result's size as JSON (at most ${LIMITS.stepResultBytes}, DAGENT_LIMIT_STEP_RESULT_BYTES)`),
  startedAt: instant.nullable().describe('when the step\'s work began, as its agent said (null: not said)'),
  durationMs: z.number().nullable().describe('how long the step\'s work took, as its agent said'),
  costUsd: z.number().describe('what its agent reported spending inside it; a replay charges nothing'),
  tokensIn: z.number().describe('the tokens its agent reported inside it'),
  tokensOut: z.number(),
  model: z.string().nullable().describe('the model its agent reported inside it'),
}).meta({ id: 'StepView' });
export type StepView = z.infer<typeof stepViewSchema>;

/** A task-scoped step a later attempt replayed instead of running. */
export const stepReplayViewSchema = z.object({
  name: z.string(),
  attempt: z.number().describe('the attempt that replayed it'),
  fence: z.number().describe('the fence of the claim that replayed it'),
  recordedFence: z.number().describe('the fence of the claim that had recorded it'),
  costUsd: z.number().describe('what the step had cost when recorded: spend the replaying attempt did not pay again'),
  replayedAt: instant,
}).meta({ id: 'StepReplayView' });
export type StepReplayView = z.infer<typeof stepReplayViewSchema>;

export const stepListAnswerSchema = z.object({
  steps: z.array(stepViewSchema).describe('in the order they were recorded'),
  replays: z.array(stepReplayViewSchema).describe('in the order they were replayed'),
});
export type StepListAnswer = z.infer<typeof stepListAnswerSchema>;

/** A step with its result. */
export const stepAnswerSchema = z.object({ step: stepViewSchema.extend({ result: z.unknown().describe('the step\'s JSON result') }) });

export const stepRecordAnswerSchema = stepAnswerSchema.extend({
  recorded: z.boolean().describe('false: a step of that name was recorded already (first write wins) and `step` is that one; nothing changed'),
});

/** A step row as the routes answer it (its instant still the engine's Date: the schema's input). */
export function stepViewOf(s: Omit<TaskStepRow, 'result'>): z.input<typeof stepViewSchema> {
  return {
    name: s.name, scope: s.scope as StepView['scope'], attempt: s.attempt, fence: s.fence, recordedAt: s.recordedAt,
    startedAt: s.startedAt, sizeBytes: s.sizeBytes, durationMs: s.durationMs, costUsd: s.costUsd, tokensIn: s.tokensIn,
    tokensOut: s.tokensOut, model: s.model,
  };
}

/** A replay row as the routes answer it. */
export function stepReplayViewOf(r: { name: string; fence: number; attempt: number; recordedFence: number; costUsd: number; replayedAt: Date }): z.input<typeof stepReplayViewSchema> {
  return { name: r.name, attempt: r.attempt, fence: r.fence, recordedFence: r.recordedFence, costUsd: r.costUsd, replayedAt: r.replayedAt };
}

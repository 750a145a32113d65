import { z } from 'zod';
import { durationSchema, durationSeconds } from '../../durations.js';
import type { TaskStepKind } from './kind.js';

export const APPROVAL_TIMEOUT_ACTIONS = ['dead_letter', 'reject', 'approve'] as const;
export type ApprovalTimeoutAction = (typeof APPROVAL_TIMEOUT_ACTIONS)[number];

const fileSchema = z.strictObject({
  kind: z.literal('approval'),
  prompt: z.string().max(10_000).optional().describe('what the person approving should check; shown with the approval'),
  timeout: durationSchema.optional().describe('how long the approval waits for a person; default no limit'),
  on_timeout: z.enum(APPROVAL_TIMEOUT_ACTIONS).optional()
    .describe('when the timeout lapses: dead_letter (default: the approval goes to the dead-letter queue, for a person), reject (the task retries), approve'),
  allow_edit: z.boolean().optional().describe('whether the approver may replace the output when approving; default true'),
}).describe('a person approves or rejects the output (dagent approve|reject, the API, the dashboard); a rejection\'s comment reaches the retry');

export interface ApprovalStep { kind: 'approval'; prompt?: string; timeoutSec?: number; onTimeout: ApprovalTimeoutAction; allowEdit: boolean }

/**
 * A task of its own that waits for a person (`approval:` on a task, beside depends_on): no agent runs it; approving
 * completes it (with the approver's output, else {approved, by, comment}), rejecting fails it with the comment.
 */
export const approvalTaskFileSchema = z.strictObject({
  prompt: fileSchema.shape.prompt,
  timeout: fileSchema.shape.timeout,
  on_timeout: z.enum(APPROVAL_TIMEOUT_ACTIONS).optional()
    .describe('when the timeout lapses: dead_letter (default: to the dead-letter queue, for a person), reject (the task fails under its retry policy), approve'),
}).describe('no agent runs this task: it waits until a person approves it (dagent approve, the API, the dashboard) or rejects it');

/** An approval as stored, from the step's fields or an approval task's (which has no allow_edit: its approver may always give the output). */
export function approvalResolve(s: z.infer<typeof approvalTaskFileSchema> & { allow_edit?: boolean }): ApprovalStep {
  return {
    kind: 'approval',
    ...(s.prompt !== undefined ? { prompt: s.prompt } : {}),
    ...(s.timeout !== undefined ? { timeoutSec: Math.ceil(durationSeconds(s.timeout)) } : {}),
    onTimeout: s.on_timeout ?? 'dead_letter',
    allowEdit: s.allow_edit ?? true,
  };
}

/**
 * A person approves or rejects the output. Its validation task is never claimed: it waits (WAITING) until
 * `dagent approve|reject`, the API or the dashboard settles it with a verdict, or its timeout lapses.
 * An approval may replace the output (`allow_edit`); a rejection fails the attempt with the comment as its
 * reason, which the retry's agent reads in its previous attempts.
 */
export const approvalStep: TaskStepKind<'approval', typeof fileSchema, ApprovalStep> = {
  kind: 'approval',
  mode: 'task',
  capability: 'validate:approval',
  fileSchema,
  resolve: (s) => approvalResolve(s),
  task: (step) => ({ prompt: step.prompt, models: [], person: { ...(step.timeoutSec !== undefined ? { timeoutSec: step.timeoutSec } : {}) } }),
  outputEdit: (step, verdict) => (step.allowEdit && verdict.edited_output !== undefined ? { output: verdict.edited_output } : undefined),
};

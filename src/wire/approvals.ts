import { z } from 'zod';
import { approvalTaskOutcomeSchema, outputOutcomeSchema } from './agent-protocol.js';
import { instant } from './instant.js';

/** What the approval routes answer (src/http/routes/approvals.ts), as sent (engine/waits/approvals.ts). */

/** An approval step waiting for a person, with the output it would approve. */
export const approvalWaitingSchema = z.object({
  id: z.string().describe('the approval\'s own task'),
  fence: z.number(),
  dagId: z.string(),
  dagName: z.string(),
  taskId: z.string().describe('the task whose output it approves'),
  taskKey: z.string(),
  taskTitle: z.string().nullable(),
  step: z.number().nullable(),
  prompt: z.string().nullable(),
  output: z.unknown(),
  waitingSince: instant,
  expiresAt: instant.nullable(),
});
export type ApprovalWaitingView = z.infer<typeof approvalWaitingSchema>;

export const approvalListAnswerSchema = z.object({ approvals: z.array(approvalWaitingSchema) });
export type ApprovalListAnswer = z.infer<typeof approvalListAnswerSchema>;

export const approvalDecisionAnswerSchema = z.object({
  taskId: z.string(),
  approvalTaskId: z.string(),
  decision: z.enum(['approved', 'rejected']),
  outcome: z.union([outputOutcomeSchema, approvalTaskOutcomeSchema]),
});
export type ApprovalDecisionAnswer = z.infer<typeof approvalDecisionAnswerSchema>;

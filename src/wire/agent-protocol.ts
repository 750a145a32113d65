import { z } from 'zod';
import { TASK_ORIGINS } from '../dag/spec.js';
import { agentViewSchema } from './fleet.js';
import { instant } from './instant.js';
import { stepVerdictSchema, taskBodySchema } from './tasks.js';

/**
 * What the agent protocol answers (src/http/routes/agent-protocol.ts), as sent: what an HTTP agent in any language
 * reads (agents/python/dagent_agent.py). The requests' fields are in reports.ts.
 */

export const agentRegisterAnswerSchema = z.object({ agent: agentViewSchema });
export type AgentRegisterAnswer = z.infer<typeof agentRegisterAnswerSchema>;

/** A failed attempt as the next one sees it (db/rows.ts PreviousAttempt). */
export const previousAttemptSchema = z.object({
  attempt: z.number(),
  agentId: z.string().nullable(),
  model: z.string().nullable(),
  errorClass: z.string().nullable(),
  errorMessage: z.string().nullable(),
  rejectedOutput: z.unknown().optional().describe('the output validation rejected (absent for a failure the agent reported)'),
  verdicts: z.array(z.unknown()).optional().describe('each validation step\'s verdict on that output'),
  endedAt: instant.describe('when it ended'),
}).meta({ id: 'PreviousAttempt' });

/** A task as a claim hands it to its agent (engine/attempt/claim.ts ClaimedTask). */
export const claimedTaskSchema = z.object({
  id: z.string(),
  dagId: z.string(),
  key: z.string(),
  type: z.string(),
  title: z.string().nullable(),
  fence: z.number().describe('the fencing token: present it to start, heartbeat, complete, fail and release'),
  attempt: z.number(),
  maxAttempts: z.number(),
  leaseExpiresAt: instant,
  spec: taskBodySchema,
  model: z.string().nullable().describe('the model to run this attempt on; null when the task names none'),
  models: z.array(z.string()).describe('the models this attempt may use that the agent has, best first'),
  inputs: z.record(z.string(), z.unknown()).describe('upstream outputs named by its context refs, by ref'),
  children: z.record(z.string(), z.unknown()).describe('outputs of the completed subtasks it spawned, by key'),
  maxDurationSec: z.number().nullable(),
  heartbeatSec: z.number(),
  maxCostUsd: z.number().nullable(),
  started: z.boolean().describe('true when the claim started it (start: true)'),
  origin: z.enum(TASK_ORIGINS).describe('who wrote the spec: an agent that executes what a task says must not run what an agent wrote'),
  outputSpec: z.record(z.string(), z.unknown()).nullable(),
  previousAttempts: z.array(previousAttemptSchema).describe('on a retry, the latest failed attempts, oldest first'),
  traceparent: z.string().describe('the attempt\'s W3C trace context'),
}).meta({ id: 'ClaimedTask' });
export type ClaimedTaskView = z.infer<typeof claimedTaskSchema>;

export const claimAnswerSchema = z.object({ tasks: z.array(claimedTaskSchema).describe('possibly none') });
export type ClaimAnswer = z.infer<typeof claimAnswerSchema>;

export const leaseAnswerSchema = z.object({ leaseExpiresAt: instant });
export type LeaseAnswer = z.infer<typeof leaseAnswerSchema>;

export const spawnAnswerSchema = z.object({
  children: z.array(z.object({
    key: z.string().describe('the key given to spawn; the DAG knows it as `<parent key>/<key>`'),
    id: z.string(),
    status: z.string(),
    output: z.unknown().optional().describe('present once the subtask has completed'),
    created: z.boolean().describe('false when a subtask with this key already existed under this parent'),
  })),
  waiting: z.boolean().describe('true: the parent waits for them; its attempt has ended'),
});
export type SpawnAnswer = z.infer<typeof spawnAnswerSchema>;

/** What a failure report did: the retry policy's decision (engine/attempt/outcome.ts FailureOutcome). */
export const failureOutcomeSchema = z.union([
  z.object({
    status: z.enum(['retrying', 'ready']),
    retryAt: instant,
    rateLimited: z.boolean().optional().describe('a provider\'s rate limit gave the attempt back'),
  }),
  z.object({ status: z.literal('dead_lettered'), deadLetterId: z.string(), reason: z.string(), poisonPill: z.boolean() }),
]).meta({ id: 'FailureOutcome' });
export type FailureOutcomeView = z.infer<typeof failureOutcomeSchema>;

const completedOutcome = z.object({ status: z.literal('completed'), unblocked: z.number(), dagsCompleted: z.array(z.string()) });

/** What became of an output that is validated (engine/attempt/outcome.ts OutputOutcome). */
export const outputOutcomeSchema = z.union([
  completedOutcome,
  z.object({ status: z.literal('validating'), step: z.number(), validationTaskId: z.string() }),
  z.object({ status: z.literal('rejected'), verdict: stepVerdictSchema, failure: failureOutcomeSchema }),
  z.object({ status: z.literal('verdict_invalid'), error: z.string(), failure: failureOutcomeSchema }),
]).meta({ id: 'OutputOutcome' });
export type OutputOutcomeView = z.infer<typeof outputOutcomeSchema>;

/** An approval task's own decision: it completed, or failed under its retry policy (engine/waits/approvals.ts). */
export const approvalTaskOutcomeSchema = z.union([
  completedOutcome,
  z.object({ status: z.literal('rejected'), failure: failureOutcomeSchema }),
]);

export const completeAnswerSchema = z.object({
  completed: z.boolean().describe('the completion completed it (false: its output went to validation)'),
  unblocked: z.number().describe('how many dependents became READY'),
  settled: outputOutcomeSchema.nullable().describe('what validation did, for a task that declares it'),
  replayed: z.boolean().describe('the same completion was applied before (its reply was lost): nothing changed'),
});
export type CompleteAnswer = z.infer<typeof completeAnswerSchema>;

export const logAppendAnswerSchema = z.object({
  stored: z.number(),
  dropped: z.number().describe('lines past the attempt\'s allowance'),
});
export type LogAppendAnswer = z.infer<typeof logAppendAnswerSchema>;

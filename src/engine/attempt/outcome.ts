import type { DagentError } from '../../errors.js';
import type { StepVerdict } from '../../validation/verdict.js';

/**
 * How an attempt's report ended, as every front (the agent runtime, HTTP, MCP) is answered. Reports are
 * idempotent: the same report made again (its reply was lost) is answered as the first was, never applied twice.
 */

/** What a failure report did: the retry policy's decision. */
export type FailureOutcome =
  /** `rateLimited`: a provider's rate limit gave the attempt back (fail.ts taskRateLimited). */
  | { status: 'retrying' | 'ready'; retryAt: Date; rateLimited?: boolean }
  | { status: 'dead_lettered'; deadLetterId: string; reason: string; poisonPill: boolean };

/** What became of a submitted output that must be validated (settle.ts). */
export type OutputOutcome =
  | { status: 'completed'; unblocked: number; dagsCompleted: string[] }
  /** A step runs as a validation task; the task is VALIDATING until its verdict. */
  | { status: 'validating'; step: number; validationTaskId: string }
  /** A step rejected the output: the task failed (class invalid_output or timeout) and the retry policy decided. */
  | { status: 'rejected'; verdict: StepVerdict; failure: FailureOutcome }
  /** A validation task returned something that is not a verdict: the validation task failed, the validated task waits. */
  | { status: 'verdict_invalid'; error: string; failure: FailureOutcome };

/** What one completion report came to (complete.ts attemptsComplete). */
export type CompletionOutcome =
  /** The completion statement completed it. */
  | { taskId: string; status: 'completed' }
  /** Its output went through validation (settle.ts): completed, validating, rejected. */
  | { taskId: string; status: 'settled'; settled: OutputOutcome }
  /** The same report was applied before (its reply was lost): nothing changed. `completed`: the statement completed it then (not a validated output). */
  | { taskId: string; status: 'replayed'; completed: boolean }
  /** Not applied, and why: LEASE_LOST, ILLEGAL_TRANSITION, CONFLICT (the attempt already ended otherwise), NOT_FOUND. */
  | { taskId: string; status: 'refused'; error: DagentError };

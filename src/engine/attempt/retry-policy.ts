import type { RetryPolicy, TaskBody } from '../../dag/spec.js';
import { DURATION_MAX_SEC } from '../../durations.js';

/**
 * The class of an attempt stopped at a spend limit while it ran (engine/attempt/usage.ts): not retried unless the
 * DAG's retry_on names it (another attempt would spend again what this one was stopped for).
 */
export const BUDGET_EXCEEDED_CLASS = 'budget_exceeded';

/** A task that failed this many times on at least this many distinct agents is a poison pill. */
export const POISON_PILL = { minFailures: 3, minAgents: 2 } as const;

export interface FailureFacts {
  errorClass: string;
  /** Attempts started so far, this one included. */
  attempt: number;
  maxAttempts: number;
  /** Failed attempts since the last attempt reset, this one included. */
  failures: number;
  distinctAgents: number;
  /** False when the agent declared the error non-retryable. */
  retryable?: boolean;
  /** The provider asked to wait this long (a rate limit's Retry-After): the retry never comes sooner. */
  retryAfterSec?: number;
}

export type RetryDecision =
  | { action: 'retry'; delaySec: number }
  | { action: 'dead_letter'; reason: string; poisonPill: boolean };

/** What happens after a failure: retry after a delay, or dead-letter (and why). */
export function retryDecide(policy: RetryPolicy, f: FailureFacts, random: () => number = Math.random): RetryDecision {
  const poisonPill = f.failures >= POISON_PILL.minFailures && f.distinctAgents >= POISON_PILL.minAgents;
  if (f.retryable === false) return { action: 'dead_letter', reason: `non-retryable ${f.errorClass} error`, poisonPill: false };
  if (f.errorClass === BUDGET_EXCEEDED_CLASS && !policy.retryOn?.includes(f.errorClass)) {
    return { action: 'dead_letter', reason: `${BUDGET_EXCEEDED_CLASS}: the attempt reached a spend limit (retry_on does not name it)`, poisonPill: false };
  }
  if (policy.noRetryOn.includes(f.errorClass)) return { action: 'dead_letter', reason: `error class ${f.errorClass} is in no_retry_on`, poisonPill: false };
  if (policy.retryOn && !policy.retryOn.includes(f.errorClass)) {
    return { action: 'dead_letter', reason: `error class ${f.errorClass} is not in retry_on`, poisonPill: false };
  }
  if (poisonPill) {
    return { action: 'dead_letter', reason: `poison pill: failed ${f.failures} times on ${f.distinctAgents} distinct agents`, poisonPill: true };
  }
  if (f.attempt >= f.maxAttempts) return { action: 'dead_letter', reason: `attempts exhausted (${f.attempt}/${f.maxAttempts})`, poisonPill: false };
  return { action: 'retry', delaySec: Math.max(retryDelaySec(policy, f.attempt, random), f.retryAfterSec ?? 0) };
}

/**
 * Delay before the retry that follows failed attempt number `attempt` (1-based):
 * exponential = initial × multiplier^(attempt−1), fixed = initial, immediate = 0;
 * then ± jitter × delay at random, capped at max_delay.
 */
export function retryDelaySec(policy: RetryPolicy, attempt: number, random: () => number = Math.random): number {
  let base: number;
  switch (policy.strategy) {
    case 'immediate': return 0;
    case 'fixed': base = policy.initialDelaySec; break;
    case 'exponential': base = policy.initialDelaySec * policy.multiplier ** Math.max(0, attempt - 1); break;
  }
  // multiplier^attempt overflows to Infinity (and 0 × Infinity is NaN): that is the ceiling.
  base = Number.isFinite(base) ? Math.min(base, policy.maxDelaySec) : policy.maxDelaySec;
  const jittered = base * (1 + policy.jitter * (2 * random() - 1));
  // DURATION_MAX_SEC too: a policy stored before durations were bounded must not overflow run_at.
  return Math.max(0, Math.min(jittered, policy.maxDelaySec, DURATION_MAX_SEC));
}

/** From retry number 2 on (the third attempt), fallback models replace the preferred ones when given. */
export function modelsForAttempt(body: Pick<TaskBody, 'models' | 'fallbackModels'>, attempt: number): string[] {
  return attempt >= 3 && body.fallbackModels.length > 0 ? body.fallbackModels : body.models;
}

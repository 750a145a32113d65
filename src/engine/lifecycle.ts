import type { Logger } from 'pino';
import { engineEvents } from '../observability/engine-events.js';
import { withTx, type Db } from '../db/connection.js';
import { attemptFailureStats } from '../db/queries/attempts.js';
import { dagStatusRefresh } from '../db/queries/dags.js';
import { deadLetterInsert } from '../db/queries/dead-letters.js';
import { eventInsertMany } from '../db/queries/events.js';
import { taskCompleteMany as taskCompleteManyQuery, type CompletionInput, type CompletionResult } from '../db/queries/tasks-complete.js';
import {
  taskDeadLetterMark, taskFailMark, taskHeartbeat as taskHeartbeatQuery, taskRelease as taskReleaseQuery,
  taskRetrySchedule, taskStart as taskStartQuery, type FailureInput,
} from '../db/queries/tasks.js';
import type { RetryPolicy } from '../dag/spec.js';
import { newDeadLetterId } from '../ids.js';
import { guardExplain } from './guard.js';
import { retryDecide } from './retry-policy.js';
import { taskOutputSettle, type OutputOutcome } from './validation.js';
import { taskIdsNeedingValidation } from '../db/queries/tasks-validate.js';
import { IllegalTransitionError, LeaseLostError } from '../errors.js';

export interface TaskRef { taskId: string; fence: number }

/** claimed → running; the heartbeat lease starts (default: three of the task's heartbeat_sec, else 60 s). */
export async function taskStart(db: Db, ref: TaskRef, leaseSec?: number): Promise<Date> {
  return (await taskStartQuery(db, ref.taskId, ref.fence, leaseSec)) ?? guardExplain(db, ref.taskId, ref.fence, 'start');
}

/** Extend the lease and record progress. Throws LeaseLostError if the caller no longer holds the task. */
export async function taskHeartbeat(
  db: Db, ref: TaskRef & { progress?: number; message?: string; leaseSec?: number },
): Promise<Date> {
  const lease = await taskHeartbeatQuery(db, ref.taskId, ref.fence, ref.leaseSec, ref.progress, ref.message);
  return lease ?? guardExplain(db, ref.taskId, ref.fence, 'heartbeat');
}

export interface Completion extends TaskRef {
  output: unknown;
  costUsd?: number;
  tokensIn?: number;
  tokensOut?: number;
  model?: string | null;
}

/**
 * Complete one task; throws LeaseLostError / IllegalTransitionError if it was refused.
 * A task that declares output validation (or is a validation task) is settled by
 * taskOutputSettle instead: `settled` says whether it completed, waits in VALIDATING or was rejected.
 */
export async function taskComplete(db: Db, c: Completion): Promise<CompletionResult & { settled?: OutputOutcome }> {
  const r = await taskCompleteManyQuery(db, [completionInput(c)]);
  if (r.completed.length > 0) {
    engineEvents.emit('completed', { byType: r.completedByType });
    return r;
  }
  if ((await taskIdsNeedingValidation(db, [c.taskId])).size > 0) return { ...r, settled: await taskOutputSettle(db, c) };
  return guardExplain(db, c.taskId, c.fence, 'complete');
}

/**
 * Complete a batch in one statement. Refused items (stale token, wrong state) are
 * reported in `refused`, not thrown, so one zombie does not fail a batch. Items the
 * statement refused because their output must be validated are settled one by one
 * (`settled`).
 */
export async function taskCompleteMany(
  db: Db, items: Completion[],
): Promise<CompletionResult & { refused: string[]; settled: Map<string, OutputOutcome> }> {
  const r = await taskCompleteManyQuery(db, items.map(completionInput));
  if (r.completed.length > 0) engineEvents.emit('completed', { byType: r.completedByType });
  const done = new Set(r.completed);
  const settled = new Map<string, OutputOutcome>();
  const notDone = items.filter((i) => !done.has(i.taskId));
  const checked = await taskIdsNeedingValidation(db, notDone.map((i) => i.taskId));
  for (const item of notDone.filter((i) => checked.has(i.taskId))) {
    try {
      settled.set(item.taskId, await taskOutputSettle(db, item));
    } catch (e) {
      // Refused like any stale completion: the caller sees it in `refused`.
      if (!(e instanceof LeaseLostError || e instanceof IllegalTransitionError)) throw e;
    }
  }
  return { ...r, refused: notDone.filter((i) => !settled.has(i.taskId)).map((i) => i.taskId), settled };
}

function completionInput(c: Completion): CompletionInput {
  return { id: c.taskId, fence: c.fence, output: c.output, costUsd: c.costUsd, tokensIn: c.tokensIn, tokensOut: c.tokensOut, model: c.model };
}

export interface Failure extends TaskRef {
  errorClass: string;
  message: string;
  /** False: skip remaining retries and dead-letter now (a NonRetryableError). */
  retryable?: boolean;
  /** Do not retry sooner than this (a provider's Retry-After). */
  retryAfterSec?: number;
  costUsd?: number;
  tokensIn?: number;
  tokensOut?: number;
  model?: string | null;
  details?: Record<string, unknown>;
}

export type FailureOutcome =
  | { status: 'retrying' | 'ready'; retryAt: Date }
  | { status: 'dead_lettered'; deadLetterId: string; reason: string; poisonPill: boolean };

/**
 * Record a failed attempt and apply the retry policy, in one transaction:
 * leased → failed → retrying | ready | dead_lettered.
 */
export async function taskFail(db: Db, f: Failure, opts: { log?: Logger; reapCondition?: FailureInput['reapCondition']; random?: () => number } = {}): Promise<FailureOutcome> {
  let type = '';
  const outcome = await withTx(db, async (tx) => {
    const failed = await taskFailMark(tx, {
      id: f.taskId, fence: f.fence, errorClass: f.errorClass, message: f.message, costUsd: f.costUsd,
      tokensIn: f.tokensIn, tokensOut: f.tokensOut, model: f.model, details: f.details, reapCondition: opts.reapCondition,
    });
    if (!failed) return null;
    type = failed.type;
    const stats = await attemptFailureStats(tx, failed.id, failed.attemptsResetFence);
    const decision = retryDecide(failed.retryPolicy as unknown as RetryPolicy, {
      errorClass: f.errorClass, attempt: failed.attempts, maxAttempts: failed.maxAttempts,
      failures: stats.failures, distinctAgents: stats.agents, retryable: f.retryable, retryAfterSec: f.retryAfterSec,
    }, opts.random);
    const base = { dagId: failed.dagId, taskId: failed.id, agentId: failed.agentId };
    const failedEvent = { ...base, type: 'task.failed', data: { errorClass: f.errorClass, message: f.message, attempt: failed.attempts } };
    if (decision.action === 'retry') {
      const scheduled = (await taskRetrySchedule(tx, failed.id, decision.delaySec))!;
      await eventInsertMany(tx, [failedEvent, { ...base, type: 'task.retry_scheduled', data: { delaySec: decision.delaySec, status: scheduled.status } }]);
      return { status: scheduled.status as 'retrying' | 'ready', retryAt: scheduled.runAt };
    }
    const deadLetterId = newDeadLetterId();
    await taskDeadLetterMark(tx, failed.id);
    await deadLetterInsert(tx, {
      id: deadLetterId, taskId: failed.id, dagId: failed.dagId, reason: decision.reason, errorClass: f.errorClass,
      poisonPill: decision.poisonPill, attempts: failed.attempts,
    });
    const [dag] = await dagStatusRefresh(tx, [failed.dagId]);
    await eventInsertMany(tx, [failedEvent, { ...base, type: 'task.dead_lettered', data: { deadLetterId, reason: decision.reason, poisonPill: decision.poisonPill } }]);
    if (dag?.status === 'blocked' && dag.previous !== 'blocked') {
      await eventInsertMany(tx, [{ type: 'dag.blocked', dagId: failed.dagId, data: { deadLetterId, taskId: failed.id } }]);
    }
    return { status: 'dead_lettered' as const, deadLetterId, reason: decision.reason, poisonPill: decision.poisonPill };
  });
  if (!outcome) return guardExplain(db, f.taskId, f.fence, 'fail');
  engineEvents.emit('failed', { type, errorClass: f.errorClass, outcome: outcome.status, reason: outcome.status === 'dead_lettered' ? outcome.reason : undefined });
  opts.log?.info({ taskId: f.taskId, errorClass: f.errorClass, ...outcome }, 'task failed');
  return outcome;
}

/** Hand a leased task back to READY without consuming an attempt (agent shutdown); cost reported so far is charged. */
export async function taskRelease(
  db: Db, ref: TaskRef & { reason?: string; costUsd?: number; tokensIn?: number; tokensOut?: number; model?: string | null },
): Promise<void> {
  const ok = await withTx(db, async (tx) => {
    const released = await taskReleaseQuery(tx, ref.taskId, ref.fence, ref.reason ?? 'released by agent', ref);
    if (released) {
      await eventInsertMany(tx, [{ type: 'task.released', taskId: ref.taskId, dagId: released.dagId, agentId: released.agentId, data: { reason: ref.reason ?? null } }]);
    }
    return released !== null;
  });
  if (!ok) await guardExplain(db, ref.taskId, ref.fence, 'release');
}

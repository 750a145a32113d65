import type { Logger } from 'pino';
import { withTx } from '../../db/tx.js';
import type { Db } from '../../db/handle.js';
import { attemptFailureStats } from '../../db/queries/attempts.js';
import { dagsLock, dagStatusRefresh } from '../../db/queries/dags.js';
import { deadLetterInsert } from '../../db/queries/dead-letters.js';
import { eventInsertMany } from '../../db/queries/events.js';
import { rateLimitPauseKey } from '../../db/queries/rate-limits.js';
import { modelPause } from '../../db/queries/model-pauses.js';
import { taskDeadLetterMark, taskFailMark, taskRateLimitedInARow, taskRateLimitedMark, taskRetrySchedule } from '../../db/queries/tasks-lifecycle.js';
import { RATE_LIMIT_DEFAULTS } from '../../config/index.js';
import { newDeadLetterId } from '../../ids.js';
import { attemptsEndedEmit, engineEvents } from '../../observability/engine-events.js';
import { failureRefusal, refusalExplain, type TaskRef } from './refusal.js';
import type { FailureOutcome } from './outcome.js';
import { retryDecide } from './retry-policy.js';
import { spendOf } from './completion-write.js';
import type { AttemptSpend, FailureInput } from '../../db/rows.js';

export type { FailureOutcome } from './outcome.js';

/**
 * The one way an attempt fails: an agent's report, the reaper, a validation
 * step's negative verdict and a validator's malformed answer all come here.
 */
export interface Failure extends TaskRef, AttemptSpend {
  errorClass: string;
  message: string;
  /** False: skip remaining retries and dead-letter now (a NonRetryableError). */
  retryable?: boolean;
  /** Do not retry sooner than this (a provider's Retry-After). */
  retryAfterSec?: number;
  details?: Record<string, unknown>;
}

/**
 * Record a failed attempt and apply the retry policy, in one transaction:
 * leased → failed → retrying | ready | dead_lettered.
 */
export async function taskFail(db: Db, f: Failure, opts: { log?: Logger; reapCondition?: FailureInput['reapCondition']; random?: () => number } = {}): Promise<FailureOutcome> {
  if (f.errorClass === 'rate_limit' && !opts.reapCondition) {
    const returned = await taskRateLimited(db, f, { log: opts.log });
    if (returned) return returned;
  }
  let type = '';
  const outcome = await withTx(db, async (tx) => {
    const marked = await taskFailMark(tx, {
      id: f.taskId, fence: f.fence, errorClass: f.errorClass, message: f.message, ...spendOf(f), details: f.details, reapCondition: opts.reapCondition,
    });
    if (!('failed' in marked)) return marked;
    const { failed } = marked;
    type = failed.type;
    // The retry or the dead letter below writes the task row again, and PostgreSQL's check of the foreign key
    // tasks.dag_id then takes a KEY SHARE lock on the DAG's row until this transaction ends. Beside the completions'
    // updates of that row, that lock made a multixact of it, and completions that locked its newest version, then
    // updated the version their snapshot saw, deadlocked with each other (test/faults/reaper-race.test.ts): the DAG's
    // row is held as a DAG row first, after the task's (docs/architecture.md, "Lock order").
    await dagsLock(tx, [failed.dagId]);
    const stats = await attemptFailureStats(tx, failed.id, failed.attemptsResetFence);
    const decision = retryDecide(failed.retryPolicy, {
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
      await eventInsertMany(tx, [{ type: 'dag.blocked', dagId: failed.dagId, data: { reason: 'dead_letter', message: dag.reason, deadLetterId, taskId: failed.id } }]);
    }
    return { status: 'dead_lettered' as const, deadLetterId, reason: decision.reason, poisonPill: decision.poisonPill };
  });
  if ('refused' in outcome) {
    // The same failure reported again (its reply was lost) gets the outcome it had; a different one is a 409.
    const refusal = failureRefusal(f, outcome.refused, opts.reapCondition !== undefined);
    if (refusal === 'race') return refusalExplain(db, f, 'fail');
    if ('error' in refusal) throw refusal.error;
    return refusal.replayed;
  }
  engineEvents.emit('failed', { type, errorClass: f.errorClass, outcome: outcome.status, reason: outcome.status === 'dead_lettered' ? outcome.reason : undefined });
  attemptsEndedEmit(() => [{ taskId: f.taskId, fence: f.fence }]);
  // One line per failure, wherever it was reported (an agent process's logger already carries the task's id).
  if (opts.log) opts.log.warn({ ...('taskId' in opts.log.bindings() ? {} : { taskId: f.taskId }), errorClass: f.errorClass, message: f.message, ...outcome }, 'task failed');
  return outcome;
}

/**
 * A provider's rate limit is not the task's failure: the attempt is given back, the task is READY again
 * after the provider's Retry-After, and the model it hit is paused for every agent until then (the claim
 * hands out tasks on other models meanwhile). Null when this limit must count as an attempt after all
 * (RATE_LIMIT_DEFAULTS.returnsMax in a row) or the guard did not match: taskFail then goes on as for any failure.
 */
async function taskRateLimited(db: Db, f: Failure, opts: { log?: Logger } = {}): Promise<FailureOutcome | null> {
  const r = await withTx(db, async (tx) => {
    const inARow = await taskRateLimitedInARow(tx, f.taskId);
    if (inARow >= RATE_LIMIT_DEFAULTS.returnsMax) return null;
    const delaySec = f.retryAfterSec ?? Math.min(RATE_LIMIT_DEFAULTS.maxDelaySec, RATE_LIMIT_DEFAULTS.baseDelaySec * 2 ** inARow);
    const details = { ...f.details, retry_after_sec: delaySec, in_a_row: inARow + 1 };
    const returned = await taskRateLimitedMark(tx, {
      id: f.taskId, fence: f.fence, delaySec, message: f.message, details,
      spent: spendOf(f),
    });
    if (!returned) return null;
    // The fleet-wide pause: only on a model this attempt was handed (one the task accepts and the agent has: a task
    // that names no model pauses none), for at most maxDelaySec per agent (modelPause), so no agent stops the fleet
    // from using a model for long.
    const model = f.model && returned.taskModels.includes(f.model) && (returned.agentModels.includes('*') || returned.agentModels.includes(f.model)) ? f.model : null;
    // A model whose only declared limit is its provider's pauses the provider (every model of it).
    const pauseKey = model ? await rateLimitPauseKey(tx, model) : null;
    const pausedUntil = pauseKey
      ? await modelPause(tx, {
        model: pauseKey, delaySec: Math.min(delaySec, RATE_LIMIT_DEFAULTS.maxDelaySec), maxDelaySec: RATE_LIMIT_DEFAULTS.maxDelaySec,
        reason: f.message.slice(0, 500), taskId: f.taskId, agentId: returned.agentId ?? '',
      })
      : null;
    await eventInsertMany(tx, [{
      type: 'task.rate_limited', dagId: returned.dagId, taskId: f.taskId, agentId: returned.agentId,
      data: { model: f.model ?? null, paused: pauseKey, delaySec, retryAt: returned.runAt, pausedUntil, message: f.message },
    }]);
    return { ...returned, delaySec };
  });
  if (!r) return null;
  engineEvents.emit('failed', { type: r.type, errorClass: 'rate_limit', outcome: 'rate_limited' });
  attemptsEndedEmit(() => [{ taskId: f.taskId, fence: f.fence }]);
  opts.log?.warn({ taskId: f.taskId, model: f.model ?? null, delaySec: r.delaySec }, 'rate limited: task back to READY later, no attempt spent');
  return { status: 'retrying', retryAt: r.runAt, rateLimited: true };
}

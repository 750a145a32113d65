import { and, eq, inArray, sql, type SQL } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { LEASE_DEFAULTS } from '../../config/index.js';
import { tasks } from '../schema/index.js';
import { fromStates, type TaskState } from '../../model/state-machine.js';
import { effectivePriorityOnReadySql } from '../../model/priority.js';
import { dateOf, rowsOf, textArray } from '../statement.js';
import { refusedRowColumns, refusedRowOf } from './tasks-refusal.js';
import { readyNotifySql } from './ready-hint.js';
import { spendSettleCtes, spendSql } from './spend.js';
import type { AttemptSpend, FailureInput, RefusedRow } from '../rows.js';
import { usageOfAttemptSql } from './usage.js';
import { taskUnstartedSql } from './task-hold.js';
import { retryPolicyOf } from '../schema/column-types.js';
import type { RetryPolicy } from '../../dag/spec.js';

export type { FailureInput } from '../rows.js';

/**
 * The guarded transitions of an attempt, each one statement that checks id, fence
 * and the expected old state: start, lease extension, failure (then retry or dead
 * letter) and release. Completion is tasks-complete.ts; VALIDATING is tasks-validate.ts.
 */

/**
 * The heartbeat lease: the caller's, else three of the task's heartbeat_sec,
 * else LEASE_DEFAULTS.heartbeatLeaseSec. Computed in SQL, from the row (the claim and a hand-off start it too).
 */
export function leaseSql(leaseSec: number | undefined): SQL {
  return sql`make_interval(secs => coalesce(${leaseSec ?? null}::float8, heartbeat_sec * ${LEASE_DEFAULTS.beatsPerLease}, ${LEASE_DEFAULTS.heartbeatLeaseSec}))`;
}

/** Returns the new lease expiry, or null if the guard (id, fence, state) did not match. */
export async function taskStartMark(db: Db, id: string, fence: number, leaseSec?: number): Promise<Date | null> {
  const [r] = await rowsOf<{ lease: string }>(db, sql`
    update tasks set status = 'running', started_at = now(), heartbeat_at = now(),
      lease_expires_at = now() + ${leaseSql(leaseSec)}, updated_at = now()
    where id = ${id} and fence = ${fence} and status = any(${textArray(fromStates('start'))})
    returning lease_expires_at as lease`);
  return dateOf(r?.lease);
}

/** Extend a held task's lease and record progress. Returns the new lease expiry, or null if the guard did not match. */
export async function taskLeaseExtend(
  db: Db, id: string, fence: number, leaseSec: number | undefined, progress?: number, message?: string,
): Promise<Date | null> {
  const [r] = await rowsOf<{ lease: string }>(db, sql`
    update tasks set heartbeat_at = now(), lease_expires_at = now() + ${leaseSql(leaseSec)},
      progress = coalesce(${progress ?? null}::real, progress), progress_message = coalesce(${message ?? null}::text, progress_message)
    where id = ${id} and fence = ${fence} and status = any(${textArray(fromStates('heartbeat'))})
    returning lease_expires_at as lease`);
  return dateOf(r?.lease);
}

export interface FailedRow {
  id: string;
  dagId: string;
  key: string;
  type: string;
  attempts: number;
  maxAttempts: number;
  retryPolicy: RetryPolicy;
  agentId: string | null;
  attemptsResetFence: number;
  costUsd: number;
}

/**
 * leased → failed, recording the attempt. When the guard did not match, `refused` is the row and the attempt under
 * the reported fence as they stood (tasks-refusal.ts), or null when there is no such task.
 */
export async function taskFailMark(db: Db, f: FailureInput): Promise<{ failed: FailedRow } | { refused: RefusedRow | null }> {
  const { cost, tokensIn, tokensOut } = spendSql(f);
  // A failure the holder did not report (its lease lapsed, its run overran) says so on the attempt: the holder's late
  // report is then told it lost the lease, not that it contradicts itself (refusal.ts).
  const details = f.reapCondition ? { ...f.details, reaped: f.reapCondition } : f.details;
  const [r] = await rowsOf<Partial<FailedRow> & { refused: (Omit<RefusedRow, 'runAt'> & { runAt: string | null }) | null }>(db, sql`
    with failed as (
      update tasks t set status = 'failed', lease_expires_at = null, last_error = ${f.message}, updated_at = now(),
        cost_usd = t.cost_usd + ${cost}, tokens_in = t.tokens_in + ${tokensIn}, tokens_out = t.tokens_out + ${tokensOut}
      where t.id = ${f.id} and t.fence = ${f.fence} and t.status = any(${textArray(fromStates('fail'))})
        ${f.reapCondition === 'lease_expired' ? sql`and t.lease_expires_at < now()` : sql``}
        ${f.reapCondition === 'over_max_duration' ? sql`and t.started_at + make_interval(secs => t.max_duration_sec) < now()` : sql``}
      returning t.*
    ),
    recorded as (
      insert into attempts (task_id, dag_id, attempt, fence, agent_id, outcome, error_class, error_message, started_at, ended_at,
                            duration_ms, cost_usd, tokens_in, tokens_out, model, details)
      select id, dag_id, attempts, fence, claimed_by, 'failed', ${f.errorClass}, ${f.message}, claimed_at, now(),
             (extract(epoch from now() - claimed_at) * 1000)::int, ${cost} + ${usageOfAttemptSql('failed').cost}, ${tokensIn} + ${usageOfAttemptSql('failed').tokensIn}, ${tokensOut} + ${usageOfAttemptSql('failed').tokensOut},
             ${f.model ?? null}, ${details ? JSON.stringify(details) : null}::jsonb
      from failed
      -- A VALIDATING task's attempt was recorded when its output was submitted: the negative verdict finishes it.
      on conflict (task_id, fence) do update set outcome = 'failed', error_class = excluded.error_class, error_message = excluded.error_message,
        ended_at = excluded.ended_at, cost_usd = attempts.cost_usd + excluded.cost_usd, tokens_in = attempts.tokens_in + excluded.tokens_in,
        tokens_out = attempts.tokens_out + excluded.tokens_out, model = coalesce(excluded.model, attempts.model),
        details = coalesce(attempts.details, '{}'::jsonb) || coalesce(excluded.details, '{}'::jsonb)
    ),
    ${spendSettleCtes('failed', cost)}
    select f.*, (
      select to_jsonb(x) from (
        select ${refusedRowColumns('t', 'a')} from tasks t left join attempts a on a.task_id = t.id and a.fence = ${f.fence}
        where t.id = ${f.id}) x
      where not exists (select 1 from failed)
    ) as refused
    from (select 1) one left join (
      select id, dag_id as "dagId", key, type, attempts, max_attempts as "maxAttempts", retry_policy as "retryPolicy",
             claimed_by as "agentId", attempts_reset_fence as "attemptsResetFence", cost_usd::float8 as "costUsd"
      from failed) f on true`);
  if (r?.id) {
    const { refused: _, ...failed } = r;
    return { failed: { ...failed, retryPolicy: retryPolicyOf(failed.retryPolicy) } as FailedRow };
  }
  return { refused: r?.refused ? refusedRowOf(r.refused) : null };
}

/** failed → retrying (run_at = now + delay), or straight to ready when the delay is zero. */
export async function taskRetrySchedule(db: Db, id: string, delaySec: number): Promise<{ status: TaskState; runAt: Date } | null> {
  const [r] = await rowsOf<{ status: TaskState; run_at: string }>(db, sql`
    with scheduled as (
      update tasks set
        status = case when ${delaySec}::float8 <= 0 then 'ready' else 'retrying' end,
        run_at = now() + make_interval(secs => ${delaySec}::float8),
        ready_at = case when ${delaySec}::float8 <= 0 then now() else ready_at end,
        ${effectivePriorityOnReadySql()},
        updated_at = now()
      where id = ${id} and status = any(${textArray(fromStates('scheduleRetry'))})
      returning status, run_at, cap_key, tenant_id
    )
    select status, run_at, ${readyNotifySql(sql`scheduled`)} as notified from scheduled`);
  return r ? { status: r.status, runAt: dateOf(r.run_at)! } : null;
}

export async function taskDeadLetterMark(db: Db, id: string): Promise<boolean> {
  const r = await db.update(tasks).set({ status: 'dead_lettered', updatedAt: sql`now()` })
    .where(and(eq(tasks.id, id), inArray(tasks.status, [...fromStates('deadLetter')]))).returning({ id: tasks.id });
  return r.length > 0;
}

/**
 * Give a leased task back without consuming an attempt (graceful shutdown); the cost it reported is still charged.
 * `lapsed`: the reaper's variant for a lease that lapsed before the agent showed any sign of life after the
 * claim (taskUnstartedSql: the claim's reply was most likely lost).
 * It re-checks all of that in the statement, counts the lapse, and applies only while the task has lapsed fewer
 * than LEASE_DEFAULTS.claimLapsesMax times; the attempt row's outcome is `lapsed`.
 * `crashShared`: the reaper's variant for a running task whose agent died holding other tasks too, when
 * nothing points at this one (maintenance/crash-blame.ts): its lease must have lapsed; outcome `crash_shared`,
 * with `details` naming the tasks it died with; the task runs alone from now on (run_alone).
 */
export async function taskReleaseMark(
  db: Db, id: string, fence: number, reason: string, spent: AttemptSpend = {},
  o: { lapsed?: boolean; crashShared?: boolean; details?: Record<string, unknown> } = {},
): Promise<{ dagId: string; agentId: string | null } | null> {
  const { cost, tokensIn, tokensOut } = spendSql(spent);
  const lapse = o.lapsed
    ? sql`and t.lease_expires_at < now() and ${taskUnstartedSql('t')}
          and t.claim_lapses < ${LEASE_DEFAULTS.claimLapsesMax}`
    : o.crashShared ? sql`and t.status = 'running' and t.lease_expires_at < now()` : sql``;
  const outcome = o.lapsed ? 'lapsed' : o.crashShared ? 'crash_shared' : 'released';
  const [r] = await rowsOf<{ dagId: string; agentId: string | null }>(db, sql`
    with released as (
      update tasks t set status = 'ready', ready_at = now(), attempts = t.attempts - 1, lease_expires_at = null, updated_at = now(),
        ${effectivePriorityOnReadySql()}, claim_lapses = t.claim_lapses + ${o.lapsed ? 1 : 0}${o.crashShared ? sql`, run_alone = true` : sql``},
        cost_usd = t.cost_usd + ${cost}, tokens_in = t.tokens_in + ${tokensIn}, tokens_out = t.tokens_out + ${tokensOut}
      where t.id = ${id} and t.fence = ${fence} and t.status = any(${textArray(fromStates('release'))}) ${lapse}
      returning t.*
    ),
    recorded as (
      insert into attempts (task_id, dag_id, attempt, fence, agent_id, outcome, error_message, started_at, ended_at, duration_ms,
                            cost_usd, tokens_in, tokens_out, model, details)
      select id, dag_id, attempts + 1, fence, claimed_by, ${outcome}, ${reason}, claimed_at, now(),
             (extract(epoch from now() - claimed_at) * 1000)::int, ${cost} + ${usageOfAttemptSql('released').cost}, ${tokensIn} + ${usageOfAttemptSql('released').tokensIn}, ${tokensOut} + ${usageOfAttemptSql('released').tokensOut}, ${spent.model ?? null},
             ${o.details ? sql`${JSON.stringify(o.details)}::jsonb` : sql`null`}
      from released
    ),
    ${spendSettleCtes('released', cost)}
    select dag_id as "dagId", claimed_by as "agentId", ${readyNotifySql(sql`released`)} as notified from released`);
  return r ?? null;
}

/**
 * leased → retrying after a provider's rate limit: back to READY at `delaySec` (the promoter), the attempt
 * given back (`attempts − 1`, like a release), recorded with outcome `rate_limited`; the cost it reported is
 * charged and its reservation returned. Null if the guard (id, fence, state) did not match.
 */
export async function taskRateLimitedMark(
  db: Db, r: { id: string; fence: number; delaySec: number; message: string; spent: AttemptSpend; details: Record<string, unknown> },
): Promise<{ dagId: string; agentId: string | null; type: string; runAt: Date; taskModels: string[]; agentModels: string[] } | null> {
  const { cost, tokensIn, tokensOut } = spendSql(r.spent);
  const [row] = await rowsOf<{ dagId: string; agentId: string | null; type: string; runAt: string; taskModels: string[]; agentModels: string[] | null }>(db, sql`
    with returned as (
      update tasks t set status = 'retrying', run_at = now() + make_interval(secs => ${r.delaySec}::float8), attempts = t.attempts - 1,
        lease_expires_at = null, last_error = ${r.message}, updated_at = now(),
        cost_usd = t.cost_usd + ${cost}, tokens_in = t.tokens_in + ${tokensIn}, tokens_out = t.tokens_out + ${tokensOut}
      where t.id = ${r.id} and t.fence = ${r.fence} and t.status = any(${textArray(fromStates('rateLimit'))})
      returning t.*
    ),
    recorded as (
      insert into attempts (task_id, dag_id, attempt, fence, agent_id, outcome, error_class, error_message, started_at, ended_at, duration_ms,
                            cost_usd, tokens_in, tokens_out, model, details)
      select id, dag_id, attempts + 1, fence, claimed_by, 'rate_limited', 'rate_limit', ${r.message}, claimed_at, now(),
             (extract(epoch from now() - claimed_at) * 1000)::int, ${cost} + ${usageOfAttemptSql('returned').cost}, ${tokensIn} + ${usageOfAttemptSql('returned').tokensIn}, ${tokensOut} + ${usageOfAttemptSql('returned').tokensOut}, ${r.spent.model ?? null},
             ${JSON.stringify(r.details)}::jsonb
      from returned
    ),
    ${spendSettleCtes('returned', cost)}
    select dag_id as "dagId", claimed_by as "agentId", type, run_at as "runAt", models as "taskModels",
      (select a.models from agents a where a.id = returned.claimed_by) as "agentModels"
    from returned`);
  return row ? { ...row, runAt: dateOf(row.runAt)!, agentModels: row.agentModels ?? [] } : null;
}

/** How many of the task's latest attempts in a row ended in a rate limit. */
export async function taskRateLimitedInARow(db: Db, id: string): Promise<number> {
  const [r] = await rowsOf<{ n: number }>(db, sql`
    select count(*)::int as n from attempts a
    where a.task_id = ${id} and a.outcome = 'rate_limited'
      and a.fence > coalesce((select max(b.fence) from attempts b where b.task_id = ${id} and b.outcome <> 'rate_limited'), 0)`);
  return r?.n ?? 0;
}

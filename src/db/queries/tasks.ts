import { and, asc, eq, inArray, sql, type SQL } from 'drizzle-orm';
import type { PgInsertValue } from 'drizzle-orm/pg-core';
import type { Db } from '../connection.js';
import { tasks } from '../schema/index.js';
import { LEASED_STATES, fromStates, type TaskState } from '../../model/state-machine.js';
import { effectivePriorityOnReadySql } from '../../model/priority.js';
import { READY_CHANNEL, dateOf, rowsOf, textArray } from './run.js';
import { LEASE_DEFAULTS } from '../../config/index.js';
import { capabilityGroupsEnsure, capKeyOf } from './capability-groups.js';

export type TaskRow = typeof tasks.$inferSelect;
/** A task row to insert; columns may be SQL expressions (times relative to the database clock). */
export type TaskInsert = PgInsertValue<typeof tasks>;

const CHUNK = 500;

/** Insert tasks (and record any capability group not seen before, so claims can find them). */
export async function taskInsertMany(db: Db, rows: TaskInsert[]): Promise<void> {
  await capabilityGroupsEnsure(db, rows.map((r) => (r.requiredCapabilities as string[] | undefined) ?? []));
  for (let i = 0; i < rows.length; i += CHUNK) await db.insert(tasks).values(rows.slice(i, i + CHUNK));
}

/** Statement fragment: NOTIFY once if the CTE `source(status)` holds a READY row. */
export function notifyIfReady(source: SQL): SQL {
  return sql`(select count(*) from (select pg_notify(${READY_CHANNEL}, '') from (select 1 from ${source} where status = 'ready' limit 1) x) n)`;
}

/** What an attempt reported spending: recorded on its attempts row and charged, however it ended. */
export interface SpentSoFar { costUsd?: number; tokensIn?: number; tokensOut?: number; model?: string | null }

/** The spend as typed SQL values: Postgres would otherwise infer `$n > 0` as integer and refuse a fractional cost. */
export function spentSql(s: SpentSoFar): { cost: SQL; tokensIn: SQL; tokensOut: SQL } {
  return { cost: sql`${s.costUsd ?? 0}::numeric`, tokensIn: sql`${s.tokensIn ?? 0}::bigint`, tokensOut: sql`${s.tokensOut ?? 0}::bigint` };
}

/**
 * CTEs `dag_spend` and `agent_spend`: settle the attempt the CTE `source` ended.
 * Charge `cost` to its DAG and its agent, and release the budget its claim reserved:
 * `release`, by default the row's `reserved_usd`.
 */
export function spendChargeCtes(source: string, cost: SQL, release?: SQL): SQL {
  const s = sql.raw(source);
  const r = release ?? sql`${s}.reserved_usd`;
  return sql`
    dag_spend as (
      update dags g set spent_usd = g.spent_usd + ${cost}, reserved_usd = greatest(0, g.reserved_usd - ${r})
      from ${s} where g.id = ${s}.dag_id and (${cost} > 0 or ${r} > 0)
    ),
    agent_spend as (
      update agents a set spent_usd = a.spent_usd + ${cost}, reserved_usd = greatest(0, a.reserved_usd - ${r})
      from ${s} where a.id = ${s}.claimed_by and (${cost} > 0 or ${r} > 0)
    )`;
}

/** created → pending | ready for every created task of a DAG (the activate transition). */
export async function taskActivateCreated(db: Db, dagId: string): Promise<{ ready: number; pending: number }> {
  const [r] = await rowsOf<{ ready: number; pending: number }>(db, sql`
    with activated as (
      update tasks set
        status = case when deps_remaining = 0 and (run_at is null or run_at <= now()) then 'ready' else 'pending' end,
        ready_at = case when deps_remaining = 0 and (run_at is null or run_at <= now()) then now() end,
        ${effectivePriorityOnReadySql()},
        updated_at = now()
      where dag_id = ${dagId} and status = any(${textArray(fromStates('activate'))})
      returning status
    )
    select count(*) filter (where status = 'ready')::int as ready,
           count(*) filter (where status = 'pending')::int as pending,
           ${notifyIfReady(sql`activated`)} as notified
    from activated`);
  return { ready: r?.ready ?? 0, pending: r?.pending ?? 0 };
}

export async function taskGet(db: Db, id: string): Promise<TaskRow | undefined> {
  const [row] = await db.select().from(tasks).where(eq(tasks.id, id));
  return row;
}

export function taskListForDag(db: Db, dagId: string) {
  return db.select().from(tasks).where(eq(tasks.dagId, dagId)).orderBy(asc(tasks.createdAt), asc(tasks.key));
}

export function taskList(db: Db, filter: { dagId?: string; status?: string; limit?: number }) {
  const where = and(filter.dagId ? eq(tasks.dagId, filter.dagId) : undefined, filter.status ? eq(tasks.status, filter.status) : undefined);
  return db.select().from(tasks).where(where).orderBy(asc(tasks.effectivePriority), asc(tasks.createdAt)).limit(filter.limit ?? 1000);
}

/** Outputs of the named tasks of a DAG (what a task's context refs point at). */
export function taskOutputsByKeys(db: Db, dagId: string, keys: string[]) {
  return db.select({ key: tasks.key, output: tasks.output }).from(tasks).where(and(eq(tasks.dagId, dagId), inArray(tasks.key, keys)));
}

/** An unclaimed task gained `n` unfinished upstream tasks: it waits (READY goes back to PENDING). False if it was already claimed. */
export async function taskDepsAdd(db: Db, id: string, n: number): Promise<boolean> {
  const r = await rowsOf(db, sql`
    update tasks set deps_remaining = deps_remaining + ${n},
      status = case when status = 'created' then 'created' else 'pending' end, ready_at = null, updated_at = now()
    where id = ${id} and status = any(${textArray(fromStates('block'))})
    returning id`);
  return r.length > 0;
}

/**
 * The heartbeat lease: the caller's, else three of the task's heartbeat_sec,
 * else LEASE_DEFAULTS.heartbeatLeaseSec. Computed in SQL, from the row.
 */
export function leaseSql(leaseSec: number | undefined): SQL {
  return sql`make_interval(secs => coalesce(${leaseSec ?? null}::float8, heartbeat_sec * ${LEASE_DEFAULTS.beatsPerLease}, ${LEASE_DEFAULTS.heartbeatLeaseSec}))`;
}

/** Returns the new lease expiry, or null if the guard (id, fence, state) did not match. */
export async function taskStart(db: Db, id: string, fence: number, leaseSec?: number): Promise<Date | null> {
  const [r] = await rowsOf<{ lease: string }>(db, sql`
    update tasks set status = 'running', started_at = now(), heartbeat_at = now(),
      lease_expires_at = now() + ${leaseSql(leaseSec)}, updated_at = now()
    where id = ${id} and fence = ${fence} and status = any(${textArray(fromStates('start'))})
    returning lease_expires_at as lease`);
  return dateOf(r?.lease);
}

export async function taskHeartbeat(
  db: Db, id: string, fence: number, leaseSec: number | undefined, progress?: number, message?: string,
): Promise<Date | null> {
  const [r] = await rowsOf<{ lease: string }>(db, sql`
    update tasks set heartbeat_at = now(), lease_expires_at = now() + ${leaseSql(leaseSec)},
      progress = coalesce(${progress ?? null}::real, progress), progress_message = coalesce(${message ?? null}::text, progress_message)
    where id = ${id} and fence = ${fence} and status = any(${textArray(fromStates('heartbeat'))})
    returning lease_expires_at as lease`);
  return dateOf(r?.lease);
}

export interface FailureInput {
  id: string;
  fence: number;
  errorClass: string;
  message: string;
  costUsd?: number;
  tokensIn?: number;
  tokensOut?: number;
  model?: string | null;
  details?: Record<string, unknown>;
  /**
   * Reaper only: re-check inside the UPDATE that the lease is still expired (or the
   * run still over its max duration), so a heartbeat or completion that just landed wins.
   */
  reapCondition?: 'lease_expired' | 'over_max_duration';
}

export interface FailedRow {
  id: string;
  dagId: string;
  key: string;
  type: string;
  attempts: number;
  maxAttempts: number;
  retryPolicy: Record<string, unknown>;
  agentId: string | null;
  attemptsResetFence: number;
  costUsd: number;
}

/** leased → failed, recording the attempt. Null if the guard did not match. */
export async function taskFailMark(db: Db, f: FailureInput): Promise<FailedRow | null> {
  const { cost, tokensIn, tokensOut } = spentSql(f);
  const [r] = await rowsOf<FailedRow>(db, sql`
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
             (extract(epoch from now() - claimed_at) * 1000)::int, ${cost}, ${tokensIn}, ${tokensOut},
             ${f.model ?? null}, ${f.details ? JSON.stringify(f.details) : null}::jsonb
      from failed
      -- A VALIDATING task's attempt was recorded when its output was submitted: the negative verdict finishes it.
      on conflict (task_id, fence) do update set outcome = 'failed', error_class = excluded.error_class, error_message = excluded.error_message,
        ended_at = excluded.ended_at, cost_usd = attempts.cost_usd + excluded.cost_usd, tokens_in = attempts.tokens_in + excluded.tokens_in,
        tokens_out = attempts.tokens_out + excluded.tokens_out, model = coalesce(excluded.model, attempts.model),
        details = coalesce(attempts.details, '{}'::jsonb) || coalesce(excluded.details, '{}'::jsonb)
    ),
    ${spendChargeCtes('failed', cost)}
    select id, dag_id as "dagId", key, type, attempts, max_attempts as "maxAttempts", retry_policy as "retryPolicy",
           claimed_by as "agentId", attempts_reset_fence as "attemptsResetFence", cost_usd::float8 as "costUsd"
    from failed`);
  return r ?? null;
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
      returning status, run_at
    )
    select status, run_at, ${notifyIfReady(sql`scheduled`)} as notified from scheduled`);
  return r ? { status: r.status, runAt: dateOf(r.run_at)! } : null;
}

export async function taskDeadLetterMark(db: Db, id: string): Promise<boolean> {
  const r = await db.update(tasks).set({ status: 'dead_lettered', updatedAt: sql`now()` })
    .where(and(eq(tasks.id, id), inArray(tasks.status, [...fromStates('deadLetter')]))).returning({ id: tasks.id });
  return r.length > 0;
}

/** dead_lettered → ready (or pending if not_before is still ahead). Optionally restart the attempt budget. */
export async function taskDeadLetterRetry(db: Db, id: string, resetAttempts: boolean): Promise<boolean> {
  const r = await rowsOf<{ status: string }>(db, sql`
    with revived as (
      update tasks set
        status = case when run_at is null or run_at <= now() then 'ready' else 'pending' end,
        ready_at = now(), updated_at = now(), last_error = null, ${effectivePriorityOnReadySql()},
        attempts = case when ${resetAttempts} then 0 else attempts end,
        attempts_reset_fence = case when ${resetAttempts} then fence else attempts_reset_fence end
      where id = ${id} and status = any(${textArray(fromStates('dlqRetry'))})
      returning status
    )
    select status, ${notifyIfReady(sql`revived`)} as notified from revived`);
  return r.length > 0;
}

/** Give a leased task back without consuming an attempt (graceful shutdown); the cost it reported is still charged. */
export async function taskRelease(
  db: Db, id: string, fence: number, reason: string, spent: SpentSoFar = {},
): Promise<{ dagId: string; agentId: string | null } | null> {
  const { cost, tokensIn, tokensOut } = spentSql(spent);
  const [r] = await rowsOf<{ dagId: string; agentId: string | null }>(db, sql`
    with released as (
      update tasks t set status = 'ready', ready_at = now(), attempts = t.attempts - 1, lease_expires_at = null, updated_at = now(),
        ${effectivePriorityOnReadySql()},
        cost_usd = t.cost_usd + ${cost}, tokens_in = t.tokens_in + ${tokensIn}, tokens_out = t.tokens_out + ${tokensOut}
      where t.id = ${id} and t.fence = ${fence} and t.status = any(${textArray(fromStates('release'))})
      returning t.*
    ),
    recorded as (
      insert into attempts (task_id, dag_id, attempt, fence, agent_id, outcome, error_message, started_at, ended_at, duration_ms,
                            cost_usd, tokens_in, tokens_out, model)
      select id, dag_id, attempts + 1, fence, claimed_by, 'released', ${reason}, claimed_at, now(),
             (extract(epoch from now() - claimed_at) * 1000)::int, ${cost}, ${tokensIn}, ${tokensOut}, ${spent.model ?? null}
      from released
    ),
    ${spendChargeCtes('released', cost)}
    select dag_id as "dagId", claimed_by as "agentId", ${notifyIfReady(sql`released`)} as notified from released`);
  return r ?? null;
}

export interface ExpiredLease { id: string; dagId: string; fence: number; status: TaskState; agentId: string | null; reason: 'claim_ttl' | 'heartbeat' | 'max_duration' }

/**
 * Leased tasks the reaper should take back: a claim never started in time, a
 * heartbeat lease that lapsed, or a run past its max_duration_sec.
 */
export function taskLeaseExpiredList(db: Db, limit: number): Promise<ExpiredLease[]> {
  return rowsOf<ExpiredLease>(db, sql`
    select id, dag_id as "dagId", fence, status, claimed_by as "agentId",
      case when status = 'claimed' then 'claim_ttl'
           when lease_expires_at < now() then 'heartbeat'
           else 'max_duration' end as reason
    from tasks
    where (status in ('claimed', 'running') and lease_expires_at < now())
       or (status = 'running' and max_duration_sec is not null
           and started_at + make_interval(secs => max_duration_sec) < now())
    order by lease_expires_at
    limit ${limit}`);
}

/** Move due RETRYING tasks, and PENDING tasks whose not_before passed with no dependency left, to READY. */
export async function taskPromoteDue(db: Db, limit: number): Promise<number> {
  const [r] = await rowsOf<{ n: number }>(db, sql`
    with due as (
      select id from tasks
      where status = any(${textArray(fromStates('promote'))}) and run_at <= now() and deps_remaining = 0
      order by run_at limit ${limit}
      for update skip locked
    ),
    promoted as (
      update tasks t set status = 'ready', ready_at = now(), updated_at = now(), ${effectivePriorityOnReadySql()}
      from due where t.id = due.id
      returning t.status
    )
    select count(*)::int as n, ${notifyIfReady(sql`promoted`)} as notified from promoted`);
  return r?.n ?? 0;
}

export interface CancelledRow { id: string; dagId: string; key: string; previous: TaskState }

/**
 * Cancel the given tasks and everything downstream of them that has not finished:
 * those can never run once an upstream is cancelled.
 */
export function taskCancelCascade(db: Db, ids: string[]): Promise<CancelledRow[]> {
  return rowsOf<CancelledRow>(db, sql`
    with recursive downstream(id) as (
      select unnest(${textArray(ids)})
      union
      select e.downstream_id from edges e join downstream d on e.upstream_id = d.id
    ),
    -- A cancelled task's validation tasks judge an output nobody will use any more.
    targets as (
      select id from downstream
      union
      select v.id from tasks v join downstream d on v.validates_id = d.id
    ),
    previous as (
      select t.id, t.status from tasks t join targets d on d.id = t.id
      where t.status = any(${textArray(fromStates('cancel'))})
      for update of t
    ),
    cancelled as (
      update tasks t set status = 'cancelled', lease_expires_at = null, completed_at = now(), updated_at = now()
      from previous p where t.id = p.id
      returning t.*, p.status as previous
    ),
    released_dag as (
      update dags g set reserved_usd = greatest(0, g.reserved_usd - x.amount)
      from (select dag_id, sum(reserved_usd) as amount from cancelled where previous in ('claimed', 'running') and reserved_usd > 0 group by dag_id) x
      where g.id = x.dag_id
    ),
    released_agent as (
      update agents a set reserved_usd = greatest(0, a.reserved_usd - x.amount)
      from (select claimed_by, sum(reserved_usd) as amount from cancelled where previous in ('claimed', 'running') and reserved_usd > 0 group by claimed_by) x
      where a.id = x.claimed_by
    ),
    cut_short as (
      insert into attempts (task_id, dag_id, attempt, fence, agent_id, outcome, error_class, error_message, started_at, ended_at, duration_ms)
      select id, dag_id, attempts, fence, claimed_by, 'cancelled', 'cancelled', 'cancelled while held by an agent', claimed_at, now(),
             (extract(epoch from now() - claimed_at) * 1000)::int
      from cancelled where previous = any(${textArray(LEASED_STATES)})
      on conflict (task_id, fence) do update set outcome = 'cancelled', error_class = 'cancelled',
        error_message = 'cancelled while its output was being validated', ended_at = excluded.ended_at
    )
    select id, dag_id as "dagId", key, previous from cancelled`);
}

export function taskNonTerminalIdsForDag(db: Db, dagId: string) {
  return db.select({ id: tasks.id }).from(tasks)
    .where(and(eq(tasks.dagId, dagId), inArray(tasks.status, [...fromStates('cancel')])));
}

export interface StatusCount { status: string; tier: string; n: number }

/** Counts by status and priority tier (urgent < 25 ≤ high < 50 ≤ normal < 75 ≤ background). */
export function taskCountsByStatusTier(db: Db): Promise<StatusCount[]> {
  return rowsOf<StatusCount>(db, sql`
    select status,
      case when priority < 25 then 'urgent' when priority < 50 then 'high' when priority < 75 then 'normal' else 'background' end as tier,
      count(*)::int as n
    from tasks group by 1, 2 order by 1, 2`);
}

export async function taskOldestReadyAgeSec(db: Db): Promise<number | null> {
  const [r] = await rowsOf<{ age: number | null }>(db, sql`
    select extract(epoch from now() - min(ready_at))::float8 as age from tasks where status = 'ready'`);
  return r?.age ?? null;
}

/** READY plus PENDING tasks: what backpressure compares with its limit (each status is walked through its partial index). */
export async function taskQueuedCount(db: Db): Promise<number> {
  const [r] = await rowsOf<{ n: number }>(db, sql`
    select (select count(*) from tasks where status = 'ready')::int + (select count(*) from tasks where status = 'pending')::int as n`);
  return r?.n ?? 0;
}

/** Serialize submissions while backpressure is on, so two of them cannot both slip under the limit. */
export async function taskSubmitLock(db: Db): Promise<void> {
  await db.execute(sql`select pg_advisory_xact_lock(hashtext('dagent.submit'))`);
}

/** Who holds a task and with which fence: the HTTP API checks an agent token against it. */
export async function taskHolderGet(db: Db, id: string): Promise<{ claimedBy: string | null; fence: number; status: string } | undefined> {
  const [r] = await db.select({ claimedBy: tasks.claimedBy, fence: tasks.fence, status: tasks.status }).from(tasks).where(eq(tasks.id, id));
  return r;
}

/** A human's edit of a dead-lettered task's spec before it is retried (only the fields given change). */
export interface TaskEdit {
  title?: string;
  prompt?: string;
  input?: Record<string, unknown>;
  models?: string[];
  fallbackModels?: string[];
  requiredCapabilities?: string[];
  priority?: number;
  maxAttempts?: number;
  maxCostUsd?: number | null;
}

/** Apply an edit to a DEAD_LETTERED task; false if it is not (any more) dead-lettered. */
export async function taskDeadLetterEdit(db: Db, id: string, e: TaskEdit): Promise<boolean> {
  const body: Record<string, unknown> = {};
  if (e.prompt !== undefined) body.prompt = e.prompt;
  if (e.input !== undefined) body.input = e.input;
  if (e.models !== undefined) body.models = e.models;
  if (e.fallbackModels !== undefined) body.fallbackModels = e.fallbackModels;
  if (e.requiredCapabilities) await capabilityGroupsEnsure(db, [e.requiredCapabilities]);
  const r = await db.update(tasks).set({
    spec: sql`${tasks.spec} || ${JSON.stringify(body)}::jsonb`,
    ...(e.title !== undefined ? { title: e.title } : {}),
    ...(e.requiredCapabilities ? { requiredCapabilities: e.requiredCapabilities, capKey: capKeyOf(e.requiredCapabilities) } : {}),
    ...(e.priority !== undefined ? { priority: e.priority } : {}),
    ...(e.maxAttempts !== undefined ? { maxAttempts: e.maxAttempts } : {}),
    ...(e.maxCostUsd !== undefined ? { maxCostUsd: e.maxCostUsd } : {}),
    updatedAt: sql`now()`,
  }).where(and(eq(tasks.id, id), eq(tasks.status, 'dead_lettered'))).returning({ id: tasks.id });
  return r.length > 0;
}

/** Every task's state in one DAG, small columns only: what the live stream diffs. */
export function taskStatesForDag(db: Db, dagId: string) {
  return db.select({
    id: tasks.id, key: tasks.key, status: tasks.status, attempts: tasks.attempts, claimedBy: tasks.claimedBy,
    progress: tasks.progress, parentId: tasks.parentId,
  }).from(tasks).where(eq(tasks.dagId, dagId));
}

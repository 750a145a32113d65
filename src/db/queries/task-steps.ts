import { and, asc, desc, eq, sql, type SQL } from 'drizzle-orm';
import type { Db } from '../handle.js';
import type { TaskStepRow } from '../rows.js';
import { taskStepReplays, taskSteps, type StepScope } from '../schema/index.js';
import { dateOf, rowsOf, textArray } from '../statement.js';
import { taskHeldSql, taskStandingOf, taskStandingSql, type TaskStanding } from './task-hold.js';

/**
 * Durable steps (db/schema/task-steps.ts): the lookup before a step runs, the fenced record after it ran, the list.
 * Never on the claim or completion path.
 */

/** A step's result as an attempt records it. */
export interface TaskStepInput {
  taskId: string;
  fence: number;
  name: string;
  scope: StepScope;
  /** The result as JSON text, checked and measured by the engine (engine/attempt/steps.ts). */
  resultJson: string;
  sizeBytes: number;
  durationMs?: number | null;
  costUsd?: number;
  tokensIn?: number;
  tokensOut?: number;
  model?: string | null;
  startedAt?: Date | null;
}

/**
 * What the record statement did: `recorded` a new row; found the row already `existing` for that name (first write
 * wins: an earlier attempt's, or this fence's own write whose reply was lost); `full` (the holder, but the task has
 * its caps (LIMITS.stepsPerTask steps, LIMITS.stepBytesPerTask bytes) and none by that name, with its totals); or `refused`: the fence no longer holds the task (moved on, not
 * claimed or running, or its lease lapsed), and nothing was written. `task` is the row as the statement saw it, to
 * say why.
 */
export type TaskStepRecordResult =
  | { kind: 'recorded' | 'existing'; step: TaskStepRow }
  | { kind: 'full'; steps: number; bytes: number }
  | { kind: 'refused'; task: TaskStanding };

const STEP_COLUMNS = sql.raw(`task_id as "taskId", dag_id as "dagId", name, scope, attempt, fence, result, size_bytes as "sizeBytes",
  duration_ms as "durationMs", cost_usd::float8 as "costUsd", tokens_in::float8 as "tokensIn", tokens_out::float8 as "tokensOut", model,
  started_at as "startedAt", recorded_at as "recordedAt"`);

type RawStep = Omit<TaskStepRow, 'startedAt' | 'recordedAt'> & { startedAt: string | Date | null; recordedAt: string | Date };
const stepOf = (r: RawStep): TaskStepRow => ({ ...r, startedAt: dateOf(r.startedAt), recordedAt: dateOf(r.recordedAt)! });

/**
 * Record a step, in ONE statement fenced as the heartbeat is (id, fence, a state that may heartbeat) and, beyond it,
 * by a live lease: a holder whose lease lapsed is about to be reaped, and what it writes now must not be replayed by
 * the attempt that follows. The task's row is locked FOR SHARE: a reap, a claim or a completion of the task waits
 * for this statement, and this statement for them (then re-checks the guard on the row as they left it), so a step
 * is never recorded under a fence that had already lost the task.
 *
 * `on conflict do nothing`: the name is taken (task scope: by any attempt; attempt scope: under this fence), so the
 * recorded row is returned and nothing changes. The cap counts the task's steps of every scope. A step recorded
 * writes its `task.step_recorded` event in the same statement.
 */
export async function taskStepRecord(db: Db, s: TaskStepInput, caps: { steps: number; bytes: number }): Promise<TaskStepRecordResult> {
  const sameName: SQL = s.scope === 'task'
    ? sql`x.name = ${s.name} and (x.scope = 'task' or x.fence = ${s.fence})`
    : sql`x.name = ${s.name} and x.fence = ${s.fence}`;
  const [r] = await rowsOf<RawStep & { held: boolean; kind: 'recorded' | 'existing' | null; status: string | null; fence_now: number | null; lapsed: boolean | null; total_steps: number; total_bytes: number }>(db, sql`
    with holder as (
      select t.id, t.dag_id, t.attempts, t.claimed_by from tasks t
      where t.id = ${s.taskId} and ${taskHeldSql('t', s.fence)}
      for share of t
    ), totals as (
      -- Counted in the statement's snapshot: steps one holder writes at the same moment may each pass the caps (a
      -- handler's parallel steps), so a task can end past them by what one attempt writes at once, never more.
      select count(*) as steps, coalesce(sum(size_bytes), 0) as bytes from task_steps c where c.task_id = ${s.taskId}
    ), ins as (
      insert into task_steps (task_id, dag_id, name, scope, attempt, fence, result, size_bytes, duration_ms, cost_usd,
        tokens_in, tokens_out, model, started_at)
      select h.id, h.dag_id, ${s.name}, ${s.scope}, h.attempts, ${s.fence}, ${s.resultJson}::jsonb, ${s.sizeBytes},
        ${s.durationMs ?? null}::int, ${s.costUsd ?? 0}::numeric, ${s.tokensIn ?? 0}::bigint, ${s.tokensOut ?? 0}::bigint,
        ${s.model ?? null}::text, ${s.startedAt?.toISOString() ?? null}::timestamptz
      from holder h, totals
      where totals.steps < ${caps.steps} and totals.bytes + ${s.sizeBytes} <= ${caps.bytes}
      on conflict do nothing
      returning *
    ), recorded_event as (
      insert into events (type, dag_id, task_id, agent_id, data)
      select 'task.step_recorded', x.dag_id, x.task_id, h.claimed_by, jsonb_build_object('step', x.name, 'scope', x.scope,
        'attempt', x.attempt, 'fence', x.fence, 'sizeBytes', x.size_bytes, 'durationMs', x.duration_ms, 'costUsd', x.cost_usd)
      from ins x, holder h
    ), found as (
      select 'recorded' as kind, x.* from ins x
      union all
      (select 'existing', x.* from task_steps x join holder h on x.task_id = h.id
        where ${sameName} and not exists (select 1 from ins)
        order by (x.scope = 'task') desc limit 1)
    )
    select exists (select 1 from holder) as held, f.kind, ${STEP_COLUMNS},
      (select steps from totals)::int as total_steps, (select bytes from totals)::float8 as total_bytes,
      ${taskStandingSql(s.taskId)}
    from (select 1) one left join found f on true`);
  const row = r!;
  if (!row.held) return { kind: 'refused', task: taskStandingOf(row) };
  if (!row.kind) return { kind: 'full', steps: row.total_steps, bytes: row.total_bytes };
  const { held: _h, kind, status: _s, fence_now: _f, lapsed: _l, total_steps: _n, total_bytes: _b, ...step } = row;
  return { kind, step: stepOf(step as RawStep) };
}

/** The latest step by that name of either scope (the task-scoped one first): what a reader is shown. */
export async function taskStepLatestGet(db: Db, taskId: string, name: string): Promise<TaskStepRow | undefined> {
  const [r] = await db.select().from(taskSteps)
    .where(and(eq(taskSteps.taskId, taskId), eq(taskSteps.name, name)))
    .orderBy(sql`${taskSteps.scope} = 'task' desc`, desc(taskSteps.fence)).limit(1);
  return r;
}

/** A task's steps without their results, in the order they were recorded. */
export function taskStepsList(db: Db, taskId: string): Promise<Array<Omit<TaskStepRow, 'result'>>> {
  return db.select({
    taskId: taskSteps.taskId, dagId: taskSteps.dagId, name: taskSteps.name, scope: taskSteps.scope, attempt: taskSteps.attempt,
    fence: taskSteps.fence, sizeBytes: taskSteps.sizeBytes, durationMs: taskSteps.durationMs, costUsd: taskSteps.costUsd,
    tokensIn: taskSteps.tokensIn, tokensOut: taskSteps.tokensOut, model: taskSteps.model, startedAt: taskSteps.startedAt,
    recordedAt: taskSteps.recordedAt,
  }).from(taskSteps).where(eq(taskSteps.taskId, taskId)).orderBy(asc(taskSteps.recordedAt), asc(taskSteps.fence), asc(taskSteps.name));
}

/**
 * The task-scoped step `name` for the holder `fence` to replay, in ONE statement under the record's guard (the fence,
 * a state that may heartbeat, a live lease): `refused` with the task as it stands to say why, or `held` with the step
 * (undefined when none was recorded). A step recorded by another claim is a replay: recorded in the same statement
 * with what the step had cost and its `task.step_replayed` event; keyed by (task, fence, name), so a lookup repeated
 * after a lost reply records nothing more.
 */
export async function taskStepReplay(db: Db, taskId: string, fence: number, name: string): Promise<
  | { kind: 'held'; step: TaskStepRow | undefined }
  | Extract<TaskStepRecordResult, { kind: 'refused' }>
> {
  const [r] = await rowsOf<RawStep & { held: boolean | null; status: string | null; fence_now: number | null; lapsed: boolean | null }>(db, sql`
    with task as (
      select t.id, t.dag_id, t.attempts, t.claimed_by, t.status, t.fence, t.lease_expires_at <= now() as lapsed,
        ${taskHeldSql('t', fence)} as held
      from tasks t where t.id = ${taskId}
    ), step as (
      select * from task_steps where task_id = ${taskId} and name = ${name} and scope = 'task'
    ), replay as (
      insert into task_step_replays (task_id, fence, name, attempt, recorded_fence, cost_usd)
      select t.id, ${fence}, s.name, t.attempts, s.fence, s.cost_usd from task t, step s where t.held and s.fence <> ${fence}
      on conflict do nothing
      returning *
    ), replayed_event as (
      insert into events (type, dag_id, task_id, agent_id, data)
      select 'task.step_replayed', t.dag_id, r.task_id, t.claimed_by, jsonb_build_object('step', r.name, 'attempt', r.attempt,
        'fence', r.fence, 'recordedFence', r.recorded_fence, 'costUsd', r.cost_usd)
      from replay r, task t
    )
    select t.status, t.fence as fence_now, t.lapsed, t.held, s.*
    from (select 1) one left join task t on true left join (select ${STEP_COLUMNS} from step) s on true`);
  const row = r!;
  if (row.held !== true) return { kind: 'refused', task: taskStandingOf(row) };
  if (row.taskId === null) return { kind: 'held', step: undefined };
  const { held: _h, status: _s, fence_now: _f, lapsed: _l, ...step } = row;
  return { kind: 'held', step: stepOf(step as RawStep) };
}

/** The steps a task's attempts replayed, in order: which claim replayed which step, when, and what it had cost. */
export function taskStepReplaysList(db: Db, taskId: string): Promise<Array<{ name: string; fence: number; attempt: number; recordedFence: number; costUsd: number; replayedAt: Date }>> {
  return db.select({
    name: taskStepReplays.name, fence: taskStepReplays.fence, attempt: taskStepReplays.attempt,
    recordedFence: taskStepReplays.recordedFence, costUsd: taskStepReplays.costUsd, replayedAt: taskStepReplays.replayedAt,
  }).from(taskStepReplays).where(eq(taskStepReplays.taskId, taskId))
    .orderBy(asc(taskStepReplays.replayedAt), asc(taskStepReplays.fence), asc(taskStepReplays.name));
}

/** Delete every durable step of these tasks (a re-run starts without them); how many were deleted. */
export async function taskStepsDrop(db: Db, taskIds: string[]): Promise<number> {
  if (taskIds.length === 0) return 0;
  const r = await rowsOf<{ n: number }>(db, sql`
    with gone as (delete from task_steps where task_id = any(${textArray(taskIds)}) returning 1) select count(*)::int as n from gone`);
  return r[0]!.n;
}

/**
 * Delete a task's steps from its task-scoped step `name` on: that step and every step recorded at or after it, of
 * either scope (a re-run replays those before it, as DBOS's fork does). Null when no task-scoped step has that name.
 */
export async function taskStepsDropFrom(db: Db, taskId: string, name: string): Promise<number | null> {
  const [r] = await rowsOf<{ found: boolean; n: number }>(db, sql`
    with mark as (select recorded_at from task_steps where task_id = ${taskId} and name = ${name} and scope = 'task'),
    gone as (delete from task_steps where task_id = ${taskId} and recorded_at >= (select recorded_at from mark) returning 1)
    select exists (select 1 from mark) as found, (select count(*)::int from gone) as n`);
  return r!.found ? r!.n : null;
}

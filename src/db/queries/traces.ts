import { sql } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { dateOf, rowsOf, textArray } from '../statement.js';

/** An ended attempt, with what its span says about it (src/observability/tracing.ts). */
export interface AttemptTraceRow {
  taskId: string; fence: number; dagId: string; key: string; type: string; attempt: number;
  agentId: string | null; outcome: string; errorClass: string | null; errorMessage: string | null;
  startedAt: Date; endedAt: Date; costUsd: number; tokensIn: number; tokensOut: number; model: string | null;
  /** The attempt a validation task's verdict judges, when this one is a validation task's. */
  validatesId: string | null; validatesFence: number | null;
  /** attempts.details.verdicts: the validation steps' verdicts on this attempt's output. */
  verdicts: Array<{ step: number; kind: string; pass: boolean; score?: number; duration_ms?: number; validation_task_id?: string }> | null;
  /** The durable steps this attempt ran and recorded, and those it replayed (task_steps, task_step_replays). */
  durableSteps: DurableStepTrace[];
}

/** A durable step as its span says: run and recorded by the attempt (from `startedAt` to `at`), or replayed at `at`. */
export interface DurableStepTrace {
  name: string; scope: string; replayed: boolean; startedAt: Date | null; at: Date; durationMs: number | null;
  costUsd: number; tokensIn: number; tokensOut: number; model: string | null;
}

/** The attempts rows of these (task, fence) pairs that exist now, with their tasks' key, type and validation link. */
export async function attemptsForTrace(db: Db, refs: ReadonlyArray<{ taskId: string; fence: number }>): Promise<AttemptTraceRow[]> {
  if (refs.length === 0) return [];
  const rows = await rowsOf<Record<string, unknown>>(db, sql`
    select a.task_id, a.fence, a.dag_id, t.key, t.type, a.attempt, a.agent_id, a.outcome, a.error_class, a.error_message,
      a.started_at, a.ended_at, a.cost_usd::float8 as cost_usd, a.tokens_in, a.tokens_out, a.model,
      t.validates_id, t.validates_fence, a.details->'verdicts' as verdicts,
      (select coalesce(jsonb_agg(d order by d.at), '[]') from (
        select s.name, s.scope, false as replayed, s.started_at, s.recorded_at as at, s.duration_ms, s.cost_usd::float8 as cost_usd,
          s.tokens_in, s.tokens_out, s.model
        from task_steps s where s.task_id = a.task_id and s.fence = a.fence
        union all
        select r.name, 'task', true, null, r.replayed_at, null, r.cost_usd::float8, 0, 0, null
        from task_step_replays r where r.task_id = a.task_id and r.fence = a.fence) d) as durable_steps
    from unnest(${textArray(refs.map((r) => r.taskId))}, ${sql`${sql.param(refs.map((r) => r.fence))}::int[]`}) as x(task_id, fence)
    join attempts a on a.task_id = x.task_id and a.fence = x.fence
    join tasks t on t.id = a.task_id`);
  return rows.map((r) => ({
    taskId: r.task_id as string, fence: Number(r.fence), dagId: r.dag_id as string, key: r.key as string, type: r.type as string,
    attempt: Number(r.attempt), agentId: r.agent_id as string | null, outcome: r.outcome as string,
    errorClass: r.error_class as string | null, errorMessage: r.error_message as string | null,
    startedAt: dateOf(r.started_at as string)!, endedAt: dateOf(r.ended_at as string)!, costUsd: Number(r.cost_usd),
    tokensIn: Number(r.tokens_in), tokensOut: Number(r.tokens_out), model: r.model as string | null,
    validatesId: r.validates_id as string | null, validatesFence: r.validates_fence === null ? null : Number(r.validates_fence),
    verdicts: Array.isArray(r.verdicts) ? r.verdicts as AttemptTraceRow['verdicts'] : null,
    durableSteps: (r.durable_steps as Array<Record<string, unknown>>).map((d) => ({
      name: d.name as string, scope: d.scope as string, replayed: d.replayed === true, startedAt: dateOf(d.started_at as string | null),
      at: dateOf(d.at as string)!, durationMs: d.duration_ms === null ? null : Number(d.duration_ms), costUsd: Number(d.cost_usd),
      tokensIn: Number(d.tokens_in), tokensOut: Number(d.tokens_out), model: d.model as string | null,
    })),
  }));
}

/** A finished DAG, with what its span says about it. */
export interface DagTraceRow {
  id: string; name: string; status: string; createdAt: Date; completedAt: Date; spentUsd: number; tasksTotal: number; createdBy: string;
}

/** Those of these DAGs that are completed or cancelled now. */
export async function dagsFinishedForTrace(db: Db, ids: readonly string[]): Promise<DagTraceRow[]> {
  if (ids.length === 0) return [];
  const rows = await rowsOf<Record<string, unknown>>(db, sql`
    select id, name, status, created_at, completed_at, spent_usd::float8 as spent_usd, tasks_total, created_by from dags
    where id = any(${textArray([...ids])}) and status in ('completed', 'cancelled') and completed_at is not null`);
  return rows.map((r) => ({
    id: r.id as string, name: r.name as string, status: r.status as string, createdAt: dateOf(r.created_at as string)!,
    completedAt: dateOf(r.completed_at as string)!, spentUsd: Number(r.spent_usd), tasksTotal: Number(r.tasks_total), createdBy: r.created_by as string,
  }));
}

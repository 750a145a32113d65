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
}

/** The attempts rows of these (task, fence) pairs that exist now, with their tasks' key, type and validation link. */
export async function attemptsForTrace(db: Db, refs: ReadonlyArray<{ taskId: string; fence: number }>): Promise<AttemptTraceRow[]> {
  if (refs.length === 0) return [];
  const rows = await rowsOf<Record<string, unknown>>(db, sql`
    select a.task_id, a.fence, a.dag_id, t.key, t.type, a.attempt, a.agent_id, a.outcome, a.error_class, a.error_message,
      a.started_at, a.ended_at, a.cost_usd::float8 as cost_usd, a.tokens_in, a.tokens_out, a.model,
      t.validates_id, t.validates_fence, a.details->'verdicts' as verdicts
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

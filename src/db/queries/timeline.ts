import { sql } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { dateOf, rowsOf } from '../statement.js';
import type { StepScope } from '../../model/step-scopes.js';

/** One attempt as the timeline draws it. */
export interface TimelineAttemptRow {
  attempt: number; fence: number; outcome: string; startedAt: Date; endedAt: Date;
  model: string | null; costUsd: number; agentId: string | null; errorClass: string | null;
}

/** One task of a DAG with what the timeline needs: its attempts, when its output went to validation, when it could start. */
export interface TimelineTaskRow {
  id: string; key: string; type: string; status: string; parentId: string | null;
  createdAt: Date; completedAt: Date | null; costUsd: number;
  /** The attempt in progress, if any: when it was claimed. */
  claimedAt: Date | null;
  /** When its last upstream task completed (null: it has none, or one is not completed). */
  upstreamDoneAt: Date | null;
  attempts: TimelineAttemptRow[];
  /** When each output of this task went to a validation task (events task.validating), oldest first. */
  validatingAt: Date[];
}

/**
 * A DAG's tasks (not its validation tasks) with their attempts and validation hand-offs, in one statement: each
 * correlated read goes through an index (attempts_pkey, events_task_idx, edges by downstream).
 */
export async function timelineTasks(db: Db, dagId: string): Promise<TimelineTaskRow[]> {
  const rows = await rowsOf<Record<string, unknown>>(db, sql`
    select t.id, t.key, t.type, t.status, t.parent_id, t.created_at, t.completed_at, t.cost_usd::float8 as cost_usd,
      case when t.status in ('claimed', 'running') then t.claimed_at end as claimed_at,
      (select case when bool_and(u.status = 'completed') then max(u.completed_at) end
         from edges e join tasks u on u.id = e.upstream_id where e.downstream_id = t.id) as upstream_done_at,
      coalesce((select json_agg(json_build_object(
          'attempt', a.attempt, 'fence', a.fence, 'outcome', a.outcome, 'startedAt', a.started_at, 'endedAt', a.ended_at,
          'model', a.model, 'costUsd', a.cost_usd, 'agentId', a.agent_id, 'errorClass', a.error_class) order by a.fence)
        from attempts a where a.task_id = t.id), '[]'::json) as attempts,
      coalesce((select json_agg(e.at order by e.id) from events e where e.task_id = t.id and e.type = 'task.validating'), '[]'::json) as validating_at
    from tasks t
    where t.dag_id = ${dagId} and t.validates_id is null`);
  return rows.map((r) => ({
    id: r.id as string, key: r.key as string, type: r.type as string, status: r.status as string, parentId: r.parent_id as string | null,
    createdAt: dateOf(r.created_at as string)!, completedAt: dateOf(r.completed_at as string | null), costUsd: Number(r.cost_usd),
    claimedAt: dateOf(r.claimed_at as string | null), upstreamDoneAt: dateOf(r.upstream_done_at as string | null),
    attempts: (r.attempts as Array<Record<string, unknown>>).map((a) => ({
      attempt: Number(a.attempt), fence: Number(a.fence), outcome: a.outcome as string, startedAt: dateOf(a.startedAt as string)!,
      endedAt: dateOf(a.endedAt as string)!, model: a.model as string | null, costUsd: Number(a.costUsd), agentId: a.agentId as string | null,
      errorClass: a.errorClass as string | null,
    })),
    validatingAt: (r.validating_at as string[]).map((v) => dateOf(v)!),
  }));
}

/** Dependency edges of a DAG, as task ids. */
export async function timelineEdges(db: Db, dagId: string): Promise<Array<{ upstreamId: string; downstreamId: string }>> {
  return rowsOf(db, sql`select upstream_id as "upstreamId", downstream_id as "downstreamId" from edges where dag_id = ${dagId}`);
}

/** What the DAG has cost so far per model, validation tasks included (a judge's calls cost too). */
export async function timelineCostByModel(db: Db, dagId: string): Promise<Array<{ model: string | null; costUsd: number; tokensIn: number; tokensOut: number; attempts: number }>> {
  const rows = await rowsOf<Record<string, unknown>>(db, sql`
    select model, sum(cost_usd)::float8 as cost_usd, sum(tokens_in)::bigint as tokens_in, sum(tokens_out)::bigint as tokens_out, count(*)::int as attempts
    from attempts where task_id in (select id from tasks where dag_id = ${dagId}) group by model order by sum(cost_usd) desc, model nulls last`);
  return rows.map((r) => ({
    model: r.model as string | null, costUsd: Number(r.cost_usd), tokensIn: Number(r.tokens_in), tokensOut: Number(r.tokens_out), attempts: Number(r.attempts),
  }));
}

/** A durable step as the timeline draws it: under the attempt (fence) that recorded it. */
export interface TimelineStepRow {
  taskId: string; name: string; scope: StepScope; attempt: number; fence: number; costUsd: number;
  durationMs: number | null; startedAt: Date | null; recordedAt: Date;
}

/** A durable step an attempt replayed instead of running: a mark at the moment it did. */
export interface TimelineReplayRow {
  taskId: string; name: string; attempt: number; fence: number; recordedFence: number; costUsd: number; replayedAt: Date;
}

/**
 * The durable steps a DAG's tasks (not its validation tasks) recorded and replayed, in one statement for the whole
 * DAG, not one per task: its tasks through (dag_id, key), then each task's steps and replays through their primary
 * keys, which begin with task_id (task_steps.dag_id has no index of its own).
 */
export async function timelineSteps(db: Db, dagId: string): Promise<{ steps: TimelineStepRow[]; replays: TimelineReplayRow[] }> {
  const [r] = await rowsOf<{ steps: Array<Record<string, unknown>>; replays: Array<Record<string, unknown>> }>(db, sql`
    with dag_tasks as (select id from tasks where dag_id = ${dagId} and validates_id is null)
    select
      coalesce((select json_agg(json_build_object('taskId', s.task_id, 'name', s.name, 'scope', s.scope, 'attempt', s.attempt,
          'fence', s.fence, 'costUsd', s.cost_usd, 'durationMs', s.duration_ms, 'startedAt', s.started_at, 'recordedAt', s.recorded_at)
          order by s.recorded_at, s.fence, s.name)
        from dag_tasks t join task_steps s on s.task_id = t.id), '[]'::json) as steps,
      coalesce((select json_agg(json_build_object('taskId', x.task_id, 'name', x.name, 'attempt', x.attempt, 'fence', x.fence,
          'recordedFence', x.recorded_fence, 'costUsd', x.cost_usd, 'replayedAt', x.replayed_at)
          order by x.replayed_at, x.fence, x.name)
        from dag_tasks t join task_step_replays x on x.task_id = t.id), '[]'::json) as replays`);
  return {
    steps: r!.steps.map((s) => ({
      taskId: s.taskId as string, name: s.name as string, scope: s.scope as StepScope, attempt: Number(s.attempt), fence: Number(s.fence),
      costUsd: Number(s.costUsd), durationMs: s.durationMs === null ? null : Number(s.durationMs),
      startedAt: dateOf(s.startedAt as string | null), recordedAt: dateOf(s.recordedAt as string)!,
    })),
    replays: r!.replays.map((x) => ({
      taskId: x.taskId as string, name: x.name as string, attempt: Number(x.attempt), fence: Number(x.fence),
      recordedFence: Number(x.recordedFence), costUsd: Number(x.costUsd), replayedAt: dateOf(x.replayedAt as string)!,
    })),
  };
}

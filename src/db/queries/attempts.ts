import { and, asc, eq, getTableColumns, gt, sql } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { attempts } from '../schema/index.js';
import { dateOf, rowsOf, textArray } from '../statement.js';
import type { PreviousAttempt } from '../rows.js';

export type { PreviousAttempt } from '../rows.js';

export type { AttemptRow } from '../rows.js';

/**
 * A task's finished attempts in order, each with what the durable steps it replayed had cost when recorded
 * (task_step_replays): spend it did not pay again.
 */
export function attemptListForTask(db: Db, taskId: string) {
  const { replayedCostUsdUnused: _unused, ...columns } = getTableColumns(attempts);
  return db.select({
    ...columns,
    replayedCostUsd: sql<number>`(select coalesce(sum(r.cost_usd), 0)::float8 from task_step_replays r
      where r.task_id = attempts.task_id and r.fence = attempts.fence)`.mapWith(Number),
  }).from(attempts).where(eq(attempts.taskId, taskId)).orderBy(asc(attempts.fence));
}

/** Failed attempts since the last attempt reset, and on how many distinct agents: the poison-pill inputs. */
export async function attemptFailureStats(db: Db, taskId: string, sinceFence: number): Promise<{ failures: number; agents: number }> {
  const [r] = await db
    .select({ failures: sql<number>`count(*)::int`, agents: sql<number>`count(distinct ${attempts.agentId})::int` })
    .from(attempts)
    .where(and(eq(attempts.taskId, taskId), eq(attempts.outcome, 'failed'), gt(attempts.fence, sinceFence)));
  return { failures: r?.failures ?? 0, agents: r?.agents ?? 0 };
}

/** The crashes a task was part of since its last attempt reset: charged ones (`failed`, class crash) and shared ones, with the tasks it died with. */
export function attemptCrashHistory(db: Db, taskId: string): Promise<Array<{ charged: boolean; with: string[] | null }>> {
  return rowsOf(db, sql`
    select a.outcome = 'failed' as charged,
      case when jsonb_typeof(a.details->'crashWith') = 'array' then array(select jsonb_array_elements_text(a.details->'crashWith')) end as with
    from attempts a join tasks t on t.id = a.task_id
    where a.task_id = ${taskId} and a.fence > t.attempts_reset_fence
      and (a.outcome = 'crash_shared' or (a.outcome = 'failed' and a.error_class = 'crash'))
    order by a.fence`);
}

/** Attempts of a DAG by outcome, and how many failed attempts were followed by another try (retries). */
export async function attemptCountsForDag(db: Db, dagId: string): Promise<{ completed: number; failed: number; retried: number }> {
  const [r] = await rowsOf<{ completed: number; failed: number; retried: number }>(db, sql`
    select count(*) filter (where outcome = 'completed')::int as completed,
           count(*) filter (where outcome = 'failed')::int as failed,
           count(*) filter (where outcome = 'failed' and exists (
             select 1 from attempts later where later.task_id = a.task_id and later.fence > a.fence))::int as retried
    from attempts a where a.task_id in (select id from tasks where dag_id = ${dagId})`);
  return r ?? { completed: 0, failed: 0, retried: 0 };
}


/** How many failed attempts a claim hands back (the latest), so a retry's context stays bounded. */
export const PREVIOUS_ATTEMPTS_MAX = 3;

/**
 * What each just-claimed task's agent sees of its earlier failures: for a retry (attempt > 1), its latest failed
 * attempts (attemptsFailedLatest); none for a first attempt, and no statement when no task is a retry.
 */
export async function attemptsPreviousFor(db: Db, claimed: ReadonlyArray<{ id: string; attempt: number }>): Promise<Map<string, PreviousAttempt[]>> {
  const retries = claimed.filter((r) => r.attempt > 1).map((r) => r.id);
  return retries.length ? attemptsFailedLatest(db, retries, PREVIOUS_ATTEMPTS_MAX) : new Map();
}

/** The latest `max` failed attempts of each task, oldest first: what a retry's agent sees of them. */
export async function attemptsFailedLatest(db: Db, taskIds: string[], max: number): Promise<Map<string, PreviousAttempt[]>> {
  const rows = await rowsOf<Omit<PreviousAttempt, 'endedAt'> & { taskId: string; endedAt: string }>(db, sql`
    select p.task_id as "taskId", p.attempt, p.agent_id as "agentId", p.model, p.error_class as "errorClass", p.error_message as "errorMessage",
      p.details->'rejected_output' as "rejectedOutput", p.details->'verdicts' as verdicts, p.ended_at as "endedAt"
    from unnest(${textArray(taskIds)}) as t(id) cross join lateral (
      select * from attempts a where a.task_id = t.id and a.outcome = 'failed' order by a.fence desc limit ${max}
    ) p
    order by p.task_id, p.fence`);
  const out = new Map<string, PreviousAttempt[]>();
  for (const { taskId, ...a } of rows) {
    const attempt: PreviousAttempt = { attempt: a.attempt, agentId: a.agentId, model: a.model, errorClass: a.errorClass, errorMessage: a.errorMessage, endedAt: dateOf(a.endedAt)! };
    if (a.rejectedOutput !== null && a.rejectedOutput !== undefined) attempt.rejectedOutput = a.rejectedOutput;
    if (Array.isArray(a.verdicts)) attempt.verdicts = a.verdicts;
    out.set(taskId, [...(out.get(taskId) ?? []), attempt]);
  }
  return out;
}

/** The spend limit that stopped the attempt of (task, fence), as its row recorded it; undefined when none did. */
export async function attemptBudgetStop(db: Db, taskId: string, fence: number): Promise<Record<string, unknown> | undefined> {
  const [r] = await rowsOf<{ budget: Record<string, unknown> | null }>(db, sql`
    select details->'budget' as budget from attempts where task_id = ${taskId} and fence = ${fence} and error_class = 'budget_exceeded'`);
  return r?.budget ?? undefined;
}

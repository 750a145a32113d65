import { and, asc, eq, gt, sql } from 'drizzle-orm';
import type { Db } from '../connection.js';
import { attempts } from '../schema/index.js';
import { rowsOf } from './run.js';
import type { AttemptRow } from '../rows.js';

export type { AttemptRow } from '../rows.js';

export function attemptListForTask(db: Db, taskId: string) {
  return db.select().from(attempts).where(eq(attempts.taskId, taskId)).orderBy(asc(attempts.fence));
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
    from attempts a where dag_id = ${dagId}`);
  return r ?? { completed: 0, failed: 0, retried: 0 };
}

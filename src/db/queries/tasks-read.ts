import { and, asc, eq, inArray, sql } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { tasks } from '../schema/index.js';
import { rowsOf } from '../statement.js';
import type { StatusCount, TaskRow } from '../rows.js';
import { taskKeyCompare, taskKeyOrderSql } from '../../model/task-key-order.js';

export type { StatusCount, TaskRow } from '../rows.js';

/** Reads of tasks: one task, a DAG's tasks, filtered lists, queue counts for metrics, the holder check, the live stream's states. */

export async function taskGet(db: Db, id: string): Promise<TaskRow | undefined> {
  const [row] = await db.select().from(tasks).where(eq(tasks.id, id));
  return row;
}

/** What changing a DAG's graph needs of each of its tasks: keys, ids, parents and states, never specs or outputs. */
export interface TaskGraphRow { id: string; key: string; parentId: string | null; status: string; waitKey: string | null }

export function taskGraphRows(db: Db, dagId: string): Promise<TaskGraphRow[]> {
  return db.select({ id: tasks.id, key: tasks.key, parentId: tasks.parentId, status: tasks.status, waitKey: tasks.waitKey }).from(tasks).where(eq(tasks.dagId, dagId));
}

/**
 * A DAG's tasks in creation order, those created at once (a submit's, a spawn's) by key (taskKeyCompare). Sorted here:
 * the whole DAG is read anyway, and the statement's form of the order costs ~7 µs a row (model/task-key-order.ts).
 * Creation times compare to the millisecond, so tasks created apart within one millisecond go by key too.
 */
export async function taskListForDag(db: Db, dagId: string): Promise<TaskRow[]> {
  const rows = await db.select().from(tasks).where(eq(tasks.dagId, dagId));
  return rows.sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || taskKeyCompare(a.key, b.key));
}

/**
 * Tasks by effective priority, then creation, then key (taskKeyOrderSql), at most `limit`. The statement orders by key
 * only the rows up to the last one the limit keeps and those tied with it (a DAG submitted at once is one tie): the
 * key's order costs ~7 µs a row, and a limit that cut the ties in another order would list w10 and leave out w2.
 * Measured on 200,000 tasks, 1,000 to a tie, limit 200: 170–360 ms, against 130–180 ms without the key and
 * 460–590 ms ordering every row by it (embedded PostgreSQL 17, 2 cores).
 */
export async function taskList(db: Db, filter: { dagId?: string; status?: string; limit?: number; tenants?: readonly string[] | null }): Promise<TaskRow[]> {
  const limit = filter.limit ?? 1000;
  if (limit < 1) return [];
  const where = and(
    filter.dagId ? eq(tasks.dagId, filter.dagId) : undefined, filter.status ? eq(tasks.status, filter.status) : undefined,
    filter.tenants ? inArray(tasks.tenantId, [...filter.tenants]) : undefined,
  );
  const last = db.select({ p: tasks.effectivePriority, c: tasks.createdAt }).from(tasks).where(where)
    .orderBy(asc(tasks.effectivePriority), asc(tasks.createdAt)).offset(limit - 1).limit(1);
  // ALL: true when the subquery has no row (fewer tasks than the limit), which PostgreSQL computes once.
  return db.select().from(tasks).where(and(where, sql`(${tasks.effectivePriority}, ${tasks.createdAt}) <= all (${last})`))
    .orderBy(asc(tasks.effectivePriority), asc(tasks.createdAt), taskKeyOrderSql(tasks.key)).limit(limit);
}

/** Outputs of the named tasks of a DAG (what a task's context refs point at). */
export function taskOutputsByKeys(db: Db, dagId: string, keys: string[]) {
  return db.select({ key: tasks.key, output: tasks.output }).from(tasks).where(and(eq(tasks.dagId, dagId), inArray(tasks.key, keys)));
}

/** Counts by status and priority tier (urgent < 25 ≤ high < 50 ≤ normal < 75 ≤ background). */
export function taskCountsByStatusTier(db: Db, tenant?: string): Promise<StatusCount[]> {
  return rowsOf<StatusCount>(db, sql`
    select status,
      case when priority < 25 then 'urgent' when priority < 50 then 'high' when priority < 75 then 'normal' else 'background' end as tier,
      count(*)::int as n
    from tasks ${tenant === undefined ? sql`` : sql`where tenant_id = ${tenant}`} group by 1, 2 order by 1, 2`);
}

export async function taskOldestReadyAgeSec(db: Db, tenant?: string): Promise<number | null> {
  const [r] = await rowsOf<{ age: number | null }>(db, sql`
    select extract(epoch from now() - min(ready_at))::float8 as age from tasks where status = 'ready'
      ${tenant === undefined ? sql`` : sql`and tenant_id = ${tenant}`}`);
  return r?.age ?? null;
}

/** Who holds a task and with which fence: the HTTP API checks an agent token against it. */
export async function taskHolderGet(db: Db, id: string): Promise<{ claimedBy: string | null; fence: number; status: string } | undefined> {
  const [r] = await db.select({ claimedBy: tasks.claimedBy, fence: tasks.fence, status: tasks.status }).from(tasks).where(eq(tasks.id, id));
  return r;
}

/** The models a task accepts and those of the agent that holds it: what decides which models its attempt could use. */
export async function taskHolderModels(db: Db, id: string): Promise<{ taskModels: string[]; agentModels: string[] } | undefined> {
  const [r] = await rowsOf<{ taskModels: string[]; agentModels: string[] | null }>(db, sql`
    select t.models as "taskModels", (select a.models from agents a where a.id = t.claimed_by) as "agentModels" from tasks t where t.id = ${id}`);
  return r && { taskModels: r.taskModels, agentModels: r.agentModels ?? [] };
}

/** Every task's state in one DAG, small columns only: what the live stream diffs. */
export function taskStatesForDag(db: Db, dagId: string) {
  return db.select({
    id: tasks.id, key: tasks.key, status: tasks.status, attempts: tasks.attempts, claimedBy: tasks.claimedBy,
    progress: tasks.progress, parentId: tasks.parentId,
  }).from(tasks).where(eq(tasks.dagId, dagId));
}

/** Tasks an agent holds (claimed or running) that it claimed within the last `withinSec` seconds, by the database clock. */
export function taskHeldByAgent(db: Db, agentId: string, withinSec: number): Promise<Array<{ id: string; fence: number; key: string }>> {
  return rowsOf(db, sql`
    select id, fence, key from tasks
    where claimed_by = ${agentId} and status in ('claimed', 'running') and claimed_at > now() - make_interval(secs => ${withinSec})`);
}

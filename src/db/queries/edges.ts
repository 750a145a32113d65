import { eq, sql, type SQL } from 'drizzle-orm';
import type { Db } from '../connection.js';
import { edges } from '../schema/index.js';
import { effectivePriorityOnReadySql } from '../../model/priority.js';
import { fromStates } from '../../model/state-machine.js';
import { textArray } from '../statement.js';

export interface EdgeRow { dagId: string; upstreamId: string; downstreamId: string }

/**
 * Insert edges (an edge that exists already is left alone), as three arrays in one statement: one parameter per
 * column, however many edges. Each edge a parameter of its own cost ~0.1 s more to build at 10,000 edges.
 */
export async function edgeInsertMany(db: Db, rows: EdgeRow[]): Promise<void> {
  if (rows.length === 0) return;
  await db.execute(sql`
    insert into edges (dag_id, upstream_id, downstream_id)
    select * from unnest(${textArray(rows.map((r) => r.dagId))}, ${textArray(rows.map((r) => r.upstreamId))}, ${textArray(rows.map((r) => r.downstreamId))})
    on conflict do nothing`);
}

/** Every edge of a DAG, as task keys: what the cycle check loads under the DAG's lock. */
export function edgeListForDag(db: Db, dagId: string) {
  const up = sql`(select key from tasks where id = ${edges.upstreamId})`;
  const down = sql`(select key from tasks where id = ${edges.downstreamId})`;
  return db
    .select({ upstreamId: edges.upstreamId, downstreamId: edges.downstreamId, upstreamKey: sql<string>`${up}`, downstreamKey: sql<string>`${down}` })
    .from(edges)
    .where(eq(edges.dagId, dagId));
}

/**
 * How a completion hands dependents it unblocks to the completing agent (tasks-hand-off.ts): which tasks, in
 * which state, the claim's other columns, and what more to return for them.
 */
export interface UnblockHandOff {
  /** CTEs to place between `dep_counts` and `unblocked` (they decide which dependents are handed). */
  ctes: SQL;
  /** True for a task that becomes READY here and is handed instead (over `t`, the task, and `c`, its count). */
  handed: SQL;
  /** Its state: claimed, or running for a claimer that starts what it claims. */
  status: SQL;
  /** The claim's other columns, as `column = expression` assignments for a handed task (given the predicate). */
  assignments: (handed: SQL) => SQL;
  /** More RETURNING columns: the task as its agent receives it. */
  returning: SQL;
  /**
   * A condition run once before the UPDATE locks its first row (an uncorrelated subquery: an InitPlan): the
   * hand-off takes the agent's lock there, so no statement holds a dependent while it waits for an agent.
   */
  before: SQL;
}

/**
 * The unblock step, as CTEs to splice into a statement that completed tasks:
 * given a CTE `done(id)`, decrement each dependent's counter once per completed
 * upstream (grouped, so one batch completing two parents counts two) and move it
 * to READY when the counter reaches zero and its run_at has passed. Concurrent
 * completions of two parents are safe: the UPDATE re-reads the latest row version.
 * With `handOff`, the dependents it names are claimed for the completing agent in
 * the same UPDATE instead (a row is updated once per statement).
 * Defines `unblocked(id, status, cap_key, …)`.
 */
export function edgeUnblockDependentsCtes(doneCte: SQL, handOff?: UnblockHandOff): SQL {
  const becomesReady = sql`(t.deps_remaining - c.n = 0 and (t.run_at is null or t.run_at <= now()))`;
  const handed = handOff ? sql`(${becomesReady} and ${handOff.handed})` : undefined;
  return sql`
  dep_counts as (
    select e.downstream_id as id, count(*)::int as n
    from edges e join ${doneCte} d on d.id = e.upstream_id
    group by e.downstream_id
  ),
  ${handOff ? sql`${handOff.ctes},` : sql``}
  unblocked as (
    update tasks t set
      deps_remaining = t.deps_remaining - c.n,
      status = case when ${handed ? sql`${handed} then ${handOff!.status} when ` : sql``}${becomesReady} then 'ready' else t.status end,
      ready_at = case when ${becomesReady} then now() else t.ready_at end,
      ${effectivePriorityOnReadySql()},
      ${handed ? sql`${handOff!.assignments(handed)},` : sql``}
      updated_at = now()
    from dep_counts c
    where t.id = c.id and t.status = any(${textArray(fromStates('unblock'))})${handOff ? sql` and ${handOff.before}` : sql``}
    returning t.id, t.status, t.cap_key${handOff ? sql`, ${handOff.returning}` : sql``}
  )`;
}

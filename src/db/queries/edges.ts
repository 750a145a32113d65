import { eq, sql, type SQL } from 'drizzle-orm';
import type { Db } from '../connection.js';
import { edges } from '../schema/index.js';
import { effectivePriorityOnReadySql } from '../../model/priority.js';
import { fromStates } from '../../model/state-machine.js';
import { textArray } from './run.js';

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
 * The unblock step, as CTEs to splice into a statement that completed tasks:
 * given a CTE `done(id)`, decrement each dependent's counter once per completed
 * upstream (grouped, so one batch completing two parents counts two) and move it
 * to READY when the counter reaches zero and its run_at has passed. Concurrent
 * completions of two parents are safe: the UPDATE re-reads the latest row version.
 * Defines `unblocked(id, status)`.
 */
export function edgeUnblockDependentsCtes(doneCte: SQL): SQL {
  return sql`
  dep_counts as (
    select e.downstream_id as id, count(*)::int as n
    from edges e join ${doneCte} d on d.id = e.upstream_id
    group by e.downstream_id
  ),
  unblocked as (
    update tasks t set
      deps_remaining = t.deps_remaining - c.n,
      status = case when t.deps_remaining - c.n = 0 and (t.run_at is null or t.run_at <= now()) then 'ready' else t.status end,
      ready_at = case when t.deps_remaining - c.n = 0 and (t.run_at is null or t.run_at <= now()) then now() else t.ready_at end,
      ${effectivePriorityOnReadySql()},
      updated_at = now()
    from dep_counts c
    where t.id = c.id and t.status = any(${textArray(fromStates('unblock'))})
    returning t.id, t.status, t.cap_key
  )`;
}

import { sql, type SQL } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { effectivePriorityOnReadySql } from '../../model/priority.js';
import { fromStates } from '../../model/state-machine.js';
import { rowsOf, textArray } from '../statement.js';
import { readyNotifySql } from './ready-hint.js';

/**
 * The dependency counter, in one place: `tasks.deps_remaining` is how many of a task's upstream tasks have not
 * completed. It is set at insert (a new task's dependencies), counted down by completions (taskDepsUnblockCtes),
 * raised when a task gains upstream tasks (taskDepsAddSet: an edge added to a live DAG, a spawn or a for_each
 * that waits for its children) and recounted from the edges where a statement's snapshot may have missed one
 * (taskDepsRecount, taskDepsRecountReopened). A task with nothing left to wait for, whose run_at has passed, is
 * READY (taskDepsRunnableSql).
 */

/** True for task `t` (alias) with `deps` (default its counter) upstream tasks left: it may run now. */
export function taskDepsRunnableSql(t: string, deps?: SQL): SQL {
  const T = sql.raw(t);
  return sql`(${deps ?? sql`${T}.deps_remaining`} = 0 and (${T}.run_at is null or ${T}.run_at <= now()))`;
}

/** The counter of task `t` once the completions counted in `c.n` (taskDepsUnblockCtes' dep_counts, alias `c`) are taken off. */
export function taskDepsLeftSql(t: string): SQL {
  return sql`${sql.raw(t)}.deps_remaining - c.n`;
}

/** How many upstream tasks of task `t` (alias) have not completed, counted from the edges. */
export function taskDepsOpenSql(t: string): SQL {
  return sql`(select count(*) from edges e join tasks u on u.id = e.upstream_id
    where e.downstream_id = ${sql.raw(t)}.id and u.status <> 'completed')::int`;
}

/** The SET of a task that gained `n` upstream tasks it must wait for. */
export function taskDepsAddSet(n: SQL): SQL {
  return sql`deps_remaining = deps_remaining + ${n}`;
}

/**
 * Wait out completions of the upstream tasks of `ids` already in flight (they hold the upstream row), upstream
 * rows first and then the dependents, the order a completion takes them in, so the two cannot deadlock; a count
 * in a new snapshot after this sees every completion that held them.
 */
async function taskDepsUpstreamsWait(db: Db, ids: string[]): Promise<void> {
  await db.execute(sql`
    select u.id from edges e join tasks u on u.id = e.upstream_id
    where e.downstream_id = any(${textArray(ids)}) and u.status <> 'completed'
    order by u.id for share of u`);
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
 * Defines `unblocked(id, status, cap_key, tenant_id, …)`.
 */
export function taskDepsUnblockCtes(doneCte: SQL, handOff?: UnblockHandOff): SQL {
  const becomesReady = taskDepsRunnableSql('t', taskDepsLeftSql('t'));
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
      deps_remaining = ${taskDepsLeftSql('t')},
      status = case when ${handed ? sql`${handed} then ${handOff!.status} when ` : sql``}${becomesReady} then 'ready' else t.status end,
      ready_at = case when ${becomesReady} then now() else t.ready_at end,
      ${effectivePriorityOnReadySql()},
      ${handed ? sql`${handOff!.assignments(handed)},` : sql``}
      updated_at = now()
    from dep_counts c
    where t.id = c.id and t.status = any(${textArray(fromStates('unblock'))})${handOff ? sql` and ${handOff.before}` : sql``}
    returning t.id, t.status, t.cap_key, t.tenant_id${handOff ? sql`, ${handOff.returning}` : sql``}
  )`;
}

/** An unclaimed task gained `n` unfinished upstream tasks: it waits (READY goes back to PENDING). False if it was already claimed. */
export async function taskDepsAdd(db: Db, id: string, n: number): Promise<boolean> {
  const r = await rowsOf(db, sql`
    update tasks set ${taskDepsAddSet(sql`${n}`)},
      status = case when status = 'created' then 'created' else 'pending' end, ready_at = null, updated_at = now()
    where id = ${id} and status = any(${textArray(fromStates('block'))})
    returning id`);
  return r.length > 0;
}

/**
 * After the completion of tasks marked `late_dependents` has committed, recount their PENDING
 * dependents in a fresh snapshot: the completion statement counted dependents down from edges in
 * its own snapshot, which may predate an edge added while it ran. Its own transaction, like any
 * recount, so it holds no row of the completion while it waits for other upstreams.
 */
export async function taskLateDependentsRecount(db: Db, upstreamIds: string[]): Promise<number> {
  if (upstreamIds.length === 0) return 0;
  const dependents = await rowsOf<{ id: string }>(db, sql`
    select distinct downstream_id as id from edges where upstream_id = any(${textArray(upstreamIds)})`);
  return taskDepsRecount(db, dependents.map((d) => d.id));
}

/**
 * Recount the unfinished upstream tasks of PENDING tasks and unblock those left
 * with none: the repair the deps-reconciler and taskLateDependentsRecount run.
 * The row locks come first, in their own statements, so the count (a new
 * snapshot) sees every completion that held them.
 * Call it inside a transaction, so the lock lasts until the count is written.
 */
export async function taskDepsRecount(db: Db, ids: string[]): Promise<number> {
  if (ids.length === 0) return 0;
  // Wait out completions of their upstreams already in flight (they hold the upstream row), upstream rows
  // first and then the dependents, the order a completion takes them in, so the two cannot deadlock.
  await taskDepsUpstreamsWait(db, ids);
  await db.execute(sql`select id from tasks where id = any(${textArray(ids)}) and status = 'pending' order by id for update`);
  const [r] = await rowsOf<{ n: number }>(db, sql`
    with counted as (
      select t.id, ${taskDepsOpenSql('t')} as open
      from tasks t where t.id = any(${textArray(ids)}) and t.status = any(${textArray(fromStates('unblock'))})
    ),
    fixed as (
      update tasks t set deps_remaining = c.open,
        status = case when ${taskDepsRunnableSql('t', sql`c.open`)} then 'ready' else t.status end,
        ready_at = case when ${taskDepsRunnableSql('t', sql`c.open`)} then now() else t.ready_at end,
        ${effectivePriorityOnReadySql()},
        updated_at = now()
      from counted c where t.id = c.id and t.deps_remaining <> c.open
      returning t.status, t.cap_key, t.tenant_id
    )
    select count(*)::int as n, ${readyNotifySql(sql`fixed`)} as notified from fixed`);
  return r?.n ?? 0;
}

/**
 * PENDING tasks whose counter disagrees with their unfinished upstream tasks
 * and that nothing touched for `quietSec`: what taskDepsRecount could not
 * repair (a process that died between an edge insert and its recount). One
 * pass over the PENDING tasks, each checked through its incoming edges; run
 * it on a slow cadence.
 */
export async function taskDepsDriftList(db: Db, quietSec: number, limit: number): Promise<string[]> {
  const rows = await rowsOf<{ id: string }>(db, sql`
    select t.id from tasks t
    where t.status = 'pending' and t.updated_at < now() - make_interval(secs => ${quietSec})
      and t.deps_remaining <> ${taskDepsOpenSql('t')}
    limit ${limit}`);
  return rows.map((r) => r.id);
}

/**
 * Recount what `ids` wait for after a re-run (the reopened tasks, and their direct dependents that had not
 * started): READY with nothing left to wait for, else PENDING (a READY dependent of a reopened task waits again).
 */
export async function taskDepsRecountReopened(db: Db, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  // As taskDepsRecount: wait out completions of their upstream tasks in flight first, then count in a new snapshot.
  await taskDepsUpstreamsWait(db, ids);
  await db.execute(sql`select id from tasks where id = any(${textArray(ids)}) and status in ('pending', 'ready') order by id for update`);
  await rowsOf(db, sql`
    with counted as (
      select t.id, ${taskDepsOpenSql('t')} as open
      from tasks t where t.id = any(${textArray(ids)}) and t.status in ('pending', 'ready')
    ),
    fixed as (
      update tasks t set deps_remaining = c.open,
        status = case when ${taskDepsRunnableSql('t', sql`c.open`)} then 'ready' else 'pending' end,
        ready_at = case when ${taskDepsRunnableSql('t', sql`c.open`)} then coalesce(t.ready_at, now()) end,
        ${effectivePriorityOnReadySql()},
        updated_at = now()
      from counted c where t.id = c.id
      returning t.status, t.cap_key, t.tenant_id
    )
    select ${readyNotifySql(sql`fixed`)} as notified`);
}

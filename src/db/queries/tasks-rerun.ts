import { sql } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { fromStates, type TaskState } from '../../model/state-machine.js';
import { rowsOf, textArray } from '../statement.js';
import { MAP_WAIT_PREFIX } from './signals.js';

/** Re-running finished work: which tasks, reopening them, and their dependents waiting again. */

/** `ids` and every task downstream of them, with their states (the DAG's graph lock held). */
export function taskDownstreamStates(db: Db, ids: string[]): Promise<Array<{ id: string; key: string; status: TaskState; mapping: boolean }>> {
  return rowsOf(db, sql`
    with recursive downstream(id) as (
      select unnest(${textArray(ids)})
      union
      select e.downstream_id from edges e join downstream d on e.upstream_id = d.id
    )
    select t.id, t.key, t.status, (starts_with(t.wait_key, ${MAP_WAIT_PREFIX}) and t.has_children and t.status = 'pending') as mapping
    from tasks t join downstream d on d.id = t.id`);
}

/** Tasks of a DAG that failed for good: dead-lettered or cancelled. */
export function taskFailedIds(db: Db, dagId: string): Promise<Array<{ id: string }>> {
  return rowsOf(db, sql`select id from tasks where dag_id = ${dagId} and status in ('dead_lettered', 'cancelled') and validates_id is null`);
}

export interface ReopenedRow { id: string; dagId: string; key: string; previous: TaskState }

/**
 * completed | dead_lettered | cancelled → pending, as new work: a fresh attempt budget (attempts_reset_fence;
 * the attempts so far stay in `attempts`), no output, lease or error. A completed task's output moves onto
 * its last attempt (`details.output`), so the history keeps what each run produced.
 */
export function taskReopen(db: Db, ids: string[]): Promise<ReopenedRow[]> {
  return rowsOf<ReopenedRow>(db, sql`
    with targets as materialized (
      select t.id, t.status as previous, t.fence, t.output from tasks t
      where t.id = any(${textArray(ids)}) and t.status = any(${textArray(fromStates('rerun'))})
      order by t.id for update
    ),
    kept as (
      update attempts a set details = coalesce(a.details, '{}'::jsonb) || jsonb_build_object('output', x.output)
      from targets x where x.previous = 'completed' and a.task_id = x.id and a.fence = x.fence
    )
    update tasks t set status = 'pending', output = null, completed_at = null, ready_at = null,
      claimed_by = null, claimed_at = null, started_at = null, heartbeat_at = null, lease_expires_at = null,
      progress = null, progress_message = null, last_error = null, reserved_usd = 0,
      attempts = 0, attempts_reset_fence = t.fence, claim_lapses = 0, deadline_missed = false, updated_at = now()
    from targets x where t.id = x.id
    returning t.id, t.dag_id as "dagId", t.key, x.previous`);
}

/** Direct dependents of `ids` that have not started (pending or ready): they wait for the reopened tasks again. */
export async function taskWaitingDependents(db: Db, ids: string[]): Promise<string[]> {
  const rows = await rowsOf<{ id: string }>(db, sql`
    select distinct e.downstream_id as id from edges e join tasks t on t.id = e.downstream_id
    where e.upstream_id = any(${textArray(ids)}) and t.status in ('pending', 'ready')`);
  return rows.map((r) => r.id);
}

/**
 * A for_each task that runs again maps again, over the list as it is then: its previous children leave it (their
 * edges to it go, parent_id is cleared) and keep their history under `<key>~<fence>` (`review/0~7`: the run whose
 * fence was 7), so the new children can take `review/0`, …. Not when some of its children run again with it
 * (`rerun review/1 --downstream`): it then collects their outputs again. Returns the first child that is still open
 * (neither completed nor cancelled), with nothing changed, when there is one: a re-run must not orphan work in flight.
 */
export async function taskMapChildrenRetire(db: Db, ids: string[]): Promise<{ openChild?: { key: string; status: string }; retired: string[] }> {
  if (ids.length === 0) return { retired: [] };
  const parents = (await rowsOf<{ id: string }>(db, sql`
    select p.id from tasks p
    where p.id = any(${textArray(ids)}) and starts_with(p.wait_key, ${MAP_WAIT_PREFIX}) and p.has_children
      and not exists (select 1 from tasks k where k.parent_id = p.id and k.id = any(${textArray(ids)}))`)).map((r) => r.id);
  if (parents.length === 0) return { retired: [] };
  const [open] = await rowsOf<{ key: string; status: string }>(db, sql`
    select key, status from tasks where parent_id = any(${textArray(parents)}) and status not in ('completed', 'cancelled') order by key limit 1`);
  if (open) return { openChild: open, retired: [] };
  await db.execute(sql`
    delete from edges e using tasks c
    where e.upstream_id = c.id and e.downstream_id = c.parent_id and c.parent_id = any(${textArray(parents)})`);
  const retired = await rowsOf<{ id: string }>(db, sql`
    update tasks c set key = c.key || '~' || p.fence, parent_id = null, updated_at = now()
    from tasks p where c.parent_id = p.id and p.id = any(${textArray(parents)})
    returning c.id`);
  await db.execute(sql`update tasks set has_children = false where id = any(${textArray(parents)})`);
  return { retired: retired.map((r) => r.id) };
}

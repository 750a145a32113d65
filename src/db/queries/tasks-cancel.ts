import { and, eq, inArray, sql } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { tasks } from '../schema/index.js';
import { LEASED_STATES, fromStates } from '../../model/state-machine.js';
import { rowsOf, textArray } from '../statement.js';
import { spendReleaseCtes } from './spend.js';
import { MAP_WAIT_PREFIX } from './signals.js';
import type { CancelledRow } from '../rows.js';
import { usageOfAttemptSql } from './usage.js';

export type { CancelledRow } from '../rows.js';

/** Cancelling: a task with everything downstream of it, and a DAG's unfinished tasks. */

/**
 * Cancel the given tasks and everything downstream of them that has not finished:
 * those can never run once an upstream is cancelled; and a for_each task's children. Cancelling a validation task gives
 * up on the output it judges, and so on the task waiting VALIDATING for its verdict.
 */
export function taskCancelCascade(db: Db, ids: string[]): Promise<CancelledRow[]> {
  return rowsOf<CancelledRow>(db, sql`
    with recursive seeds(id) as (
      select unnest(${textArray(ids)})
      union
      select j.id from tasks v join tasks j on j.id = v.validates_id
      where v.id = any(${textArray(ids)}) and j.status = 'validating' and j.fence = v.validates_fence
    ),
    -- Downstream along edges, and into a cancelled for_each task's children: they run only to feed it.
    downstream(id) as (
      select id from seeds
      union
      select n.id from downstream d cross join lateral (
        select e.downstream_id as id from edges e where e.upstream_id = d.id
        union all
        select c.id from tasks c join tasks p on p.id = c.parent_id
        where c.parent_id = d.id and starts_with(p.wait_key, ${MAP_WAIT_PREFIX})
      ) n
    ),
    -- A cancelled task's validation tasks judge an output nobody will use any more.
    targets as (
      select id from downstream
      union
      select v.id from tasks v join downstream d on v.validates_id = d.id
    ),
    previous as (
      select t.id, t.status from tasks t join targets d on d.id = t.id
      where t.status = any(${textArray(fromStates('cancel'))})
      for update of t
    ),
    cancelled as (
      update tasks t set status = 'cancelled', lease_expires_at = null, completed_at = now(), updated_at = now()
      from previous p where t.id = p.id
      returning t.*, p.status as previous
    ),
    -- The reservations of the attempts cut short go back, nothing is charged (spend.ts; agents locked before DAGs).
    ${spendReleaseCtes('cancelled', sql`previous in ('claimed', 'running')`)},
    cut_short as (
      insert into attempts (task_id, dag_id, attempt, fence, agent_id, outcome, error_class, error_message, started_at, ended_at, duration_ms,
                            cost_usd, tokens_in, tokens_out)
      select id, dag_id, attempts, fence, claimed_by, 'cancelled', 'cancelled', 'cancelled while held by an agent', claimed_at, now(),
             (extract(epoch from now() - claimed_at) * 1000)::int, ${usageOfAttemptSql('cancelled').cost},
             ${usageOfAttemptSql('cancelled').tokensIn}, ${usageOfAttemptSql('cancelled').tokensOut}
      from cancelled where previous = any(${textArray(LEASED_STATES)})
      on conflict (task_id, fence) do update set outcome = 'cancelled', error_class = 'cancelled',
        error_message = 'cancelled while its output was being validated', ended_at = excluded.ended_at
    )
    select id, dag_id as "dagId", key, previous, fence from cancelled`);
}

export function taskNonTerminalIdsForDag(db: Db, dagId: string) {
  return db.select({ id: tasks.id }).from(tasks)
    .where(and(eq(tasks.dagId, dagId), inArray(tasks.status, [...fromStates('cancel')])));
}

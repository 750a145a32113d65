import { sql } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { EXPIRING_LEASE_STATES, fromStates, type TaskState } from '../../model/state-machine.js';
import { effectivePriorityOnReadySql } from '../../model/priority.js';
import { rowsOf, sqlStateList, textArray } from '../statement.js';
import { readyNotifySql } from './ready-hint.js';
import { taskUnstartedSql } from './task-hold.js';

/** The scans the maintenance loops run over tasks: lapsed leases (reaper) and due retries (promoter). */

export interface ExpiredLease {
  id: string; dagId: string; fence: number; status: TaskState; agentId: string | null; reason: 'claim_ttl' | 'heartbeat' | 'max_duration';
  /** No start, no heartbeat and no stream written since the claim (taskUnstartedSql): the agent most likely never got the claim's reply. */
  unstarted: boolean;
  /** For a lapsed heartbeat lease: every running task of the same agent whose lease lapsed too (this one included). */
  diedWith: string[];
}

/**
 * Leased tasks the reaper should take back: a claim never started in time, a
 * heartbeat lease that lapsed, or a run past its max_duration_sec.
 */
export function taskLeaseExpiredList(db: Db, limit: number, exceptIds: string[] = []): Promise<ExpiredLease[]> {
  return rowsOf<ExpiredLease>(db, sql`
    select id, dag_id as "dagId", fence, status, claimed_by as "agentId",
      case when status = 'claimed' then 'claim_ttl'
           when lease_expires_at < now() then 'heartbeat'
           else 'max_duration' end as reason,
      ${taskUnstartedSql('tasks')} as unstarted,
      coalesce(array_agg(id) filter (where status = 'running' and lease_expires_at < now()) over (partition by claimed_by), '{}') as "diedWith"
    from tasks
    where ((status in (${sqlStateList(EXPIRING_LEASE_STATES)}) and lease_expires_at < now())
       or (status = 'running' and max_duration_sec is not null
           and started_at + make_interval(secs => max_duration_sec) < now()))
      and id <> all(${textArray(exceptIds)})
    order by lease_expires_at
    limit ${limit}`);
}

/** Move due RETRYING tasks, and PENDING tasks whose not_before passed with no dependency left, to READY. */
export async function taskPromoteDue(db: Db, limit: number): Promise<number> {
  const [r] = await rowsOf<{ n: number }>(db, sql`
    with due as (
      select id from tasks
      where status = any(${textArray(fromStates('promote'))}) and run_at <= now() and deps_remaining = 0
      order by run_at limit ${limit}
      for update skip locked
    ),
    promoted as (
      update tasks t set status = 'ready', ready_at = now(), updated_at = now(), ${effectivePriorityOnReadySql()}
      from due where t.id = due.id
      returning t.status, t.cap_key, t.tenant_id
    )
    select count(*)::int as n, ${readyNotifySql(sql`promoted`)} as notified from promoted`);
  return r?.n ?? 0;
}

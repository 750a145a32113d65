import { sql, type SQL } from 'drizzle-orm';
import { fromStates } from '../../model/state-machine.js';
import { textArray } from '../statement.js';

/**
 * A holder's hold on its task, as the statements that need a live one check it (a durable step's record and replay,
 * a usage report, a budget read): the guard, and the task's standing when a statement refuses, to say why.
 */

/** A task as a refusing statement saw it (null: no such task). */
export type TaskStanding = { status: string; fence: number; leaseLapsed: boolean } | null;

/** True when `fence` holds the task row `alias` under a live lease: the fence, a state that may heartbeat, the lease. */
export function taskHeldSql(alias: string, fence: number): SQL {
  const t = sql.raw(alias);
  return sql`(${t}.fence = ${fence} and ${t}.status = any(${textArray(fromStates('heartbeat'))}) and ${t}.lease_expires_at > now())`;
}

/**
 * True when the holder of task row `alias` has shown no sign of life since its claim (its claim's reply was most
 * likely lost: the reaper hands the lease back without spending an attempt): not started, or running with no
 * heartbeat since (a claim straight into RUNNING stamps both at once), and no stream or durable step written under its
 * fence (task_steps' primary key begins with task and fence). The
 * runtime's first heartbeat comes 2 s after the start, a stream's first batch within STREAM_DEFAULTS.batchMs: a
 * writer killed in between was handed back free, and its retry streamed under the same attempt number
 * (test/faults/streams.test.ts).
 */
export function taskUnstartedSql(alias: string): SQL {
  const t = sql.raw(alias);
  return sql`((${t}.status = 'claimed' or ${t}.heartbeat_at is not distinct from ${t}.claimed_at)
    and not exists (select 1 from task_streams s where s.task_id = ${t}.id and s.fence = ${t}.fence)
    and not exists (select 1 from task_steps p where p.task_id = ${t}.id and p.fence = ${t}.fence))`;
}

/** The task's standing as columns `status`, `fence_now` and `lapsed`, read beside a statement's own result. */
export function taskStandingSql(taskId: string): SQL {
  return sql`(select status from tasks where id = ${taskId}) as status,
      (select fence from tasks where id = ${taskId}) as fence_now,
      (select lease_expires_at <= now() from tasks where id = ${taskId}) as lapsed`;
}

/** The standing from those columns. */
export function taskStandingOf(row: { status?: unknown; fence_now?: unknown; lapsed?: unknown }): TaskStanding {
  return row.status == null ? null : { status: row.status as string, fence: Number(row.fence_now), leaseLapsed: row.lapsed === true };
}

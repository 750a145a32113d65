import { sql } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { dateOf, rowsOf, textArray } from '../statement.js';
import { taskKeyOrderSql } from '../../model/task-key-order.js';

/** Signals and the tasks that wait for them (status WAITING, wait_key): each walk goes through tasks_waiting_idx. */

/** A WAITING task a signal completes, or whose wait timed out: its fence is what the completion or failure presents. */
export interface WaitingTask { id: string; dagId: string; key: string; fence: number; waitKey: string; waitTimeoutSec: number | null }

const waitingColumns = sql`id, dag_id as "dagId", key, fence, wait_key as "waitKey", wait_timeout_sec as "waitTimeoutSec"`;

/** Store the signal as its key's latest (a task that starts waiting later, and was created before, completes with it). */
export async function signalRecord(db: Db, tenantId: string, key: string, payload: unknown, sentBy: string): Promise<{ receivedAt: Date; received: number }> {
  const [r] = await rowsOf<{ receivedAt: string; received: number }>(db, sql`
    insert into signals (tenant_id, key, payload, sent_by) values (${tenantId}, ${key}, ${JSON.stringify(payload ?? null)}::jsonb, ${sentBy})
    on conflict (tenant_id, key) do update set payload = excluded.payload, sent_by = excluded.sent_by, received_at = now(), received = signals.received + 1
    returning received_at as "receivedAt", received`);
  return { receivedAt: dateOf(r!.receivedAt)!, received: r!.received };
}

/**
 * Lock the tenant's tasks WAITING on `key`, in id order (two signals to one key complete each task once:
 * the second finds it no longer WAITING once the first commits).
 */
export async function taskWaitingLockForKey(db: Db, tenantId: string, key: string): Promise<WaitingTask[]> {
  return rowsOf<WaitingTask>(db, sql`
    select ${waitingColumns} from tasks where status = 'waiting' and wait_key = ${key} and tenant_id = ${tenantId} order by id for update`);
}

/**
 * WAITING tasks whose key had a signal after they were created (it came while they still waited on
 * their upstream tasks, or were dead-lettered), locked with the payload to complete them with; a signal
 * that completed an earlier run of the task does not complete a re-run. SKIP LOCKED leaves any a signal holds.
 */
export async function taskWaitingSignalled(db: Db, limit: number): Promise<Array<WaitingTask & { payload: unknown }>> {
  return rowsOf(db, sql`
    select t.id, t.dag_id as "dagId", t.key, t.fence, t.wait_key as "waitKey", t.wait_timeout_sec as "waitTimeoutSec", s.payload
    from tasks t join signals s on s.key = t.wait_key and s.tenant_id = t.tenant_id
    where t.status = 'waiting' and s.received_at >= t.created_at
      and not exists (select 1 from attempts a where a.task_id = t.id and a.outcome = 'completed' and a.ended_at >= s.received_at)
    order by t.id limit ${limit} for update of t skip locked`);
}

/** The wait_key prefix of a for_each task (waiting to map over its list, or to collect its children's outputs): no signal reaches it. */
export const MAP_WAIT_PREFIX = 'map/';
/** The wait_key prefix of an approval step's validation task: a signal key cannot contain `/`, so no signal reaches one. */
export const APPROVAL_WAIT_PREFIX = 'approval/';

/**
 * WAITING tasks whose wait ran out (lease_expires_at, set from wait_timeout_sec when they began waiting):
 * those waiting for a signal, or the approval steps' validation tasks waiting for a person.
 */
export async function taskWaitingExpired(db: Db, limit: number, waitsFor: 'signal' | 'approval'): Promise<WaitingTask[]> {
  return rowsOf<WaitingTask>(db, sql`
    select ${waitingColumns} from tasks
    where status = 'waiting' and wait_key is not null and lease_expires_at < now()
      and starts_with(wait_key, ${APPROVAL_WAIT_PREFIX}) = ${waitsFor === 'approval'}
    order by lease_expires_at limit ${limit}`);
}

/**
 * The approvals waiting for a person, oldest first (those that began waiting at once in key order: model/task-key-order.ts):
 * approval steps, with the output each would approve (`step`: its index), and approval tasks, with their upstream
 * tasks' outputs by key (`step` null; `id` = `taskId`).
 */
export interface ApprovalWaitingRow {
  id: string; fence: number; dagId: string; dagName: string; taskId: string; taskKey: string; taskTitle: string | null;
  step: number | null; prompt: string | null; output: unknown; waitingSince: Date; expiresAt: Date | null;
}

export async function approvalWaitingList(db: Db, o: { dagId?: string; limit: number; tenants?: readonly string[] | null }): Promise<ApprovalWaitingRow[]> {
  const rows = await rowsOf<Omit<ApprovalWaitingRow, 'waitingSince' | 'expiresAt'> & { waitingSince: string; expiresAt: string | null }>(db, sql`
    select v.id, v.fence, v.dag_id as "dagId", g.name as "dagName", coalesce(t.id, v.id) as "taskId", coalesce(t.key, v.key) as "taskKey",
           case when t.id is null then v.title else t.title end as "taskTitle", v.validation_step as step, v.spec ->> 'prompt' as prompt,
           case when t.id is not null then t.output else (
             select coalesce(jsonb_object_agg(u.key, u.output), '{}'::jsonb) from tasks u where u.dag_id = v.dag_id and u.key = any(v.context_keys)
           ) end as output,
           v.claimed_at as "waitingSince", v.lease_expires_at as "expiresAt"
    from tasks v left join tasks t on t.id = v.validates_id join dags g on g.id = v.dag_id
    where v.status = 'waiting' and starts_with(v.wait_key, ${APPROVAL_WAIT_PREFIX})
      ${o.dagId ? sql`and v.dag_id = ${o.dagId}` : sql``}
      ${o.tenants ? sql`and v.tenant_id = any(${textArray(o.tenants)})` : sql``}
    order by v.claimed_at, ${taskKeyOrderSql(sql`coalesce(t.key, v.key)`)}, v.id limit ${o.limit}`);
  return rows.map((r) => ({ ...r, waitingSince: dateOf(r.waitingSince)!, expiresAt: dateOf(r.expiresAt) }));
}

/**
 * The approval waiting on `id` (the approval's own task, or the task whose output it approves): its fence, which
 * the decision then presents (personVerdictSettle locks and re-checks it; a decision made meanwhile wins).
 */
export async function approvalWaitingFind(db: Db, id: string): Promise<{ id: string; dagId: string; fence: number; validatesId: string | null; spec: Record<string, unknown> } | null> {
  const [r] = await rowsOf<{ id: string; dagId: string; fence: number; validatesId: string | null; spec: Record<string, unknown> }>(db, sql`
    select id, dag_id as "dagId", fence, validates_id as "validatesId", spec from tasks
    where status = 'waiting' and starts_with(wait_key, ${APPROVAL_WAIT_PREFIX}) and (id = ${id} or validates_id = ${id})
    order by id limit 1`);
  return r ?? null;
}

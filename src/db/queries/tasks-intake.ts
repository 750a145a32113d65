import { sql } from 'drizzle-orm';
import type { PgInsertValue } from 'drizzle-orm/pg-core';
import type { Db } from '../connection.js';
import { concurrencyKeys, tasks } from '../schema/index.js';
import { fromStates } from '../../model/state-machine.js';
import { effectivePriorityOnReadySql } from '../../model/priority.js';
import { capabilityGroupsEnsure } from './capability-groups.js';
import { rowsOf, textArray } from './run.js';
import { notifyIfReady } from './tasks-fragments.js';

/** New tasks into the queue: insert, activate (created → ready | pending), gain an upstream, and backpressure. */

/** A task row to insert; columns may be SQL expressions (times relative to the database clock). */
export type TaskInsert = PgInsertValue<typeof tasks>;

const CHUNK = 500;

/** Insert tasks (and record any claim group not seen before, so claims can find them). */
export async function taskInsertMany(db: Db, rows: TaskInsert[]): Promise<void> {
  await capabilityGroupsEnsure(db, rows.map((r) => ({
    capabilities: (r.requiredCapabilities as string[] | undefined) ?? [], models: (r.models as string[] | undefined) ?? [],
  })));
  await concurrencyKeysDeclare(db, rows);
  for (let i = 0; i < rows.length; i += CHUNK) await db.insert(tasks).values(rows.slice(i, i + CHUNK));
}

/**
 * Record the concurrency keys of tasks about to be inserted, each with the limit its task declares
 * (the latest submitted wins). Keys in id order, so two submits never wait on each other's rows crosswise.
 */
async function concurrencyKeysDeclare(db: Db, rows: TaskInsert[]): Promise<void> {
  const limits = new Map<string, number>();
  for (const r of rows) if (typeof r.concKey === 'string' && typeof r.concLimit === 'number') limits.set(r.concKey, r.concLimit);
  if (limits.size === 0) return;
  const keys = [...limits.keys()].sort();
  await db.insert(concurrencyKeys).values(keys.map((key) => ({ key, lim: limits.get(key)! })))
    .onConflictDoUpdate({ target: concurrencyKeys.key, set: { lim: sql`excluded.lim` } });
}

/** created → pending | ready for every created task of a DAG (the activate transition). */
export async function taskActivateCreated(db: Db, dagId: string): Promise<{ ready: number; pending: number }> {
  const [r] = await rowsOf<{ ready: number; pending: number }>(db, sql`
    with activated as (
      update tasks set
        status = case when deps_remaining = 0 and (run_at is null or run_at <= now()) then 'ready' else 'pending' end,
        ready_at = case when deps_remaining = 0 and (run_at is null or run_at <= now()) then now() end,
        ${effectivePriorityOnReadySql()},
        updated_at = now()
      where dag_id = ${dagId} and status = any(${textArray(fromStates('activate'))})
      returning status, cap_key
    )
    select count(*) filter (where status = 'ready')::int as ready,
           count(*) filter (where status = 'pending')::int as pending,
           ${notifyIfReady(sql`activated`)} as notified
    from activated`);
  return { ready: r?.ready ?? 0, pending: r?.pending ?? 0 };
}

/** An unclaimed task gained `n` unfinished upstream tasks: it waits (READY goes back to PENDING). False if it was already claimed. */
export async function taskDepsAdd(db: Db, id: string, n: number): Promise<boolean> {
  const r = await rowsOf(db, sql`
    update tasks set deps_remaining = deps_remaining + ${n},
      status = case when status = 'created' then 'created' else 'pending' end, ready_at = null, updated_at = now()
    where id = ${id} and status = any(${textArray(fromStates('block'))})
    returning id`);
  return r.length > 0;
}

/** READY plus PENDING tasks: what backpressure compares with its limit (each status is walked through its partial index). */
export async function taskQueuedCount(db: Db): Promise<number> {
  const [r] = await rowsOf<{ n: number }>(db, sql`
    select (select count(*) from tasks where status = 'ready')::int + (select count(*) from tasks where status = 'pending')::int as n`);
  return r?.n ?? 0;
}

/** Serialize submissions while backpressure is on, so two of them cannot both slip under the limit. */
export async function taskSubmitLock(db: Db): Promise<void> {
  await db.execute(sql`select pg_advisory_xact_lock(hashtext('dagent.submit'))`);
}

import { sql, type SQL } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { HELD_STATES } from '../../model/state-machine.js';
import { dagGraphTryLockSql } from './dags.js';
import { rowsOf } from '../statement.js';

/**
 * Retention (src/engine/ops/retention.ts): what is older than the period goes, in statements that each delete a
 * bounded batch, so no transaction holds many locks or writes much WAL at once, and none touches a row a claim
 * reads (finished DAGs' tasks are never READY, claimed or running).
 */

/** A finished DAG past the period with no open dead letter: what retention may prune. `d` is the dags row. */
function dagPrunableSql(olderThanSec: number): SQL {
  return sql`d.status in ('completed', 'cancelled') and d.pruned_at is null
    and d.completed_at < now() - make_interval(secs => ${olderThanSec}::double precision)
    and not exists (select 1 from dead_letters l where l.dag_id = d.id and l.resolution is null)`;
}

/**
 * Mark up to `limit` prunable DAGs, oldest first, as being pruned. Each DAG's graph lock is tried in the same
 * statement: a DAG a re-run holds is passed over, and a re-run that comes after sees the mark (409).
 * dags_finished_idx walks the finished DAGs by completed_at.
 */
export async function retentionDagsMark(db: Db, olderThanSec: number, limit: number): Promise<number> {
  const rows = await rowsOf<{ n: number }>(db, sql`
    with picked as (
      select d.id from dags d
      where ${dagPrunableSql(olderThanSec)} and ${dagGraphTryLockSql(sql`d.id`)}
      order by d.completed_at
      limit ${limit}
      for update skip locked
    ), marked as (
      update dags d set pruned_at = now() from picked p where d.id = p.id returning 1
    )
    select count(*)::int as n from marked`);
  return rows[0]?.n ?? 0;
}

/**
 * Delete up to `batch` log lines of tasks of DAGs being pruned: logs are the bulk of a task's rows (up to
 * LIMITS.logLinesPerAttempt an attempt), so they go first, bounded by rows, before the task batches.
 */
export async function retentionLogsDelete(db: Db, batch: number): Promise<number> {
  const [r] = await rowsOf<{ n: number }>(db, sql`
    with doomed as (
      select l.id from attempt_logs l
      where l.task_id in (select t.id from tasks t join dags d on d.id = t.dag_id where d.pruned_at is not null)
      limit ${batch}
    ), gone as (delete from attempt_logs l using doomed x where l.id = x.id returning 1)
    select count(*)::int as n from gone`);
  return r?.n ?? 0;
}

export interface TaskBatchCounts { tasks: number; attempts: number; logLines: number; events: number }

/**
 * Delete up to `batch` tasks of DAGs being pruned, with what hangs off them: attempts, log lines and their
 * stats, the tasks' events and the edges from or to them (edges have no foreign keys: db/schema/edges.ts).
 * One statement, one transaction.
 */
export async function retentionTasksDelete(db: Db, batch: number): Promise<TaskBatchCounts> {
  const [r] = await rowsOf<TaskBatchCounts>(db, sql`
    with doomed as (
      select t.id from tasks t
      where t.dag_id in (select d.id from dags d where d.pruned_at is not null)
      limit ${batch}
      for update skip locked
    ), logs as (
      delete from attempt_logs l using doomed x where l.task_id = x.id returning 1
    ), log_stats as (
      delete from attempt_log_stats s using doomed x where s.task_id = x.id returning 1
    ), attempt_rows as (
      delete from attempts a using doomed x where a.task_id = x.id returning 1
    ), task_events as (
      delete from events e using doomed x where e.task_id = x.id returning 1
    ), edges_from as (
      delete from edges e using doomed x where e.upstream_id = x.id returning 1
    ), edges_to as (
      -- An edge from and to doomed tasks is deleted once (edges_from); deleting it here too is a no-op.
      delete from edges e using doomed x where e.downstream_id = x.id returning 1
    ), gone as (
      delete from tasks t using doomed x where t.id = x.id returning 1
    )
    select (select count(*)::int from gone) as tasks, (select count(*)::int from attempt_rows) as attempts,
      (select count(*)::int from logs) as "logLines", (select count(*)::int from task_events) as events`);
  return r ?? { tasks: 0, attempts: 0, logLines: 0, events: 0 };
}

export interface DagDeleteCounts { dags: number; events: number; deadLetters: number }

/** Delete the DAGs being pruned whose tasks are all gone, with their own events and their resolved dead letters. */
export async function retentionDagsDelete(db: Db): Promise<DagDeleteCounts> {
  const [r] = await rowsOf<DagDeleteCounts>(db, sql`
    with gone as (
      delete from dags d
      where d.pruned_at is not null and not exists (select 1 from tasks t where t.dag_id = d.id)
      returning d.id
    ), dag_events as (
      delete from events e using gone g where e.dag_id = g.id returning 1
    ), letters as (
      delete from dead_letters l using gone g where l.dag_id = g.id returning 1
    )
    select (select count(*)::int from gone) as dags, (select count(*)::int from dag_events) as events,
      (select count(*)::int from letters) as "deadLetters"`);
  return r ?? { dags: 0, events: 0, deadLetters: 0 };
}

/**
 * Delete up to `batch` stream chunks of finished tasks whose stream was last written before the period, then the
 * rows of those streams left without chunks. Keyed by the chunks' primary key (task, fence, name, seq).
 */
export async function retentionStreamsDelete(db: Db, olderThanSec: number, batch: number): Promise<{ chunks: number; streams: number }> {
  const old = sql`s.updated_at < now() - make_interval(secs => ${olderThanSec}::double precision)
        and t.status in ('completed', 'cancelled', 'dead_lettered')`;
  const [r] = await rowsOf<{ chunks: number }>(db, sql`
    with doomed as (
      select c.task_id, c.fence, c.name, c.seq from task_stream_chunks c
      join task_streams s on s.task_id = c.task_id and s.fence = c.fence and s.name = c.name
      join tasks t on t.id = c.task_id
      where ${old}
      limit ${batch}
    ), gone as (
      delete from task_stream_chunks c using doomed d
      where c.task_id = d.task_id and c.fence = d.fence and c.name = d.name and c.seq = d.seq returning 1
    )
    select count(*)::int as chunks from gone`);
  const [s] = await rowsOf<{ streams: number }>(db, sql`
    with emptied as (
      select s.task_id, s.fence, s.name from task_streams s join tasks t on t.id = s.task_id
      where ${old} and not exists (select 1 from task_stream_chunks c where c.task_id = s.task_id and c.fence = s.fence and c.name = s.name)
      limit ${batch}
    ), gone as (delete from task_streams s using emptied e where s.task_id = e.task_id and s.fence = e.fence and s.name = e.name returning 1)
    select count(*)::int as streams from gone`);
  return { chunks: r?.chunks ?? 0, streams: s?.streams ?? 0 };
}

/** Delete up to `batch` events that belong to no DAG (agents, schedules), older than the period. */
export async function retentionDaglessEventsDelete(db: Db, olderThanSec: number, batch: number): Promise<number> {
  const [r] = await rowsOf<{ n: number }>(db, sql`
    with old as (
      select id from events
      where dag_id is null and at < now() - make_interval(secs => ${olderThanSec}::double precision)
      order by at limit ${batch}
    ), gone as (delete from events e using old o where e.id = o.id returning 1)
    select count(*)::int as n from gone`);
  return r?.n ?? 0;
}

/** Delete up to `batch` webhook deliveries that were delivered or given up on, created before the period. */
export async function retentionDeliveriesDelete(db: Db, olderThanSec: number, batch: number): Promise<number> {
  const [r] = await rowsOf<{ n: number }>(db, sql`
    with old as (
      select id from webhook_deliveries
      where status <> 'pending' and created_at < now() - make_interval(secs => ${olderThanSec}::double precision)
      order by created_at limit ${batch}
    ), gone as (delete from webhook_deliveries w using old o where w.id = o.id returning 1)
    select count(*)::int as n from gone`);
  return r?.n ?? 0;
}

/**
 * An agent offline for longer than the period that holds no task and has no budget (an agent with one keeps its
 * spend, or it would get its whole budget again when it comes back): what retention may prune. `a` is the agents row.
 */
function agentPrunableSql(olderThanSec: number): SQL {
  return sql`a.status = 'offline' and a.budget_usd is null and a.heartbeat_at < now() - make_interval(secs => ${olderThanSec}::double precision)
    and not exists (select 1 from tasks t where t.claimed_by = a.id and t.status in (${sql.raw(HELD_STATES.map((st) => `'${st}'`).join(', '))}))`;
}

/** Delete agents offline for longer than the period that hold no task (they register again if they come back). */
export async function retentionAgentsDelete(db: Db, olderThanSec: number, batch: number): Promise<string[]> {
  const rows = await rowsOf<{ id: string }>(db, sql`
    with old as (
      select a.id from agents a where ${agentPrunableSql(olderThanSec)} order by a.id limit ${batch} for update skip locked
    )
    delete from agents a using old o where a.id = o.id returning a.id`);
  return rows.map((r) => r.id);
}

export interface RetentionPreview {
  dags: number; tasks: number; attempts: number; logLines: number; events: number; deadLetters: number;
  agents: number; deliveries: number;
  /** Open dead letters older than the period: kept, with their DAGs, until a person resolves them. */
  deadLettersKept: number;
}

/** What a prune with this period would delete now (and what a prune already begun still has to), without deleting. */
export async function retentionPreview(db: Db, olderThanSec: number): Promise<RetentionPreview> {
  const age = sql`make_interval(secs => ${olderThanSec}::double precision)`;
  const [r] = await rowsOf<RetentionPreview>(db, sql`
    with doomed as (
      select d.id from dags d where (${dagPrunableSql(olderThanSec)}) or d.pruned_at is not null
    )
    select
      (select count(*)::int from doomed) as dags,
      (select count(*)::int from tasks t where t.dag_id in (select id from doomed)) as tasks,
      (select count(*)::int from attempts a join tasks t on t.id = a.task_id where t.dag_id in (select id from doomed)) as attempts,
      (select count(*)::int from attempt_logs l join tasks t on t.id = l.task_id where t.dag_id in (select id from doomed)) as "logLines",
      (select count(*)::int from events e where e.dag_id in (select id from doomed))
        + (select count(*)::int from events e where e.dag_id is null and e.at < now() - ${age}) as events,
      (select count(*)::int from dead_letters l where l.dag_id in (select id from doomed)) as "deadLetters",
      (select count(*)::int from agents a where ${agentPrunableSql(olderThanSec)}) as agents,
      (select count(*)::int from webhook_deliveries w where w.status <> 'pending' and w.created_at < now() - ${age}) as deliveries,
      (select count(*)::int from dead_letters l where l.resolution is null and l.created_at < now() - ${age}) as "deadLettersKept"`);
  return r!;
}

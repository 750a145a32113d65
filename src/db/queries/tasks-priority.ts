import { sql, type SQL } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { effectivePrioritySql, priorityConstants } from '../../model/priority.js';
import { taskKeyOrderSql } from '../../model/task-key-order.js';
import { rowsOf, sqlStateList, textArray } from '../statement.js';
import { HELD_STATES } from '../../model/state-machine.js';
import { DEFAULT_TENANT } from '../schema/index.js';
import { spendRemainingSql } from './spend.js';

/** Learned medians (seconds) of the given task types, where enough completed attempts back them. */
export async function taskTypeMedians(db: Db, types: string[]): Promise<Map<string, number>> {
  if (types.length === 0) return new Map();
  const rows = await rowsOf<{ type: string; median: number }>(db, sql`
    select type, median_sec as median from task_type_durations
    where type = any(${textArray(types)}) and samples >= ${priorityConstants().minSamples}`);
  return new Map(rows.map((r) => [r.type, r.median]));
}

/** Re-learn each type's median run time from its completed attempts of the last day. Returns the types updated. */
export async function taskTypeDurationsRefresh(db: Db): Promise<number> {
  const rows = await rowsOf(db, sql`
    insert into task_type_durations (type, median_sec, samples, updated_at)
    select t.type, percentile_cont(0.5) within group (order by a.duration_ms) / 1000.0, count(*)::int, now()
    from attempts a join tasks t on t.id = a.task_id
    where a.outcome = 'completed' and a.ended_at > now() - interval '1 day'
    group by t.type
    on conflict (type) do update set median_sec = excluded.median_sec, samples = excluded.samples, updated_at = excluded.updated_at
    returning type`);
  return rows.length;
}

/** Store new upward ranks, and re-rank READY tasks among them at once (their order changed now, not at the next refresh). */
export async function taskRanksSet(db: Db, ranks: Array<{ id: string; rank: number }>): Promise<void> {
  for (let i = 0; i < ranks.length; i += 5000) {
    const chunk = JSON.stringify(ranks.slice(i, i + 5000));
    // Two statements: a row updated by one part of a statement is invisible to the next part of it.
    const changed = await rowsOf<{ id: string }>(db, sql`
      update tasks t set cp_rank_sec = i.rank from jsonb_to_recordset(${chunk}::jsonb) as i(id text, rank float8)
      where t.id = i.id and t.cp_rank_sec is distinct from i.rank
      returning t.id`);
    await taskPriorityRecompute(db, changed.map((c) => c.id));
  }
}

/** A task's upward rank (seconds): the critical-path term's input. */
export async function taskRankGet(db: Db, id: string): Promise<number> {
  const [r] = await rowsOf<{ rank: number }>(db, sql`select cp_rank_sec as rank from tasks where id = ${id}`);
  return r?.rank ?? 0;
}

/** Recompute the stored effective priority of the READY tasks among `ids`, now. */
export async function taskPriorityRecompute(db: Db, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  await db.execute(sql`update tasks set effective_priority = ${effectivePrioritySql()} where id = any(${textArray(ids)}) and status = 'ready'`);
}

export interface PriorityRefresh { refreshed: number; deadlinesMissed: Array<{ id: string; dagId: string }> }

/**
 * Recompute the effective priority of READY tasks whose stored value drifted by
 * more than `tolerance` (age grows, deadlines near), at most `limit` rows, most
 * drifted first; and flag tasks whose deadline can no longer be met. `at` replaces
 * the clock (tests simulate hours this way).
 */
export async function taskPriorityRefresh(db: Db, o: { limit: number; tolerance: number; at?: Date }): Promise<PriorityRefresh> {
  const at: SQL = o.at ? sql`${o.at.toISOString()}::timestamptz` : sql`now()`;
  const [r] = await rowsOf<{ refreshed: number }>(db, sql`
    with drifted as (
      select t.id, v.value from tasks t
      cross join lateral (select ${effectivePrioritySql({ at, alias: 't' })} as value) v
      where t.status = 'ready' and abs(t.effective_priority - v.value) > ${o.tolerance}
      order by abs(t.effective_priority - v.value) desc
      limit ${o.limit}
      for update of t skip locked
    ),
    updated as (
      update tasks t set effective_priority = d.value from drifted d where t.id = d.id and t.status = 'ready' returning t.id
    )
    select count(*)::int as refreshed from updated`);
  const missed = await rowsOf<{ id: string; dagId: string }>(db, sql`
    with late as (
      update tasks set deadline_missed = true, updated_at = now()
      where deadline is not null and not deadline_missed
        and status in ('pending', 'ready', 'claimed', 'running', 'validating', 'retrying')
        and ${at} + make_interval(secs => estimate_sec) > deadline
      returning id, dag_id
    ),
    recorded as (
      insert into events (type, dag_id, task_id, data)
      select 'task.deadline_missed', dag_id, id, '{}'::jsonb from late
    )
    select id, dag_id as "dagId" from late`);
  return { refreshed: r?.refreshed ?? 0, deadlinesMissed: missed };
}

/** A human's override: set the base priority of tasks that have not finished, and re-rank the READY ones now. */
export async function taskPrioritySet(db: Db, where: { taskId: string } | { dagId: string }, priority: number): Promise<string[]> {
  const match = 'taskId' in where ? sql`id = ${where.taskId}` : sql`dag_id = ${where.dagId}`;
  const rows = await rowsOf<{ id: string }>(db, sql`
    update tasks set priority = ${priority}, updated_at = now()
    where ${match} and status not in ('completed', 'cancelled')
    returning id`);
  const ids = rows.map((r) => r.id);
  await taskPriorityRecompute(db, ids);
  return ids;
}

export interface UnclaimableTask {
  id: string; dagId: string; key: string; capabilities: string[]; maxCostUsd: number | null; readySec: number;
  reason: 'tenant_quota' | 'no_capable_agent' | 'no_agent_with_model' | 'no_agent_can_afford' | 'dag_budget';
  detail: string;
}

/**
 * READY tasks no agent can take now, and why: their tenant is at a quota (its running quota, or past its money or
 * tokens quota: the share loop's reason); no active agent that serves their tenant has their
 * capabilities; capable agents exist but none has one of the models they accept;
 * capable agents exist but none has budget left for their max cost;
 * or their DAG's ceiling (less what it spent and reserved) is below their max cost. Longest READY first; those that
 * became READY at once in key order (model/task-key-order.ts).
 */
export function taskUnclaimableList(db: Db, limit: number): Promise<UnclaimableTask[]> {
  // The claim's rule (tasks-claim.ts groups): a task that names models needs an agent with one of them, or `*`.
  const modelServes = sql`(cardinality(t.models) = 0 or a.models && t.models or '*' = any(a.models))`;
  // An agent serves the task's tenant when it registered for it, or for every tenant (the claim's rule).
  const capableOf = sql`a.status = 'active' and t.required_capabilities <@ a.capabilities and (a.tenants is null or t.tenant_id = any(a.tenants))`;
  return rowsOf<UnclaimableTask>(db, sql`
    with tenant_wait as materialized (
      -- Once per tenant, not per READY task: why its work waits, if it does.
      select tn.id, case when tn.quota_until > now() then tn.quota_reason
             when tn.max_running is not null and (select count(*) from tasks h where h.tenant_id = tn.id and h.status in (${sqlStateList(HELD_STATES)})) >= tn.max_running
               then 'running quota: ' || tn.max_running || ' held at once' end as quota
      from tenants tn
    ),
    ready as (
      select t.id, t.dag_id, t.key, t.required_capabilities, t.models, t.max_cost_usd, t.ready_at, t.tenant_id,
        (select count(*) from agents a where ${capableOf}) as capable,
        (select count(*) from agents a where ${capableOf} and ${modelServes}) as serving,
        (select max(coalesce(${spendRemainingSql('a')}, 'Infinity'::numeric)) from agents a
          where ${capableOf} and ${modelServes}) as best_left,
        ${spendRemainingSql('d')} as dag_left, w.quota
      from tasks t join dags d on d.id = t.dag_id join tenant_wait w on w.id = t.tenant_id
      where t.status = 'ready'
    )
    select id, dag_id as "dagId", key, required_capabilities as capabilities, max_cost_usd::float8 as "maxCostUsd",
      extract(epoch from now() - ready_at)::float8 as "readySec",
      case when quota is not null then 'tenant_quota'
           when capable = 0 then 'no_capable_agent'
           when serving = 0 then 'no_agent_with_model'
           when dag_left is not null and coalesce(max_cost_usd, 0) > dag_left or dag_left <= 0 then 'dag_budget'
           else 'no_agent_can_afford' end as reason,
      case when quota is not null then 'tenant ' || tenant_id || ' waits at its ' || quota
           when capable = 0 then 'no active agent' || case when tenant_id <> ${DEFAULT_TENANT} then ' serving tenant ' || tenant_id else '' end
             || ' has ' || case when cardinality(required_capabilities) = 0 then 'registered' else 'capabilities ' || array_to_string(required_capabilities, ', ') end
           when serving = 0 then 'no active agent that can take it has model ' || array_to_string(models, ', ')
           when dag_left is not null and coalesce(max_cost_usd, 0) > dag_left or dag_left <= 0
             then 'DAG budget: $' || round(greatest(dag_left, 0), 4) || ' left, the task may cost $' || round(coalesce(max_cost_usd, 0), 4)
           else 'no capable agent can afford $' || round(coalesce(max_cost_usd, 0), 4) || ' (most left: $' || round(greatest(best_left, 0), 4) || ')' end as detail
    from ready
    where quota is not null or capable = 0 or serving = 0
       or (dag_left is not null and (coalesce(max_cost_usd, 0) > dag_left or dag_left <= 0))
       or best_left <= 0 or coalesce(max_cost_usd, 0) > best_left
    order by ready_at, ${taskKeyOrderSql(sql`key`)}
    limit ${limit}`);
}

export interface RankInput { id: string; estimateSec: number; cpRankSec: number }

/** What re-ranking a DAG needs: its graph's tasks (validation tasks are outside it) and their edges, ids only. */
export async function taskRankInputs(db: Db, dagId: string): Promise<{ tasks: RankInput[]; edges: Array<[string, string]> }> {
  const tasks = await rowsOf<RankInput>(db, sql`
    select id, estimate_sec as "estimateSec", cp_rank_sec as "cpRankSec" from tasks where dag_id = ${dagId} and validates_id is null`);
  const edges = await rowsOf<{ u: string; d: string }>(db, sql`select upstream_id as u, downstream_id as d from edges where dag_id = ${dagId}`);
  return { tasks, edges: edges.map((e) => [e.u, e.d]) };
}

import { sql, type SQL } from 'drizzle-orm';
import { fromStates, HELD_STATES } from '../../../model/state-machine.js';
import { sqlStateList } from '../../statement.js';
import { spendRemainingSql, spendTodaySql } from '../spend.js';
import { TENANT_DEFAULTS } from '../../../config/index.js';
import { tenantOrderKey } from '../../schema/tenants.js';
import { rateModelSql } from './agent.js';
import { inOrder, type ClaimShape } from './shape.js';

/**
 * CTE `broke`: the DAGs with a budget and nothing left of it, or a daily cap spent today, read once per claim
 * (usually none, from two partial indexes).
 */
export function brokeCte(): SQL {
  return sql`
    broke as materialized (
      select id from dags where budget_usd is not null and status in ('running', 'blocked') and ${spendRemainingSql('dags')} <= 0
      union all
      -- A day's room less what its running attempts hold reserved (as the agent's is): claims stop before the cap, not after it.
      select id from dags where daily_budget_usd is not null and status in ('running', 'blocked') and daily_budget_usd - ${spendTodaySql('dags')} - reserved_usd <= 0
    )`;
}

/**
 * CTE `groups`: the claim groups (capability_groups: a task's required capabilities and the models it accepts, per
 * tenant) the agent covers, as asked for (`caps`) within what it registered and of the tenants it serves; none when
 * it has no budget or slot left, or its count of held tasks is stale.
 */
export function groupsCte(c: ClaimShape): SQL {
  const { v, keyed } = c;
  return sql`
    groups as materialized (
      select g.cap_key, g.tenant_id from capability_groups g
      where g.capabilities <@ ${v.caps} and ${v.caps} <@ (select capabilities from agent)
        -- The tenants whose work the agent takes (null: all).
        -- Read once (InitPlans): as a subquery of agent naming g.tenant_id it ran once per group (1,000 at 1,000 tenants).
        and ((select tenants from agent) is null or g.tenant_id = any((select tenants from agent)::text[]))
        -- A group that names models: the agent has one of them that is not paused (itself or its provider).
        and (cardinality(g.models) = 0 or (select case when cardinality(a.paused) = 0 then a.models && g.models or '*' = any(a.models)
          else exists (select 1 from unnest(g.models) m where (m = any(a.models) or '*' = any(a.models))
            and m <> all(a.paused) and split_part(m, '/', 1) <> all(a.paused)) end from agent a))
        ${keyed ? sql`` : sql`and (cardinality(g.models) = 0 or not (select limited from agent))`}
        and coalesce((select remaining from agent), 1) > 0 and (select slots from agent) > 0 and not (select alone from agent)
        and not (select stale from agent)
    )`;
}

/**
 * CTEs `tenant_room` and `tenant_capped`: running quotas (tenants.max_running) of the tenants in the agent's groups,
 * and the tenants past a money or tokens quota (tenants.quota_until, set by the share loop), whose work waits.
 * A quota'd tenant's row is locked (SKIP LOCKED: a tenant another claim holds waits for the next claim) and its held
 * tasks counted (tasks_held_tenant_idx); a tenant whose row a claim wrote after this statement's snapshot is passed
 * over too, as its count would miss that claim's tasks (the concurrency keys' rule). `tenant_capped`: the quota'd
 * tenants this claim takes nothing of. Without quotas both are empty after one pass over the (small) tenants table.
 */
export function tenantRoomCtes(): SQL {
  // From the quota'd tenants (usually none), not from the groups, which may name a thousand tenants: starting from
  // the groups, the two CTEs took 3.3 and 3.2 ms of a claim of 1 at 1,000 tenants (EXPLAIN ANALYZE), now ~0.
  return sql`
    quota_tenants as materialized (
      select id, max_running is not null as counted, coalesce(quota_until > now(), false) as paused from tenants
      where max_running is not null or quota_until > now()
    ),
    tenant_room as materialized (
      select tn.id, tn.max_running - (select count(*)::int from tasks h where h.tenant_id = tn.id and h.status in (${sqlStateList(HELD_STATES)})) as room
      from quota_tenants q join tenants tn on tn.id = q.id
      -- A one-time filter first: without quotas, nothing below runs (no hash of the groups is built).
      where exists (select 1 from quota_tenants) and q.counted and not q.paused and exists (select 1 from groups g where g.tenant_id = q.id)
        and (tn.writer is null or tn.writer = pg_current_xact_id_if_assigned() or pg_visible_in_snapshot(tn.writer, pg_current_snapshot()))
      for update of tn skip locked
    ),
    tenant_capped as materialized (
      select q.id from quota_tenants q
      where exists (select 1 from quota_tenants) and exists (select 1 from groups g where g.tenant_id = q.id)
        and (q.paused or q.id not in (select id from tenant_room where room > 0))
    )`;
}

/**
 * CTEs `walked` and `picked`: the candidates, each group's index range walked in claim order (a LATERAL subquery, FOR
 * UPDATE SKIP LOCKED, at most `limit` rows each) and the heads merged, at most the agent's free slots; a task that
 * runs alone only for an agent that holds nothing, and then by itself. Tasks the agent cannot take
 * are never visited: a claim costs O(groups covered × limit), not O(READY).
 */
export function pickedCte(c: ClaimShape): SQL {
  const { v, opts, keyed } = c;
  // One group's range of tasks_ready_group_idx (its capabilities, models and tenant), walked in claim order.
  const walk = (g: string) => sql`
        select t.id, t.dag_id, t.max_cost_usd, t.effective_priority, t.ready_at, t.conc_key, t.run_alone, t.tenant_id,
          coalesce(t.estimated_tokens, t.max_tokens, ${sql.raw(String(TENANT_DEFAULTS.taskTokens))})::bigint as share_tokens
          ${keyed ? sql`, ${rateModelSql('t')} as rate_model, t.estimated_tokens` : sql``}
        from tasks t
        -- 'ready' is a literal, not a parameter: with it, a generic plan walks tasks_ready_group_idx (a partial index) and
        -- PostgreSQL keeps it after five executions, so the claim is planned once per connection, not on every call.
        -- As a parameter, the generic plan seq-scanned tasks and every claim was planned afresh (custom plans):
        -- claim of 1 at 2,000 READY, p50 1.66 ms as a parameter, 0.68 ms as a literal (pg_prepared_statements: 0 → 35 of 40 generic).
        where t.status = ${sqlStateList(fromStates('claim'))} and t.cap_key = ${sql.raw(g)}.cap_key and t.tenant_id = ${sql.raw(g)}.tenant_id
          and (t.max_cost_usd is null or t.max_cost_usd <= coalesce((select remaining from agent), t.max_cost_usd))
          -- No self-approval: the agent that produced an output never claims the validation task that judges it.
          and (t.validates_agent is null or t.validates_agent <> ${v.agentId})
          -- A task its DAG cannot afford is passed over here, inside the walk, so it never takes a place in the
          -- LIMIT that an affordable task behind it (of another DAG) should have (the same rule as unclaimable's dag_budget).
          -- DAGs with nothing left are read once per claim (broke, usually empty, from a partial index); only a
          -- task with a max cost looks its DAG up. npm run bench --quick, flat 32 slots: 13.3k tasks/s without
          -- the check, 12.0k with a DAG lookup per visited row, 14.4k like this (claim of 1: p50 1.9 / 2.7 / 1.4 ms).
          and t.dag_id <> all(select id from broke)
          ${keyed ? sql`and (t.conc_key is null or not (t.conc_key = any(select key from busy_keys)))` : sql`and t.conc_key is null`}
          and (t.max_cost_usd is null or not exists (
            select 1 from dags d where d.id = t.dag_id and ${spendRemainingSql('d')} < t.max_cost_usd))
          ${opts.dagId ? sql`and t.dag_id = ${v.dagId}` : sql``}
          -- A task that runs alone (after a shared crash) goes only to an agent that holds nothing.
          and (not t.run_alone or not (select holds from agent))
          -- Nor a tenant at its running quota (or whose quota another claim holds now).
          and ${sql.raw(g)}.tenant_id <> all(select id from tenant_capped)
        order by ${inOrder('t')}
        limit ${v.limit}
        for update of t skip locked`;
  const take = sql`least(${v.limit}::int, greatest(0, (select slots from agent)))`;
  // Fair share (more than one tenant in the groups): tenants in order of virtual time (tenantWalkCtes), each one's groups
  // merged in claim order; the walk stops once it has enough, so the tenants after are never visited. Within a tenant,
  // effective priority decides as always.
  const walked = opts.fair ? sql`
    ${tenantWalkCtes()},
    walked as (
      select c.* from tenant_walk o cross join lateral (
        select w.* from groups g cross join lateral (${walk('g')}) w
        where g.tenant_id = o.id
        order by ${inOrder('w')}
        limit ${v.limit}
      ) c
      limit ${take}
    ),` : sql`
    walked as (
      select c.* from groups g cross join lateral (${walk('g')}) c
      order by ${inOrder('c')}
      limit ${take}
    ),`;
  return sql`
    ${walked}
    -- ... and is taken alone: when the walk met one, the first such is all this claim takes. A tenant with a running
    -- quota gives at most its room.
    picked as (
      select w.* from walked w
      where (not exists (select 1 from walked a where a.run_alone)
          or w.id = (select a.id from walked a where a.run_alone order by ${inOrder('a')} limit 1))
        and (w.tenant_id <> all(select id from tenant_room)
          or (select count(*) from walked b where b.tenant_id = w.tenant_id and (b.effective_priority, b.ready_at, b.id) < (w.effective_priority, w.ready_at, w.id))
            < (select r.room from tenant_room r where r.id = w.tenant_id))
    )`;
}

/**
 * CTEs `pending`, `pending_order` and `tenant_walk` (the statement is WITH RECURSIVE): the tenants of the agent's
 * groups in fair-share order, one at a time, as the walk asks for them. A tenant's place is its virtual time
 * (tenants.vtime) plus what claims logged for it since the share loop's last fold (tenant_served), per weight; a
 * tenant without READY work at the loop's last pass (ready_hint false) comes after every other (tenantOrderKey).
 * - `pending_order`: the few tenants with tokens logged since the last fold, with their place.
 * - `tenant_walk`: each step takes the next tenant after the last one, the smaller of the next in
 *   tenants_claim_order_idx (a tenant without logged tokens, whose place is its key) and the next of `pending_order`:
 *   two ordered streams merged, one index step per tenant visited.
 * Before, every claim ordered all the tenants it covered (a join with what was logged, then a sort): claim of 1 at
 * 100,000 READY across 1,000 tenants, the statement's median 3.0 ms a run in psql (generic plan, rolled back), 2.2
 * with this walk, which usually visits one tenant; npm run bench -- --tenants p99 8.0–10.2 → 5.6–7.2 ms
 * (docs/benchmarks.md "The tenants walked in an index").
 * An idle tenant's vtime is the lowest of those with work, so without the hint each claim would visit every idle
 * tenant first (900 idle: p50 102 ms, docs/benchmarks.md "Idle tenants"); the others are still visited after the
 * hinted ones, so work of a tenant the loop has not seen yet is claimed when the hinted ones have none for this agent.
 */
function tenantWalkCtes(): SQL {
  const key = sql.raw(tenantOrderKey('tn'));
  const covered = (id: string) => sql.raw(`(${id} in (select tenant_id from groups)) is true`);
  const next = (after: boolean) => sql`
        select x.id, x.key from (
          (select tn.id, ${key} as key from tenants tn
            where ${covered('tn.id')} and (tn.id in (select id from pending_order)) is not true
              ${after ? sql`and (${key}, tn.id) > (w.key, w.id)` : sql``}
            order by ${key}, tn.id limit 1)
          union all
          (select p.id, p.key from pending_order p ${after ? sql`where (p.key, p.id) > (w.key, w.id)` : sql``} order by p.key, p.id limit 1)
        ) x
        order by x.key, x.id limit 1`;
  return sql`
    pending as materialized (select tenant_id, sum(tokens) as tokens from tenant_served group by tenant_id),
    -- A primary-key probe per tenant logged (a few): as a join, PostgreSQL hashed all of tenants for them (~0.3 ms).
    pending_order as materialized (
      select p.tenant_id as id, (select ${key} + p.tokens::float8 / tn.weight from tenants tn where tn.id = p.tenant_id) as key
      from pending p
      where ${covered('p.tenant_id')}
    ),
    tenant_walk(id, key) as (
      (${next(false)})
      union all
      (select n.id, n.key from tenant_walk w cross join lateral (${next(true)}) n)
    )`;
}

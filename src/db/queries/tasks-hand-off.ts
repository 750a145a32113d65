import { sql, type SQL } from 'drizzle-orm';
import { effectivePrioritySql } from '../../model/priority.js';
import { fromStates, HELD_STATES } from '../../model/state-machine.js';
import { taskDepsLeftSql, taskDepsRunnableSql, type UnblockHandOff } from './task-deps.js';
import { sqlStateList, textArray } from '../statement.js';
import { leaseSql } from './tasks-lifecycle.js';
import { AFTER_AGENT_LOCK, spendRemainingSql, spendTodaySql } from './spend.js';

/** A hand-off's values as the statement takes them: values, or placeholders of its compiled statement (db/statement.ts). */
export interface HandOffParts { agentId: SQL; caps: SQL; max: SQL; claimTtlSec: SQL; start: boolean; charged: SQL }

/**
 * A completion that hands the dependents it unblocks straight to the completing agent: the dependency hop
 * without a NOTIFY, a wake-up and a second claim. Inside the completion statement (tasks-complete.ts), after
 * `done` (the completed tasks, with their outputs) and `dep_counts` (edges.ts); it defines the statement's
 * `agent_lock`, over the agents `charged` (a subquery) and this one.
 *
 * A dependent is handed only where a claim by this agent at that moment would have taken it, and first:
 * - it becomes READY here and is of a claim group the agent's capabilities cover;
 * - it names no model, no concurrency key and no max cost, is not a validation of this agent's output, its
 *   DAG has no budget and no daily cap, and its tenant no running quota (the cases whose rules live in the claim's own
 *   steps: those go READY, for the next claim);
 * - no READY task of a group the agent covers is as urgent or more (`tasks_ready_group_idx`, one probe per
 *   group and tenant), none is another tenant's (fair share orders tenants: the claim decides), and no dependent
 *   becoming READY here that cannot be handed is more urgent: priority order holds;
 * - the agent is active, has budget (and room in its day) left, and holds fewer than max_concurrent tasks once these completions
 *   are counted out. Its held tasks are counted as of the statement's snapshot; if a claim of the same agent
 *   committed after it (claim_writer, as in the claim), nothing is handed. A completion that hands tasks stamps
 *   claim_writer in turn, so the agent's next claim counts them.
 * The others become READY and are announced as always.
 */
export function taskHandOff(o: HandOffParts): UnblockHandOff {
  const caps = o.caps;
  const handedState = sql.raw(o.start ? `'running'` : `'claimed'`);
  const isHanded = sql.raw(`t.status in ('claimed', 'running')`);
  // One instant for a handed task's stamps, as the claim's (tasks-claim/update.ts): its first beat is its claim's time.
  const at = sql`(select at from hand_at)`;
  return {
    // Snapshot reads first, then the agent's lock only when some dependent may be handed: a completion that
    // unblocks nothing to hand does not queue behind (nor hold up) the agent's claims on its row. Measured:
    // taking it on every completion cost flat throughput behind a backlog ~15 % (npm run bench --quick).
    ctes: sql`
    hand_at as materialized (select clock_timestamp() as at),
    hand_groups as materialized (select g.cap_key, g.tenant_id from capability_groups g where g.capabilities <@ ${caps}),
    hand_candidates as (
      select x.*, bool_and(x.eligible) over w as prefix_eligible, row_number() over w as n
      from (
        select d.id, d.tenant_id, ${effectivePrioritySql({ fresh: true, alias: 'd' })} as ep,
          (cardinality(d.models) = 0 and d.conc_key is null and d.max_cost_usd is null and not d.run_alone
            and (d.validates_agent is null or d.validates_agent <> ${o.agentId})
            and not exists (select 1 from dags g where g.id = d.dag_id and (g.budget_usd is not null or g.daily_budget_usd is not null))
            -- A tenant's running quota is the claim's to keep (tasks-claim/groups.ts tenantRoomCtes).
            and not exists (select 1 from tenants tn where tn.id = d.tenant_id and tn.max_running is not null)) as eligible
        from dep_counts c join tasks d on d.id = c.id
        where d.status = any(${textArray(fromStates('unblock'))}) and ${taskDepsRunnableSql('d', taskDepsLeftSql('d'))} and d.wait_key is null
          and d.cap_key in (select cap_key from hand_groups)
      ) x
      window w as (order by x.ep, x.id)
    ),
    hand_first as materialized (
      select h.id, h.n from hand_candidates h
      where h.prefix_eligible
        and not exists (select 1 from hand_groups g cross join lateral (
          select 1 from tasks q where q.status = 'ready' and q.cap_key = g.cap_key and q.tenant_id = g.tenant_id
            -- Another tenant's READY work at any priority: fair share (the claim's order) decides between tenants, not a hand-off.
            and (g.tenant_id <> h.tenant_id or q.effective_priority <= h.ep) limit 1) q)
    ),
    -- Lock order: agents by id before any DAG (spend.ts): the charged ones, and this one
    -- if it may be handed something. The lock reads the row's latest version.
    agent_lock as materialized (
      select a.id, a.status, a.capabilities, a.max_concurrent, a.budget_usd, a.spent_usd, a.reserved_usd, a.claim_writer,
        a.daily_budget_usd, a.day_spent_usd, a.spend_day from agents a
      where a.id in (${o.charged} union all select ${o.agentId} where exists (select 1 from hand_first))
      order by a.id for no key update of a
    ),
    hand_agent as (
      select least(${o.max}::int, a.max_concurrent
          - (select count(*)::int from tasks h where h.claimed_by = a.id and h.status in (${sqlStateList(HELD_STATES)}))
          + (select count(*)::int from done d where d.claimed_by = a.id)) as slots
      from agent_lock a
      where a.id = ${o.agentId} and a.status = 'active' and ${caps} <@ a.capabilities
        -- Less what these completions charge it (their settle is this statement's, after this read).
        and (a.budget_usd is null or ${spendRemainingSql('a')} - (select coalesce(sum(d.cost_usd), 0) from done d where d.claimed_by = a.id) > 0)
        and (a.daily_budget_usd is null
          or a.daily_budget_usd - ${spendTodaySql('a')} - a.reserved_usd - (select coalesce(sum(d.cost_usd), 0) from done d where d.claimed_by = a.id) > 0)
        and not (a.claim_writer is not null and a.claim_writer is distinct from pg_current_xact_id_if_assigned()
          and not pg_visible_in_snapshot(a.claim_writer, pg_current_snapshot()))
    ),
    handed_ids as materialized (select f.id from hand_first f where f.n <= (select slots from hand_agent))`,
    // Done rows, then the agents, then the dependents: two completions of one agent never hold a dependent the
    // other waits for while waiting for the agent (a dependent is PENDING, a completed row was held).
    before: AFTER_AGENT_LOCK,
    handed: sql`t.id in (select id from handed_ids)`,
    status: handedState,
    // The claim's columns (tasks-claim.ts), for a handed task only.
    assignments: (handed) => sql`
      claimed_by = case when ${handed} then ${o.agentId} else t.claimed_by end,
      claimed_at = case when ${handed} then ${at} else t.claimed_at end,
      started_at = case when ${handed} then ${o.start ? at : sql`null`} else t.started_at end,
      heartbeat_at = case when ${handed} then ${o.start ? at : sql`null`} else t.heartbeat_at end,
      progress = case when ${handed} then null else t.progress end,
      progress_message = case when ${handed} then null else t.progress_message end,
      fence = t.fence + case when ${handed} then 1 else 0 end,
      attempts = t.attempts + case when ${handed} then 1 else 0 end,
      reserved_usd = case when ${handed} then 0 else t.reserved_usd end,
      lease_expires_at = case when ${handed}
        then ${at} + ${o.start ? leaseSql(undefined) : sql`make_interval(secs => ${o.claimTtlSec})`} else t.lease_expires_at end`,
    // As the claim returns it; an upstream completed by this statement gives its output from `done` (this
    // statement's snapshot still has the row as it was).
    returning: sql`${isHanded} as handed,
      t.dag_id as "dagId", t.key, t.type, t.title, t.spec, t.fence, t.attempts as "attempt", t.max_attempts as "maxAttempts",
      t.max_duration_sec as "maxDurationSec", t.heartbeat_sec as "heartbeatSec", t.max_cost_usd::float8 as "maxCostUsd",
      t.output_spec as "outputSpec", t.lease_expires_at as "leaseExpiresAt", t.origin,
      case when ${isHanded} and cardinality(t.context_keys) > 0 then (
        select coalesce(jsonb_object_agg(u.key, case when dn.id is not null then dn.output else u.output end), '{}'::jsonb)
        from tasks u left join done dn on dn.id = u.id where u.dag_id = t.dag_id and u.key = any(t.context_keys)
      ) else '{}'::jsonb end as "upstreamOutputs",
      case when ${isHanded} and t.has_children then (
        select coalesce(jsonb_object_agg(substr(ch.key, length(t.key) + 2), ch.output), '{}'::jsonb)
        from tasks ch where ch.parent_id = t.id and ch.status = 'completed'
      ) else '{}'::jsonb end as "childOutputs"`,
  };
}

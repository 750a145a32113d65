import { sql, type SQL } from 'drizzle-orm';
import { leaseSql } from '../tasks-lifecycle.js';
import { spendReserveAgentSet } from '../spend.js';
import { TENANTS_SEVERAL_SQL } from '../tenants.js';
import type { ClaimShape } from './shape.js';

/** CTE `agent_claimed`: the agent's reservation, and its stamp (claim_writer) when this claim took anything. */
export function agentClaimedCte(c: ClaimShape): SQL {
  return sql`
    agent_claimed as (
      update agents a set ${spendReserveAgentSet(sql`s.amount`)}, claim_writer = pg_current_xact_id()
      from (select coalesce(sum(reserve), 0) as amount, count(*) as n from claimable) s
      where a.id = ${c.v.agentId} and s.n > 0
    )`;
}

/**
 * CTE `claimed`: the claimable rows marked claimed (or running, with `start`): a new fence and attempt, the
 * reservation, the lease; returned as the agent receives them, with the outputs of the upstream tasks its context
 * names and of the subtasks it spawned.
 */
export function claimedCte(c: ClaimShape): SQL {
  const { v, opts, keyed } = c;
  // One instant for the claim's stamps (claim_at, materialized: read once): a claim straight into RUNNING stamps its
  // first beat with the claim's own time, which is how the reaper tells a claim whose reply was lost from an agent
  // that started (taskLeaseExpiredList: heartbeat_at = claimed_at). Separate clock_timestamp() calls (each its own
  // InitPlan, too) differed in ~7 claims of 10.
  const at = sql`(select at from claim_at)`;
  return sql`
    claim_at as materialized (select clock_timestamp() as at),
    claimed as (
    update tasks t set
      status = ${opts.start ? 'running' : 'claimed'},
      claimed_by = ${v.agentId},
      claimed_at = ${at},
      started_at = ${opts.start ? at : sql`null`},
      heartbeat_at = ${opts.start ? at : sql`null`},
      progress = null,
      progress_message = null,
      fence = t.fence + 1,
      attempts = t.attempts + 1,
      reserved_usd = c.reserve,
      lease_expires_at = ${at} + ${opts.start ? leaseSql(undefined) : sql`make_interval(secs => ${v.claimTtlSec})`},
      updated_at = ${at}
    from claimable c
    where t.id = c.id
    returning
      t.id, t.dag_id as "dagId", t.key, t.type, t.title, t.spec, t.fence, t.attempts as "attempt",
      t.max_attempts as "maxAttempts", t.max_duration_sec as "maxDurationSec", t.heartbeat_sec as "heartbeatSec", t.max_cost_usd::float8 as "maxCostUsd",
      t.output_spec as "outputSpec", t.lease_expires_at as "leaseExpiresAt", t.origin,
      extract(epoch from clock_timestamp() - coalesce(t.ready_at, t.created_at))::float8 as "waitSec",
      case when cardinality(t.context_keys) = 0 then '{}'::jsonb else (
        select coalesce(jsonb_object_agg(u.key, u.output), '{}'::jsonb)
        from tasks u where u.dag_id = t.dag_id and u.key = any(t.context_keys)
      ) end as "upstreamOutputs",
      -- Behind a flag: an unconditional lookup per claimed row cost ~7 % of flat throughput.
      case when not t.has_children then '{}'::jsonb else (
        select coalesce(jsonb_object_agg(substr(c.key, length(t.key) + 2), c.output), '{}'::jsonb)
        from tasks c where c.parent_id = t.id and c.status = 'completed'
      ) end as "childOutputs",
      (select models from agent) as "agentModels", (select paused from agent) as "pausedModels"
      ${keyed ? sql`, (select c.rate_model from claimable c where c.id = t.id) as "rateModel"` : sql``}
    )`;
}

/**
 * CTE `tenant_logged`: what this claim served each tenant (its tasks' estimated tokens), logged for the share loop to
 * fold into the tenants' virtual time and their tokens of the minute (maintenance/tenant-share.ts); an insert, so
 * claims never wait on a tenant's row. Only once a second tenant exists, or a tenant has a tokens quota: with one
 * tenant and no such quota, there is nothing to keep.
 */
export function tenantLoggedCte(): SQL {
  return sql`
    tenant_logged as (
      insert into tenant_served (tenant_id, tokens, tasks)
      select w.tenant_id, sum(w.share_tokens), count(*) from claimed c join walked w on w.id = c.id
      where ${TENANTS_SEVERAL_SQL} or exists (select 1 from tenants where max_tokens_per_minute is not null)
      group by w.tenant_id
    )`;
}

/** CTE `tenant_stamped`: the quota'd tenants this claim took tasks of, stamped (writer) so a claim that did not see it passes them over. */
export function tenantStampedCte(): SQL {
  return sql`
    tenant_stamped as (
      update tenants tn set writer = pg_current_xact_id()
      where tn.id in (select id from tenant_room) and tn.id in (select w.tenant_id from claimed c join walked w on w.id = c.id)
    )`;
}

/** The statement's result: the claimed rows, or one row when nothing was claimed (its id null), so `stale` reaches the caller either way. */
export function claimResultSql(c: ClaimShape): SQL {
  const { keyed } = c;
  return sql`
    select c.*, (select stale from agent) as stale,
      -- The agent's groups hold more than one tenant's work: its claims should serve them in fair-share order.
      exists (select 1 from groups g where g.tenant_id <> (select h.tenant_id from groups h limit 1)) as "tenantsMixed",
      ${keyed ? sql`false` : sql`(select limited from agent) or exists (select 1 from tasks k where k.status = 'ready' and k.conc_key is not null)`} as "keyedReady"
    from (select 1) one left join claimed c on true`;
}

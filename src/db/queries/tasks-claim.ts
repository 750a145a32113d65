import { sql, type SQL } from 'drizzle-orm';
import type { Db } from '../connection.js';
import { fromStates } from '../../engine/state-machine.js';
import { dateOf, rowsOf, textArray } from './run.js';

export interface ClaimedRow {
  id: string;
  dagId: string;
  key: string;
  type: string;
  title: string | null;
  spec: Record<string, unknown>;
  fence: number;
  attempt: number;
  maxAttempts: number;
  maxDurationSec: number | null;
  heartbeatSec: number | null;
  maxCostUsd: number | null;
  outputSpec: Record<string, unknown> | null;
  leaseExpiresAt: Date;
  /** Outputs of the upstream tasks named in the task's context refs, by task key. */
  upstreamOutputs: Record<string, unknown>;
  /** Outputs of completed subtasks this task spawned, by their key under the parent. */
  childOutputs: Record<string, unknown>;
}

/**
 * Claim up to `limit` READY tasks for one agent, in one statement.
 *
 * The candidate CTE walks tasks_ready_claim_idx in (effective_priority, ready_at)
 * order and stops at `limit` rows it could lock, skipping rows other claimers hold
 * (SKIP LOCKED). It is a CTE joined by the UPDATE, never `WHERE id IN (SELECT …
 * LIMIT n FOR UPDATE SKIP LOCKED)`: Postgres may re-run such a subquery and claim
 * more than `limit` rows. Only tasks whose required capabilities are a subset of
 * the agent's and whose max cost fits its remaining budget are candidates; an
 * agent whose budget is spent claims nothing.
 *
 * Why the filters are written this way: the plan must walk the index and stop
 * early. If the planner believes fewer than `limit` READY rows pass the filters,
 * it prefers to scan them all and sort — 27–30 ms per claim of 200 at 18k READY
 * instead of 0.2 ms (EXPLAIN ANALYZE, docs/benchmarks.md). So the capabilities
 * arrive as a bound parameter (checked once against the agent's registered ones),
 * "needs nothing" is tested as `= '{}'` (estimated from the column's most common
 * values, where `<@` on empty arrays got a default 0.5 % guess), and "no cost
 * limit" as `is null` (estimated from the null fraction, where `coalesce(…) <=`
 * got a default third). Measured fast at 0 %, 10 % and 90 % capability skew.
 * Each claim bumps the fencing token and starts the claim lease.
 */
export async function taskClaimReady(
  db: Db, agentId: string, capabilities: readonly string[], limit: number, claimTtlSec: number, dagId?: string,
): Promise<ClaimedRow[]> {
  const rows = await rowsOf<Omit<ClaimedRow, 'leaseExpiresAt'> & { leaseExpiresAt: string }>(
    db, taskClaimReadySql(agentId, capabilities, limit, claimTtlSec, dagId),
  );
  return rows.map((r) => ({ ...r, leaseExpiresAt: dateOf(r.leaseExpiresAt)! }));
}

/** The claim statement itself, exposed so it can be EXPLAINed as it runs. */
export function taskClaimReadySql(agentId: string, capabilities: readonly string[], limit: number, claimTtlSec: number, dagId?: string): SQL {
  const caps = textArray(capabilities);
  return sql`
    with agent as materialized (
      select capabilities, coalesce(budget_usd - spent_usd, 'Infinity'::numeric) as remaining
      from agents where id = ${agentId} and status = 'active'
    ),
    candidates as (
      select t.id
      from tasks t
      where t.status = ${fromStates('claim')[0]}
        and ${caps} <@ (select capabilities from agent)
        and (t.required_capabilities = '{}' or t.required_capabilities <@ ${caps})
        and (select remaining from agent) > 0
        and (t.max_cost_usd is null or t.max_cost_usd <= (select remaining from agent))
        ${dagId ? sql`and t.dag_id = ${dagId}` : sql``}
      order by t.effective_priority, t.ready_at, t.id
      limit ${limit}
      for update of t skip locked
    )
    update tasks t set
      status = 'claimed',
      claimed_by = ${agentId},
      claimed_at = now(),
      started_at = null,
      heartbeat_at = null,
      progress = null,
      progress_message = null,
      fence = t.fence + 1,
      attempts = t.attempts + 1,
      lease_expires_at = now() + make_interval(secs => ${claimTtlSec}),
      updated_at = now()
    from candidates c
    where t.id = c.id
    returning
      t.id, t.dag_id as "dagId", t.key, t.type, t.title, t.spec, t.fence, t.attempts as "attempt",
      t.max_attempts as "maxAttempts", t.max_duration_sec as "maxDurationSec", t.heartbeat_sec as "heartbeatSec", t.max_cost_usd::float8 as "maxCostUsd",
      t.output_spec as "outputSpec", t.lease_expires_at as "leaseExpiresAt",
      case when cardinality(t.context_keys) = 0 then '{}'::jsonb else (
        select coalesce(jsonb_object_agg(u.key, u.output), '{}'::jsonb)
        from tasks u where u.dag_id = t.dag_id and u.key = any(t.context_keys)
      ) end as "upstreamOutputs",
      -- Behind a flag: an unconditional lookup per claimed row cost ~7 % of flat throughput.
      case when not t.has_children then '{}'::jsonb else (
        select coalesce(jsonb_object_agg(substr(c.key, length(t.key) + 2), c.output), '{}'::jsonb)
        from tasks c where c.parent_id = t.id and c.status = 'completed'
      ) end as "childOutputs"`;
}

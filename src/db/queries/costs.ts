import { sql } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { rowsOf, tenantScopeSql, textArray } from '../statement.js';

/** Each read takes `tenants`: only their spend (a token scoped to them); null: every tenant's. */
type Tenants = readonly string[] | null;

export interface SpendDay { day: string; costUsd: number; attempts: number }
/** An agent's spend; null figures: shown to a token scoped to tenants, of an agent that also serves others. */
export interface SpendAgent { id: string; budgetUsd: number | null; spentUsd: number | null; reservedUsd: number | null; remainingUsd: number | null }
export interface SpendDag { id: string; name: string; status: string; budgetUsd: number | null; spentUsd: number; reservedUsd: number; remainingUsd: number | null }

/** Spend per UTC day over the last `days` days, from the attempts that reported it. */
export function spendByDay(db: Db, days: number, tenants: Tenants = null): Promise<SpendDay[]> {
  return rowsOf<SpendDay>(db, sql`
    select to_char(date_trunc('day', ended_at at time zone 'UTC'), 'YYYY-MM-DD') as day,
           sum(cost_usd)::float8 as "costUsd", count(*)::int as attempts
    from attempts where ended_at >= date_trunc('day', now() at time zone 'UTC') at time zone 'UTC' - make_interval(days => ${days - 1})
      ${tenantScopeSql(sql`dag_id`, tenants)}
    group by 1 order by 1`);
}

/** Every agent's budget, what it spent, what its current claims reserve, and what is left (scoped: the agents that may serve the tenants). */
export function spendByAgent(db: Db, tenants: Tenants = null): Promise<SpendAgent[]> {
  // Scoped: an agent that also serves other tenants (servesBeyond) spent partly for them; its figures are not shown.
  const mine = tenants ? sql`(tenants is not null and tenants <@ ${textArray(tenants)})` : sql`true`;
  return rowsOf<SpendAgent>(db, sql`
    select id, budget_usd::float8 as "budgetUsd", case when ${mine} then spent_usd::float8 end as "spentUsd",
           case when ${mine} then reserved_usd::float8 end as "reservedUsd",
           case when ${mine} then (budget_usd - spent_usd - reserved_usd)::float8 end as "remainingUsd"
    from agents ${tenants ? sql`where tenants is null or tenants && ${textArray(tenants)}` : sql``} order by case when ${mine} then spent_usd end desc nulls last, id`);
}

/** The DAGs that spent or reserved anything, or have a ceiling, most spent first, with what their budget has left. */
export function spendByDag(db: Db, limit: number, tenants: Tenants = null): Promise<SpendDag[]> {
  return rowsOf<SpendDag>(db, sql`
    select id, name, status, budget_usd::float8 as "budgetUsd", spent_usd::float8 as "spentUsd", reserved_usd::float8 as "reservedUsd",
           (budget_usd - spent_usd - reserved_usd)::float8 as "remainingUsd"
    from dags where (spent_usd > 0 or reserved_usd > 0 or budget_usd is not null) ${tenants ? sql`and tenant_id = any(${textArray(tenants)})` : sql``}
    order by spent_usd desc, created_at desc limit ${limit}`);
}

export interface SpendRunning { taskId: string; dagId: string; key: string; agentId: string | null; fence: number; spentUsd: number; reservedUsd: number; maxCostUsd: number | null }
/** A stop at a limit: in USD, or in tokens for task.max_tokens (the other pair null). */
export interface SpendStop {
  at: string; taskId: string; key: string; dagId: string; agentId: string | null; limit: string | null;
  limitUsd: number | null; spentUsd: number | null; limitTokens: number | null; spentTokens: number | null;
}

/**
 * Attempts running now, with what each has reported so far (charged as reported) beside what its claim still
 * reserves and its max_cost_usd: the attempts that spent or may spend, most spent first.
 */
export function spendRunning(db: Db, limit: number, tenants: Tenants = null): Promise<SpendRunning[]> {
  return rowsOf<SpendRunning>(db, sql`
    select t.id as "taskId", t.dag_id as "dagId", t.key, t.claimed_by as "agentId", t.fence,
      (case when t.usage_fence is not distinct from t.fence then t.attempt_cost_usd else 0 end)::float8 as "spentUsd",
      t.reserved_usd::float8 as "reservedUsd", t.max_cost_usd::float8 as "maxCostUsd"
    from tasks t
    where t.status in ('claimed', 'running') and (t.reserved_usd > 0 or t.max_cost_usd is not null or t.usage_fence = t.fence)
      ${tenants ? sql`and t.tenant_id = any(${textArray(tenants)})` : sql``}
    order by 6 desc, t.claimed_at limit ${limit}`);
}

/** The attempts a spend limit stopped over the last `days` UTC days, newest first: which limit, at what spend. */
export function spendStops(db: Db, days: number, limit: number, tenants: Tenants = null): Promise<SpendStop[]> {
  return rowsOf<SpendStop>(db, sql`
    select to_char(a.ended_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as at, a.task_id as "taskId", t.key, a.dag_id as "dagId",
      a.agent_id as "agentId", a.details->'budget'->>'limit' as limit, (a.details->'budget'->>'limitUsd')::float8 as "limitUsd",
      (a.details->'budget'->>'spentUsd')::float8 as "spentUsd", (a.details->'budget'->>'limitTokens')::float8 as "limitTokens",
      (a.details->'budget'->>'spentTokens')::float8 as "spentTokens"
    from attempts a join tasks t on t.id = a.task_id
    where a.error_class = 'budget_exceeded' and a.ended_at >= date_trunc('day', now() at time zone 'UTC') at time zone 'UTC' - make_interval(days => ${days - 1})
      ${tenants ? sql`and t.tenant_id = any(${textArray(tenants)})` : sql``}
    order by a.ended_at desc limit ${limit}`);
}

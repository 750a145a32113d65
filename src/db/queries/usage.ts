import { sql, type SQL } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { USAGE_DEFAULTS } from '../../config/index.js';
import { fromStates } from '../../model/state-machine.js';
import { rowsOf, tenantScopeSql, textArray } from '../statement.js';
import { AFTER_AGENT_LOCK, agentLockCte, spendSettleAgentSet, spendSettleDagSet, spendTodaySql } from './spend.js';
import { taskHeldSql, taskStandingOf, taskStandingSql, type TaskStanding } from './task-hold.js';

/**
 * Usage reported while an attempt runs (ctx.reportCost, POST /api/tasks/:id/usage): written and charged when it is
 * reported, not when the attempt ends, so a crash keeps it. The statement that ends the attempt records the attempt's
 * reported usage on its attempts row (tasks.attempt_cost_usd while usage_fence = fence: usageOfAttemptSql) and
 * charges only what its own report adds.
 */

/** One usage report of an attempt. */
export interface UsageInput {
  taskId: string;
  fence: number;
  /** The reporter's id for this report: sent again after a lost reply, it is applied once. */
  reportKey: string;
  tokenId?: string | null;
  model?: string | null;
  /** Null: cost unknown (the reporter has no price for the model): kept as such, charged as 0 to the budgets. */
  costUsd: number | null;
  tokensIn: number;
  tokensOut: number;
  cachedReadTokens: number;
  cacheWriteTokens: number;
}

/**
 * What the report statement saw: `refused` (the fence no longer holds the task, or its lease lapsed: nothing
 * written; the task as it stands, to say why), or `charged` (`applied` false: this report key was applied before)
 * with the attempt's reported usage after it and the limits it is held to.
 */
export type UsageReportResult = UsageRefused | ({ kind: 'charged'; applied: boolean; dagId: string; agentId: string | null } & UsageLimits);

export interface UsageRefused { kind: 'refused'; task: TaskStanding }

/** An attempt's usage and the limits it is held to (null: no such limit). */
export interface UsageLimits {
  attemptCostUsd: number; attemptTokensIn: number; attemptTokensOut: number;
  /** The task's max_cost_usd and max_tokens, per attempt. */
  maxCostUsd: number | null; maxTokens: number | null;
  /** The DAG's budget and spend (spend counts every attempt's reported usage), its daily cap and today's spend (UTC). */
  dagBudgetUsd: number | null; dagSpentUsd: number; dagDailyUsd: number | null; dagTodayUsd: number;
  agentBudgetUsd: number | null; agentSpentUsd: number; agentDailyUsd: number | null; agentTodayUsd: number;
  /** The budget the reporting token's grant allows its agent (held against the agent's spend). */
  grantBudgetUsd: number | null;
  /** The DAG's share of a limit past which the answer says low (null: the default). */
  lowAt: number | null;
}

/**
 * The attempt's usage reported so far, as the statements that end it read it from the task row `alias`: what
 * usage_reports charged under the row's current fence, else nothing.
 */
export function usageOfAttemptSql(alias: string) {
  const t = sql.raw(alias);
  const current = sql`${t}.usage_fence is not distinct from ${t}.fence`;
  return {
    cost: sql`(case when ${current} then ${t}.attempt_cost_usd else 0 end)`,
    tokensIn: sql`(case when ${current} then ${t}.attempt_tokens_in else 0 end)`,
    tokensOut: sql`(case when ${current} then ${t}.attempt_tokens_out else 0 end)`,
  };
}

/** The limits' columns, from a DAG row `g`, an agent row `a` and a token row `k` (each may be null). */
function limitColumnsSql(): SQL {
  return sql`g.budget_usd::float8 as dag_budget, g.spent_usd::float8 as dag_spent, g.daily_budget_usd::float8 as dag_daily,
      ${spendTodaySql('g')}::float8 as dag_today, g.budget_low_at::float8 as low_at,
      a.budget_usd::float8 as agent_budget, a.spent_usd::float8 as agent_spent, a.daily_budget_usd::float8 as agent_daily,
      ${spendTodaySql('a')}::float8 as agent_today, k.grant_budget_usd::float8 as grant_budget`;
}

function limitsOf(row: Record<string, unknown>): UsageLimits {
  const num = (v: unknown) => (v == null ? null : Number(v));
  return {
    attemptCostUsd: Number(row.attempt_cost), attemptTokensIn: Number(row.attempt_in), attemptTokensOut: Number(row.attempt_out),
    maxCostUsd: num(row.max_cost), maxTokens: num(row.max_tokens),
    dagBudgetUsd: num(row.dag_budget), dagSpentUsd: Number(row.dag_spent ?? 0), dagDailyUsd: num(row.dag_daily), dagTodayUsd: Number(row.dag_today ?? 0),
    agentBudgetUsd: num(row.agent_budget), agentSpentUsd: Number(row.agent_spent ?? 0), agentDailyUsd: num(row.agent_daily), agentTodayUsd: Number(row.agent_today ?? 0),
    grantBudgetUsd: num(row.grant_budget), lowAt: num(row.low_at),
  };
}

/**
 * Report usage in ONE statement: fenced as a heartbeat is (id, fence, a state that may heartbeat), a lapsed lease
 * included (the money was spent; the reaper has not ended the attempt yet). The task row is locked first (as the statements that end an attempt lock it: docs/architecture.md, Lock
 * order), then its agent, then its DAG. The ledger row's unique key (task, fence, report key) decides whether this
 * report was applied before: only a row inserted now charges, so a report sent twice (at the same moment too) is
 * charged once. Charged: the task's cost and its attempt's running usage; the DAG's and the agent's spend (and
 * today's), with the part the claim had reserved moved from reserved to spent (the budget's room, budget − spent −
 * reserved, is unchanged by spend within the reservation). A cost unknown (null) is kept so in the ledger and
 * charged as 0; its tokens count.
 */
export async function usageReport(db: Db, u: UsageInput): Promise<UsageReportResult> {
  const cost = sql`${u.costUsd ?? 0}::numeric`;
  const tokensIn = sql`${u.tokensIn}::bigint`;
  const tokensOut = sql`${u.tokensOut}::bigint`;
  const before = usageOfAttemptSql('t');
  const [r] = await rowsOf<Record<string, unknown>>(db, sql`
    with holder as (
      select t.id, t.dag_id, t.claimed_by, t.attempts, t.fence, t.reserved_usd, t.max_cost_usd, t.max_tokens,
        ${before.cost} as cost_before, ${before.tokensIn} as in_before, ${before.tokensOut} as out_before
      from tasks t
      -- Not the lease: a holder whose lease lapsed (stopped, partitioned) spent what it reports all the same, and until
      -- the reaper ends the attempt its usage is charged with it. Once the attempt ended, the fence no longer matches.
      where t.id = ${u.taskId} and t.fence = ${u.fence} and t.status = any(${textArray(fromStates('heartbeat'))})
      for no key update of t
    ), ledger as (
      insert into usage_reports (task_id, fence, attempt, dag_id, agent_id, token_id, report_key, model, cost_usd, tokens_in,
        tokens_out, cached_read_tokens, cache_write_tokens)
      select h.id, h.fence, h.attempts, h.dag_id, h.claimed_by, ${u.tokenId ?? null}::text, ${u.reportKey}, ${u.model ?? null}::text,
        ${u.costUsd}::numeric, ${tokensIn}, ${tokensOut}, ${u.cachedReadTokens}::bigint, ${u.cacheWriteTokens}::bigint
      from holder h
      on conflict (task_id, fence, report_key) do nothing
      returning task_id
    ), charge as (
      select h.*, least(${cost}, h.reserved_usd) as from_reserve from holder h where exists (select 1 from ledger)
    ), task_charged as (
      update tasks t set
        cost_usd = t.cost_usd + ${cost}, tokens_in = t.tokens_in + ${tokensIn}, tokens_out = t.tokens_out + ${tokensOut},
        reserved_usd = c.reserved_usd - c.from_reserve,
        usage_fence = c.fence, attempt_cost_usd = c.cost_before + ${cost},
        attempt_tokens_in = c.in_before + ${tokensIn}, attempt_tokens_out = c.out_before + ${tokensOut}
      from charge c where t.id = c.id
    ),
    ${agentLockCte(sql`select claimed_by from charge`)},
    agent_charged as (
      update agents a set ${spendSettleAgentSet(cost, sql`c.from_reserve`)}
      from charge c where a.id = c.claimed_by and ${AFTER_AGENT_LOCK}
      returning a.*
    ),
    dag_charged as (
      update dags g set ${spendSettleDagSet(cost, sql`c.from_reserve`)}
      from charge c where g.id = c.dag_id and ${AFTER_AGENT_LOCK}
      returning g.*
    ),
    -- The rows as this statement left them: a CTE's update is not seen by the statement's other reads.
    dag_now as (
      select * from dag_charged
      union all select g.* from dags g join holder h on g.id = h.dag_id where not exists (select 1 from dag_charged)
    ),
    agent_now as (
      select * from agent_charged
      union all select a.* from agents a join holder h on a.id = h.claimed_by where not exists (select 1 from agent_charged)
    )
    select exists (select 1 from holder) as held, exists (select 1 from ledger) as applied,
      h.dag_id, h.claimed_by, h.max_cost_usd::float8 as max_cost, h.max_tokens,
      (h.cost_before + case when exists (select 1 from ledger) then ${cost} else 0 end)::float8 as attempt_cost,
      (h.in_before + case when exists (select 1 from ledger) then ${tokensIn} else 0 end)::float8 as attempt_in,
      (h.out_before + case when exists (select 1 from ledger) then ${tokensOut} else 0 end)::float8 as attempt_out,
      ${limitColumnsSql()},
      ${taskStandingSql(u.taskId)}
    from (select 1) one left join holder h on true left join dag_now g on true left join agent_now a on true
      left join api_tokens k on k.id = ${u.tokenId ?? null}::text`);
  const row = r!;
  if (!row.held) return { kind: 'refused', task: taskStandingOf(row) };
  return { kind: 'charged', applied: row.applied === true, dagId: row.dag_id as string, agentId: row.claimed_by as string | null, ...limitsOf(row) };
}

/** Where the holder of `fence` stands against its limits now (usageReport's figures, nothing written); refused as a report is. */
export async function usageBudgetGet(db: Db, taskId: string, fence: number, tokenId: string | null = null): Promise<UsageRefused | ({ kind: 'held' } & UsageLimits)> {
  const before = usageOfAttemptSql('t');
  const [r] = await rowsOf<Record<string, unknown>>(db, sql`
    select t.status, t.fence as fence_now, t.lease_expires_at <= now() as lapsed, ${taskHeldSql('t', fence)} as held,
      t.max_cost_usd::float8 as max_cost, t.max_tokens,
      ${before.cost}::float8 as attempt_cost, ${before.tokensIn}::float8 as attempt_in, ${before.tokensOut}::float8 as attempt_out,
      ${limitColumnsSql()}
    from (select 1) one left join tasks t on t.id = ${taskId} left join dags g on g.id = t.dag_id left join agents a on a.id = t.claimed_by
      left join api_tokens k on k.id = ${tokenId}::text`);
  const row = r!;
  if (row.held !== true) return { kind: 'refused', task: taskStandingOf(row) };
  return { kind: 'held', ...limitsOf(row) };
}

/** The ledger's figures for one model (usageByModel). */
export interface UsageOfModel {
  /** The model the reports named; '' for reports that named none. */
  model: string;
  /** What the reports of known cost add up to: reports of unknown cost count in `unpricedReports`, not here. */
  costUsd: number;
  tokensIn: number;
  tokensOut: number;
  reports: number;
  /** Reports whose cost the reporter did not know (cost_usd null: the model's price was unknown to it). */
  unpricedReports: number;
}

/**
 * What the ledger holds, by model: the spend and tokens reported while attempts ran (a model never named is ''), and
 * how many reports did not know their cost. The ledger keeps a task's reports as long as the task (retention), so
 * this is the spend of the tasks kept, not of all time; one scan of usage_reports a metrics scrape.
 */
export function usageByModel(db: Db, top = USAGE_DEFAULTS.modelsShown, tenants: readonly string[] | null = null): Promise<UsageOfModel[]> {
  // The `top` models by reports, by name; the rest summed as USAGE_OTHER_MODELS (an agent registered for any model
  // names what it likes: a metrics label each would grow without bound).
  return rowsOf(db, sql`
    with by_model as (
      select coalesce(model, '') as model, coalesce(sum(cost_usd), 0) as usd, sum(tokens_in) as tin, sum(tokens_out) as tout,
        count(*) as reports, count(*) filter (where cost_usd is null) as unpriced
      from usage_reports where true ${tenantScopeSql(sql`dag_id`, tenants)} group by 1
    ), ranked as (
      select b.*, row_number() over (order by reports desc, model) <= ${top} as shown from by_model b
    )
    select case when shown then model else ${USAGE_OTHER_MODELS} end as model, sum(usd)::float8 as "costUsd",
      sum(tin)::float8 as "tokensIn", sum(tout)::float8 as "tokensOut", sum(reports)::int as reports, sum(unpriced)::int as "unpricedReports"
    from ranked group by 1 order by 1`);
}

/** The label the models past USAGE_DEFAULTS.modelsShown are summed under: no model name can be it (MODEL_PATTERN). */
export const USAGE_OTHER_MODELS = '(other models)';

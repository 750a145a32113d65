import { sql, type SQL } from 'drizzle-orm';
import type { AttemptSpend } from '../rows.js';

/**
 * Spend, in one place: the statements' parts that move money on DAGs and agents. The invariant they keep:
 *
 * - `reserved_usd` of a DAG (of an agent) is what the attempts it holds may still cost: the sum of the
 *   `max_cost_usd` each held task reserved when it was claimed (the task row's own `reserved_usd`);
 * - `spent_usd` is what the attempts that ended reported (an attempts row's `cost_usd`);
 * - so a budget's room is `budget − spent − reserved` (spendRemainingSql), and a claim never reserves past it.
 *
 * Three moves, each written here once:
 * - reserve (the claim, tasks-claim.ts): spendReserveDagCte and spendReserveAgentSet;
 * - settle (an attempt ends: complete, fail, release, a rate limit, an output submitted for validation, a wait
 *   for subtasks): the reported cost is charged and the reservation released (spendSettleCtes, or, in the batch
 *   completion that also counts the DAG down, spendSettleDagSet / spendSettleAgentSet);
 * - release (cancel, tasks-cancel.ts): the reservation goes back and nothing is charged (spendReleaseCtes).
 *
 * Lock order (docs/architecture.md): agent rows, by id, before DAG rows, by id. The claim locks its agent first and
 * reserves against the DAG after; a statement that moves spend on both must take them in the same order, or a claim
 * and a completion of the same agent deadlock. `agentLockCte` is a CTE `agent_lock` that locks the agents `ids` (a
 * subquery) in id order; AFTER_AGENT_LOCK goes into the WHERE of every part that then locks a DAG: an uncorrelated
 * scalar subquery, which PostgreSQL runs once (an InitPlan) before that part's scan starts. The locks are FOR NO KEY
 * UPDATE, what an UPDATE takes: they do not conflict with the KEY SHARE locks that inserting a row referencing the
 * DAG takes (a spawn, a submission).
 */

export function agentLockCte(ids: SQL): SQL {
  return sql`agent_lock as materialized (select a.id from agents a where a.id in (${ids}) order by a.id for no key update of a)`;
}
export const AFTER_AGENT_LOCK = sql`(select count(*) from agent_lock) >= 0`;

/** An attempt's reported spend as typed SQL values: Postgres would otherwise infer `$n > 0` as integer and refuse a fractional cost. */
export function spendSql(s: AttemptSpend): { cost: SQL; tokensIn: SQL; tokensOut: SQL } {
  return { cost: sql`${s.costUsd ?? 0}::numeric`, tokensIn: sql`${s.tokensIn ?? 0}::bigint`, tokensOut: sql`${s.tokensOut ?? 0}::bigint` };
}

/** What is left of a budget: of the row `alias` (a DAG or an agent), against `budget` (default its own budget_usd). Null: no budget. */
export function spendRemainingSql(alias: string, budget?: SQL): SQL {
  const a = sql.raw(alias);
  return sql`(${budget ?? sql`${a}.budget_usd`} - ${a}.spent_usd - ${a}.reserved_usd)`;
}

/**
 * Reserve: CTE `dag_reserved`, the DAGs whose budget took `amounts` (a subquery of `dag_id, amount`): each DAG's
 * reservation grows only while spent + reserved + amount stays within its budget, which PostgreSQL re-checks on
 * the latest row version when claimers race. Returns the ids of the DAGs that reserved.
 */
export function spendReserveDagCte(amounts: SQL): SQL {
  return sql`dag_reserved as (
      update dags g set reserved_usd = g.reserved_usd + f.amount
      from (${amounts}) f
      where g.id = f.dag_id and (g.budget_usd is null or g.spent_usd + g.reserved_usd + f.amount <= g.budget_usd)
      returning g.id
    )`;
}

/** Reserve: the SET of an agent row `a` that reserves `amount` (its own budget was checked under its row lock). */
export function spendReserveAgentSet(amount: SQL): SQL {
  return sql`reserved_usd = a.reserved_usd + ${amount}`;
}

/**
 * Settle: CTEs `agent_lock`, `dag_spend` and `agent_spend` for the attempts the CTE `source` ended (its rows carry
 * dag_id, claimed_by and reserved_usd): charge `cost` to its DAG and its agent, and release the budget its claim
 * reserved (`release`, by default the row's reserved_usd). The agent is locked before the DAG.
 */
export function spendSettleCtes(source: string, cost: SQL, release?: SQL): SQL {
  const s = sql.raw(source);
  const r = release ?? sql`${s}.reserved_usd`;
  return sql`
    ${agentLockCte(sql`select claimed_by from ${s} where ${cost} > 0 or ${r} > 0`)},
    dag_spend as (
      update dags g set ${spendSettleDagSet(cost, r)}
      from ${s} where g.id = ${s}.dag_id and (${cost} > 0 or ${r} > 0) and ${AFTER_AGENT_LOCK}
    ),
    agent_spend as (
      update agents a set ${spendSettleAgentSet(cost, r)}
      from ${s} where a.id = ${s}.claimed_by and (${cost} > 0 or ${r} > 0) and ${AFTER_AGENT_LOCK}
    )`;
}

/** Settle: the SET of a DAG row `g` charged `cost` with `reserved` released (the batch completion writes the rest of its UPDATE). */
export function spendSettleDagSet(cost: SQL, reserved: SQL): SQL {
  return sql`spent_usd = g.spent_usd + ${cost}, reserved_usd = greatest(0, g.reserved_usd - ${reserved}), ${spendDaySet('g', cost)}`;
}

/** Settle: the SET of an agent row `a` charged `cost` with `reserved` released. */
export function spendSettleAgentSet(cost: SQL, reserved: SQL): SQL {
  return sql`spent_usd = a.spent_usd + ${cost}, reserved_usd = greatest(0, a.reserved_usd - ${reserved}), ${spendDaySet('a', cost)}`;
}

/**
 * The day a daily cap counts in: the UTC date. A row's day_spent_usd is what it spent on its spend_day; a charge on
 * a later day starts the count again (spendDaySet), and a reader takes an older spend_day's figure as 0 (spendTodaySql).
 */
export const SPEND_DAY_SQL = sql`(now() at time zone 'utc')::date`;

/** The SET of the row `alias` (a DAG or an agent) that adds `cost` to its spend of today. */
export function spendDaySet(alias: string, cost: SQL): SQL {
  const a = sql.raw(alias);
  // Never back to an earlier day: a charge whose transaction began before midnight (now() is its start) but commits
  // after one of the new day's adds to the new day's count, rather than resetting it to an old one.
  return sql`day_spent_usd = case when ${a}.spend_day >= ${SPEND_DAY_SQL} then ${a}.day_spent_usd + ${cost} else ${cost} end,
    spend_day = greatest(coalesce(${a}.spend_day, ${SPEND_DAY_SQL}), ${SPEND_DAY_SQL})`;
}

/** What the row `alias` (a DAG or an agent) spent today (UTC). */
export function spendTodaySql(alias: string): SQL {
  const a = sql.raw(alias);
  return sql`(case when ${a}.spend_day = ${SPEND_DAY_SQL} then ${a}.day_spent_usd else 0 end)`;
}

/**
 * Release: CTEs `agent_lock`, `dag_released` and `agent_released` for the attempts the CTE `source` ended without
 * charging anything (a cancel): each held row's reserved_usd goes back to its DAG and its agent. `held` filters
 * `source`'s rows to those that held a reservation.
 */
export function spendReleaseCtes(source: string, held: SQL): SQL {
  const s = sql.raw(source);
  return sql`
    ${agentLockCte(sql`select claimed_by from ${s} where ${held} and reserved_usd > 0`)},
    dag_released as (
      update dags g set reserved_usd = greatest(0, g.reserved_usd - x.amount)
      from (select dag_id, sum(reserved_usd) as amount from ${s} where ${held} and reserved_usd > 0 group by dag_id) x
      where g.id = x.dag_id and ${AFTER_AGENT_LOCK}
    ),
    agent_released as (
      update agents a set reserved_usd = greatest(0, a.reserved_usd - x.amount)
      from (select claimed_by, sum(reserved_usd) as amount from ${s} where ${held} and reserved_usd > 0 group by claimed_by) x
      where a.id = x.claimed_by and ${AFTER_AGENT_LOCK}
    )`;
}

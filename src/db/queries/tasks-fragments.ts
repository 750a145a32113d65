import { sql, type SQL } from 'drizzle-orm';
import { LEASE_DEFAULTS } from '../../config/index.js';
import { readyNotifySql } from './ready-hint.js';

/** SQL fragments the task statements share: the READY hint, an attempt's spend and its settlement, the heartbeat lease. */

/** Statement fragment: the READY hint, one NOTIFY per claim group of the CTE `source(status, cap_key)`'s READY rows (ready-hint.ts). */
export function notifyIfReady(source: SQL): SQL {
  return readyNotifySql(source);
}

/** What an attempt reported spending: recorded on its attempts row and charged, however it ended. */
export interface SpentSoFar { costUsd?: number; tokensIn?: number; tokensOut?: number; model?: string | null }

/** The spend as typed SQL values: Postgres would otherwise infer `$n > 0` as integer and refuse a fractional cost. */
export function spentSql(s: SpentSoFar): { cost: SQL; tokensIn: SQL; tokensOut: SQL } {
  return { cost: sql`${s.costUsd ?? 0}::numeric`, tokensIn: sql`${s.tokensIn ?? 0}::bigint`, tokensOut: sql`${s.tokensOut ?? 0}::bigint` };
}

/**
 * The lock order (docs/architecture.md): agent rows, by id, before DAG rows, by id.
 * The claim locks its agent first and reserves against the DAG after; a statement
 * that settles spend on both must take them in the same order, or a claim and a
 * completion of the same agent deadlock. `agentLockCte` is a CTE `agent_lock` that
 * locks the agents `ids` (a subquery) in id order; `AFTER_AGENT_LOCK` goes into the
 * WHERE of every part that then locks a DAG: an uncorrelated scalar subquery, which
 * PostgreSQL runs once (an InitPlan) before that part's scan starts. The locks are
 * FOR NO KEY UPDATE, what an UPDATE takes: they do not conflict with the KEY SHARE locks
 * that inserting a row referencing the DAG takes (a spawn, a submission).
 */
export function agentLockCte(ids: SQL): SQL {
  return sql`agent_lock as materialized (select a.id from agents a where a.id in (${ids}) order by a.id for no key update of a)`;
}
export const AFTER_AGENT_LOCK = sql`(select count(*) from agent_lock) >= 0`;

/**
 * CTEs `dag_spend` and `agent_spend`: settle the attempt the CTE `source` ended.
 * Charge `cost` to its DAG and its agent, and release the budget its claim reserved:
 * `release`, by default the row's `reserved_usd`. The agent is locked before the DAG.
 */
export function spendChargeCtes(source: string, cost: SQL, release?: SQL): SQL {
  const s = sql.raw(source);
  const r = release ?? sql`${s}.reserved_usd`;
  return sql`
    ${agentLockCte(sql`select claimed_by from ${s} where ${cost} > 0 or ${r} > 0`)},
    dag_spend as (
      update dags g set spent_usd = g.spent_usd + ${cost}, reserved_usd = greatest(0, g.reserved_usd - ${r})
      from ${s} where g.id = ${s}.dag_id and (${cost} > 0 or ${r} > 0) and ${AFTER_AGENT_LOCK}
    ),
    agent_spend as (
      update agents a set spent_usd = a.spent_usd + ${cost}, reserved_usd = greatest(0, a.reserved_usd - ${r})
      from ${s} where a.id = ${s}.claimed_by and (${cost} > 0 or ${r} > 0) and ${AFTER_AGENT_LOCK}
    )`;
}

/**
 * The heartbeat lease: the caller's, else three of the task's heartbeat_sec,
 * else LEASE_DEFAULTS.heartbeatLeaseSec. Computed in SQL, from the row.
 */
export function leaseSql(leaseSec: number | undefined): SQL {
  return sql`make_interval(secs => coalesce(${leaseSec ?? null}::float8, heartbeat_sec * ${LEASE_DEFAULTS.beatsPerLease}, ${LEASE_DEFAULTS.heartbeatLeaseSec}))`;
}

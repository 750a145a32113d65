import { sql, type SQL } from 'drizzle-orm';
import { HELD_STATES } from '../../../model/state-machine.js';
import { sqlStateList } from '../../statement.js';
import { spendRemainingSql, spendTodaySql } from '../spend.js';
import type { ClaimShape } from './shape.js';

/**
 * CTEs `held` and `agent`: the claiming agent's row, locked (FOR UPDATE: its remaining budget and free slots are exact for this
 * statement), with what the rest of the claim reads of it: capabilities, models, budget left, free slots, the models
 * paused for the fleet, whether any rate limit is declared, how many tasks it holds and whether one of them runs alone,
 * and `stale` (a claim of this agent committed after this
 * statement's snapshot: the count of held tasks missed it). Empty when the agent is not active.
 */
export function agentCte(c: ClaimShape): SQL {
  const { v, opts, keyed } = c;
  const budget = opts.grant?.budgetUsd != null ? sql`least(budget_usd, ${v.budgetUsd}::numeric)` : sql`budget_usd`;
  const maxHeld = opts.grant?.maxHeld != null ? sql`least(max_concurrent, ${v.maxHeld}::int)` : sql`max_concurrent`;
  // A token granted tenants: those of them the row serves (all of them when the row serves every tenant).
  const tenants = opts.grant?.tenants != null
    ? sql`case when tenants is null then ${v.tenants} else array(select x from unnest(tenants) x where x = any(${v.tenants})) end as tenants`
    : sql`tenants`;
  return sql`
    -- What the agent holds, read once: how many, and whether one of them runs alone. (npm run bench --quick, alternating
    -- with the statement before run_alone on a busy machine: claim of 1 at 20,000 READY p50 0.84-1.12 ms against
    -- 1.05-1.48, flat 32 slots within the runs' spread; two more index probes for holds/alone cost claim of 1 ~0.6 ms.)
    held as materialized (
      select count(*)::int as n, coalesce(bool_or(h.run_alone), false) as alone from tasks h
      where h.claimed_by = ${v.agentId} and h.status in (${sqlStateList(HELD_STATES)})
    ),
    agent as materialized (
      select capabilities, models, ${tenants},
        -- A claim of this agent that took tasks committed after this statement's snapshot: the count below missed
        -- them. (The row FOR UPDATE returns is the latest version, read again after the wait; a plain read would not be.)
        claim_writer is not null and claim_writer is distinct from pg_current_xact_id_if_assigned()
          and not pg_visible_in_snapshot(claim_writer, pg_current_snapshot()) as stale,
        -- Its budget's room and its daily cap's (what it spent today and holds reserved), the smaller (least skips a null).
        case when ${budget} is null and daily_budget_usd is null then null
             else least(${spendRemainingSql('agents', budget)}, daily_budget_usd - ${spendTodaySql('agents')} - reserved_usd) end as remaining,
        ${maxHeld} - (select n from held) as slots,
        -- It holds a task that runs alone (tasks.run_alone, after a shared crash): it claims nothing beside it; and
        -- whether it holds anything (only an agent that holds nothing takes a task that runs alone).
        (select alone from held) as alone, (select n from held) > 0 as holds,
        -- Models (or providers) paused for the fleet after a provider's rate limit (model_pauses: a few rows, usually
        -- none), and in the full statement the declared limits with nothing left in their window.
        (select coalesce(array_agg(p.model), '{}') from model_pauses p where p.until > clock_timestamp())
          ${keyed ? sql`|| array(select r.key from rate_room r where r.requests_left <= 0 or r.tokens_left <= 0)` : sql``} as paused,
        -- Any declared rate limit: the short statement then leaves tasks that name models to the full one.
        exists (select 1 from rate_limits) as limited
      from agents where id = ${v.agentId} and status = 'active'
      for update
    )`;
}

/**
 * The model a candidate would run on, in SQL (the full statement): the first of the attempt's models the agent has
 * that is not paused, itself or its provider, in the order modelsForAgent (engine/attempt/claim.ts) hands them out. Null
 * for a task that names no model (declared limits do not apply to it).
 */
export function rateModelSql(t: string): SQL {
  const models = sql.raw(`coalesce(${t}.spec->'models', '[]')`);
  const fallbacks = sql.raw(`coalesce(${t}.spec->'fallbackModels', '[]')`);
  return sql`(select x.m from agent a, jsonb_array_elements_text(
      case when ${sql.raw(t)}.attempts + 1 >= 3 and jsonb_array_length(${fallbacks}) > 0 then ${fallbacks} || ${models} else ${models} || ${fallbacks} end
    ) with ordinality x(m, i)
    where (x.m = any(a.models) or '*' = any(a.models)) and x.m <> all(a.paused) and split_part(x.m, '/', 1) <> all(a.paused)
    order by x.i limit 1)`;
}

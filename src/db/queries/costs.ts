import { sql } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { rowsOf } from '../statement.js';

export interface SpendDay { day: string; costUsd: number; attempts: number }
export interface SpendAgent { id: string; budgetUsd: number | null; spentUsd: number; reservedUsd: number; remainingUsd: number | null }
export interface SpendDag { id: string; name: string; status: string; budgetUsd: number | null; spentUsd: number; reservedUsd: number }

/** Spend per UTC day over the last `days` days, from the attempts that reported it. */
export function spendByDay(db: Db, days: number): Promise<SpendDay[]> {
  return rowsOf<SpendDay>(db, sql`
    select to_char(date_trunc('day', ended_at at time zone 'UTC'), 'YYYY-MM-DD') as day,
           sum(cost_usd)::float8 as "costUsd", count(*)::int as attempts
    from attempts where ended_at >= date_trunc('day', now() at time zone 'UTC') at time zone 'UTC' - make_interval(days => ${days - 1})
    group by 1 order by 1`);
}

/** Every agent's budget, what it spent, what its current claims reserve, and what is left. */
export function spendByAgent(db: Db): Promise<SpendAgent[]> {
  return rowsOf<SpendAgent>(db, sql`
    select id, budget_usd::float8 as "budgetUsd", spent_usd::float8 as "spentUsd", reserved_usd::float8 as "reservedUsd",
           (budget_usd - spent_usd - reserved_usd)::float8 as "remainingUsd"
    from agents order by spent_usd desc, id`);
}

/** The DAGs that spent or reserved anything, or have a ceiling, most spent first. */
export function spendByDag(db: Db, limit: number): Promise<SpendDag[]> {
  return rowsOf<SpendDag>(db, sql`
    select id, name, status, budget_usd::float8 as "budgetUsd", spent_usd::float8 as "spentUsd", reserved_usd::float8 as "reservedUsd"
    from dags where spent_usd > 0 or reserved_usd > 0 or budget_usd is not null
    order by spent_usd desc, created_at desc limit ${limit}`);
}

import { sql, type SQL } from 'drizzle-orm';
import { spendRemainingSql, spendReserveDagCte } from '../spend.js';
import { inOrder, type ClaimShape } from './shape.js';

/**
 * CTEs `costs`, `costed`, `fitting`, `dag_reserved` and `claimable`: the candidates that fit the budgets. Each
 * reserves its max_cost_usd against the agent's budget (its row is locked: candidates are kept while their running
 * sum fits) and its DAG's ceiling (spend.ts spendReserveDagCte: re-checked on the latest row version when claimers
 * race; a DAG whose reservation fails contributes no task to this claim).
 */
export function budgetCtes(c: ClaimShape): SQL {
  const { keyed, candidates } = c;
  return sql`
    -- The budgets' running sums, only when a candidate has a max cost: without one, every candidate fits (the
    -- agent has budget left, or groups is empty), and the two sorts, the windows and a DAG lookup per candidate
    -- would cost a claim of 200 ~0.8 ms of its ~5 (EXPLAIN ANALYZE, 200 READY; docs/benchmarks.md "Where a task's time goes").
    -- Whether any candidate has a max cost, asked once for both branches below.
    costs as materialized (select exists (select 1 from ${candidates} q where q.max_cost_usd > 0) as found),
    costed as (
      select p.id, p.dag_id, p.max_cost_usd, p.conc_key, ${keyed ? sql`p.rate_model,` : sql``}
        sum(coalesce(p.max_cost_usd, 0)) over (order by ${inOrder('p')}) as agent_sum,
        sum(coalesce(p.max_cost_usd, 0)) over (partition by p.dag_id order by ${inOrder('p')}) as dag_sum,
        case when p.max_cost_usd > 0 then (select ${spendRemainingSql('d')} from dags d where d.id = p.dag_id) end as dag_remaining
      from ${candidates} p
      where (select found from costs)
    ),
    fitting as (
      select p.id, p.dag_id, p.max_cost_usd, p.conc_key ${keyed ? sql`, p.rate_model` : sql``} from ${candidates} p
      where not (select found from costs)
      union all
      select id, dag_id, max_cost_usd, conc_key ${keyed ? sql`, rate_model` : sql``} from costed
      where ((select remaining from agent) is null or agent_sum <= (select remaining from agent))
        and (coalesce(max_cost_usd, 0) = 0 or dag_remaining is null or dag_sum <= dag_remaining)
    ),
    ${spendReserveDagCte(sql`select dag_id, sum(max_cost_usd) as amount from fitting where max_cost_usd > 0 group by dag_id`)},
    claimable as (
      select f.id, f.conc_key, coalesce(f.max_cost_usd, 0) as reserve ${keyed ? sql`, f.rate_model` : sql``} from fitting f
      where coalesce(f.max_cost_usd, 0) = 0 or f.dag_id in (select id from dag_reserved)
    )`;
}

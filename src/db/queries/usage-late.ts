import { sql } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { rowsOf } from '../statement.js';
import { AFTER_AGENT_LOCK, agentLockCte, spendSettleAgentSet, spendSettleDagSet } from './spend.js';
import type { UsageInput } from './usage.js';

/**
 * A usage report that arrives after its attempt ended: the reaper took a lapsed lease back, or the attempt was
 * stopped at a limit, while a call it had paid for was still under way. The money was spent, so it is charged
 * (usage.ts's report charges only a live attempt): written to the ledger under the ended attempt's fence, and
 * added to that attempt's row, the task's total, its DAG's and its agent's spend (and today's). Nothing is
 * reserved or released (the attempt's end settled that), and no limit stops anything (the attempt is over).
 */

/** What the late report statement saw: `none` when no attempt of `agentId` under that fence ended within `windowSec`. */
export type UsageLateResult = { kind: 'none' } | { kind: 'charged'; applied: boolean; attempt: { costUsd: number; tokensIn: number; tokensOut: number } };

/**
 * Charge a late report in ONE statement, only to an attempt of `agentId` (the reporter's agent: no one else's
 * attempt) that ended at most `windowSec` ago. Lock order as the live report's (docs/architecture.md): the task row,
 * then the agent, then the DAG. The ledger row's key (task, fence, report key) applies a report sent twice once.
 */
export async function usageReportLate(db: Db, u: UsageInput & { agentId: string; windowSec: number }): Promise<UsageLateResult> {
  const cost = sql`${u.costUsd ?? 0}::numeric`;
  const tokensIn = sql`${u.tokensIn}::bigint`;
  const tokensOut = sql`${u.tokensOut}::bigint`;
  const [r] = await rowsOf<Record<string, unknown>>(db, sql`
    with ended as (
      select a.task_id, a.fence, a.attempt, a.dag_id, a.agent_id,
        -- The model it names, only if the attempt could have used it (the one it ended on, or one its task names):
        -- a live report's is checked against the hold, a late one's here, else it is kept as none.
        case when ${u.model ?? null}::text = a.model
               or ${u.model ?? null}::text in (select jsonb_array_elements_text(coalesce(t.spec->'models', '[]') || coalesce(t.spec->'fallbackModels', '[]')))
             then ${u.model ?? null}::text end as model
      from attempts a join tasks t on t.id = a.task_id
      where a.task_id = ${u.taskId} and a.fence = ${u.fence} and a.agent_id = ${u.agentId}
        and a.ended_at > now() - make_interval(secs => ${u.windowSec})
      for no key update of t
    ), ledger as (
      insert into usage_reports (task_id, fence, attempt, dag_id, agent_id, token_id, report_key, model, cost_usd, tokens_in,
        tokens_out, cached_read_tokens, cache_write_tokens)
      select e.task_id, e.fence, e.attempt, e.dag_id, e.agent_id, ${u.tokenId ?? null}::text, ${u.reportKey}, e.model,
        ${u.costUsd}::numeric, ${tokensIn}, ${tokensOut}, ${u.cachedReadTokens}::bigint, ${u.cacheWriteTokens}::bigint
      from ended e
      on conflict (task_id, fence, report_key) do nothing
      returning task_id
    ), charge as (select e.* from ended e where exists (select 1 from ledger)),
    task_charged as (
      update tasks t set cost_usd = t.cost_usd + ${cost}, tokens_in = t.tokens_in + ${tokensIn}, tokens_out = t.tokens_out + ${tokensOut}
      from charge c where t.id = c.task_id
    ),
    attempt_charged as (
      update attempts a set cost_usd = a.cost_usd + ${cost}, tokens_in = a.tokens_in + ${tokensIn}, tokens_out = a.tokens_out + ${tokensOut}
      from charge c where a.task_id = c.task_id and a.fence = c.fence
      returning a.cost_usd::float8 as cost, a.tokens_in::float8 as tin, a.tokens_out::float8 as tout
    ),
    ${agentLockCte(sql`select agent_id from charge`)},
    agent_charged as (
      -- Settled with nothing to release: the attempt's end released its reservation.
      update agents a set ${spendSettleAgentSet(cost, sql`0`)}
      from charge c where a.id = c.agent_id and ${AFTER_AGENT_LOCK}
    ),
    dag_charged as (
      update dags g set ${spendSettleDagSet(cost, sql`0`)}
      from charge c where g.id = c.dag_id and ${AFTER_AGENT_LOCK}
    )
    select exists (select 1 from ended) as found, exists (select 1 from ledger) as applied,
      coalesce((select cost from attempt_charged), a.cost_usd::float8) as cost,
      coalesce((select tin from attempt_charged), a.tokens_in::float8) as tin,
      coalesce((select tout from attempt_charged), a.tokens_out::float8) as tout
    from (select 1) one left join attempts a on a.task_id = ${u.taskId} and a.fence = ${u.fence}`);
  const row = r!;
  if (row.found !== true) return { kind: 'none' };
  return { kind: 'charged', applied: row.applied === true, attempt: { costUsd: Number(row.cost), tokensIn: Number(row.tin), tokensOut: Number(row.tout) } };
}

import { sql, type SQL } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { priorityConstants } from '../../model/priority.js';
import { fromStates } from '../../model/state-machine.js';
import { taskDepsUnblockCtes } from './task-deps.js';
import { dateOf, queryCompile, queryFill, rowsOfPrepared, textArray, type CompiledQuery } from '../statement.js';
import { taskHandOff, type HandOffParts } from './tasks-hand-off.js';
import { readyNotifySql } from './ready-hint.js';
import { AFTER_AGENT_LOCK, agentLockCte, spendSettleAgentSet, spendSettleDagSet } from './spend.js';
import { refusedRowColumns, refusedRowOf, validationRequiredSql } from './tasks-refusal.js';
import type { ClaimedRow, CompletionInput, CompletionMode, CompletionResult, RefusedRow } from '../rows.js';
import { usageOfAttemptSql } from './usage.js';

export type { CompletionInput, CompletionMode, CompletionResult } from '../rows.js';

/**
 * Complete a batch of tasks in one statement: store outputs, record the attempts,
 * unblock dependents, settle cost on the DAG (and the agent), count the DAG down
 * and complete it at zero, and NOTIFY once per claim group that gained READY tasks. Each row is
 * guarded by its fencing token and state, so a zombie's completion changes nothing.
 * `lateUpstreams`: completed tasks that gained dependents at runtime (late_dependents),
 * whose dependents the caller recounts once this has committed.
 * `refused`: each item the statement did not complete, with what its row said (RefusedRow), so the caller
 * knows why without reading it again. It reads only the rows the UPDATE skipped: a batch that completes fully
 * pays one anti-join over the batch. (Not in the `checked` shape: its caller holds the row locked.)
 */
export async function taskCompleteMark(
  db: Db, items: CompletionInput[], opts: CompletionMode = {},
): Promise<CompletionResult & { lateUpstreams: string[]; handed: HandedRow[]; refused: Array<RefusedRow & { id: string }> }> {
  if (items.length === 0) return { completed: [], unblocked: 0, dagsCompleted: [], completedByType: {}, lateUpstreams: [], handed: [], refused: [] };
  // Prepared: one jsonb parameter carries the batch, so the text never changes and is planned once per connection.
  const [r] = await rowsOfPrepared<{
    completed: string[] | null; unblocked: number; dags_completed: string[] | null; by_type: Record<string, number> | null; late: string[] | null;
    handed?: Array<Omit<HandedRow, 'leaseExpiresAt'> & { leaseExpiresAt: string }> | null;
    refused?: Array<Omit<RefusedRow, 'runAt'> & { id: string; runAt: string | null }> | null;
  }>(db, taskCompleteMarkCompiled(items, opts));
  const handed = (r?.handed ?? []).map((h) => ({ ...h, leaseExpiresAt: dateOf(h.leaseExpiresAt)! }));
  return {
    completed: r?.completed ?? [], unblocked: r?.unblocked ?? 0, dagsCompleted: r?.dags_completed ?? [], completedByType: r?.by_type ?? {},
    lateUpstreams: r?.late ?? [], handed, refused: (r?.refused ?? []).map((x) => refusedRowOf<RefusedRow & { id: string }>(x)),
  };
}

/** A dependent handed to the completing agent (CompletionMode.handTo): as a claim returns it, less what the claimer knows. */
export type HandedRow = Omit<ClaimedRow, 'waitSec' | 'agentModels' | 'pausedModels' | 'rateModel'>;

/** The batch as the statement's one jsonb parameter. */
function completionJson(items: CompletionInput[]): string {
  return JSON.stringify(items.map((i) => ({
    id: i.id, fence: i.fence, output: i.output ?? null,
    cost_usd: i.costUsd ?? 0, tokens_in: i.tokensIn ?? 0, tokens_out: i.tokensOut ?? 0, model: i.model ?? null, details: i.details ?? null,
  })));
}

/** The completion statement itself, with its values, exposed so it can be EXPLAINed as it runs. */
export function taskCompleteMarkSql(items: CompletionInput[], opts: CompletionMode = {}): SQL {
  const h = opts.handTo;
  return completionSqlOf(sql`${completionJson(items)}`, opts, h && {
    agentId: sql`${h.agentId}`, caps: textArray(h.capabilities), max: sql`${h.max}`, claimTtlSec: sql`${h.claimTtlSec}`, start: h.start,
  });
}

/**
 * The statement's shapes, compiled once each (statement.ts queryCompile): a completion fills in its batch and hand-off.
 * Per priority constants: the unblocked dependents' effective priority is written with them (model/priority.ts),
 * and a process that changes them (priorityConfigure: tests, the makespan bench) gets new ones, a new object.
 */
const completionShapes = new WeakMap<object, Map<string, CompiledQuery>>();

/** The completion statement of `opts`'s shape, compiled once and filled with this batch and hand-off. */
export function taskCompleteMarkCompiled(items: CompletionInput[], opts: CompletionMode): CompiledQuery {
  const h = opts.checked ? undefined : opts.handTo;
  // Each part as the text tests it (completionSqlOf, taskHandOff: truthiness).
  const shape = `${Boolean(opts.checked)}:${h ? Boolean(h.start) : 'none'}`;
  const constants = priorityConstants();
  let shapes = completionShapes.get(constants);
  if (!shapes) completionShapes.set(constants, shapes = new Map());
  let c = shapes.get(shape);
  if (!c) {
    const p = (name: string) => sql`${sql.placeholder(name)}`;
    c = queryCompile(completionSqlOf(p('input'), opts, h && {
      agentId: p('agentId'), caps: sql`${sql.placeholder('caps')}::text[]`, max: p('max'), claimTtlSec: p('claimTtlSec'), start: h.start,
    }));
    shapes.set(shape, c);
  }
  return queryFill(c, {
    input: completionJson(items), agentId: h?.agentId, caps: h ? [...h.capabilities] : undefined, max: h?.max, claimTtlSec: h?.claimTtlSec,
  });
}

function completionSqlOf(input: SQL, opts: CompletionMode, handParts: Omit<HandOffParts, 'charged'> | undefined): SQL {
  const states = opts.checked ? fromStates('complete') : fromStates('complete').filter((s) => s !== 'validating');
  // The validation engine completes on behalf of others: it hands nothing on.
  const hand = opts.checked ? undefined : handParts;
  const charged = sql`select claimed_by from done where cost_usd > 0 or reserved_usd > 0`;
  return sql`
    with input as (
      select * from jsonb_to_recordset(${input}::jsonb)
        as x(id text, fence int, output jsonb, cost_usd numeric, tokens_in bigint, tokens_out bigint, model text, details jsonb)
    ),
    done as (
      update tasks t set
        status = 'completed', output = i.output, completed_at = now(), updated_at = now(),
        lease_expires_at = null, last_error = null,
        cost_usd = t.cost_usd + i.cost_usd, tokens_in = t.tokens_in + i.tokens_in, tokens_out = t.tokens_out + i.tokens_out
      from input i
      where t.id = i.id and t.fence = i.fence and t.status = any(${textArray(states)})
        ${opts.checked ? sql`` : sql`and not ${validationRequiredSql('t')}`}
      -- late_dependents comes from the row as updated, the newest version even when this statement's snapshot is older.
      returning t.id, t.dag_id, t.type, t.fence, t.attempts, t.claimed_by, t.claimed_at, t.reserved_usd, t.late_dependents, i.output, i.cost_usd, i.tokens_in, i.tokens_out, i.model, i.details,
        t.usage_fence, t.attempt_cost_usd, t.attempt_tokens_in, t.attempt_tokens_out
    ),
    recorded as (
      insert into attempts (task_id, dag_id, attempt, fence, agent_id, outcome, started_at, ended_at, duration_ms, cost_usd, tokens_in, tokens_out, model, details)
      select id, dag_id, attempts, fence, claimed_by, 'completed', claimed_at, now(),
             (extract(epoch from now() - claimed_at) * 1000)::int, cost_usd + ${usageOfAttemptSql('done').cost},
             tokens_in + ${usageOfAttemptSql('done').tokensIn}, tokens_out + ${usageOfAttemptSql('done').tokensOut}, model, details
      from done
      ${opts.checked ? sql`
      -- A VALIDATING task's attempt was recorded when its output was submitted: the verdict finishes it.
      on conflict (task_id, fence) do update set outcome = 'completed', ended_at = excluded.ended_at,
        cost_usd = attempts.cost_usd + excluded.cost_usd, tokens_in = attempts.tokens_in + excluded.tokens_in,
        tokens_out = attempts.tokens_out + excluded.tokens_out, model = coalesce(excluded.model, attempts.model),
        details = coalesce(attempts.details, '{}'::jsonb) || coalesce(excluded.details, '{}'::jsonb)` : sql``}
    ),
    -- Lock order: the agents that are charged, then the DAGs, each by id (spend.ts). With a
    -- hand-off, its CTEs lock them (and the agent it may hand to) instead.
    ${hand ? sql`` : sql`${agentLockCte(charged)},`}
    ${taskDepsUnblockCtes(sql`done`, hand ? taskHandOff({ ...hand, charged }) : undefined)},
    per_dag as (select dag_id, count(*)::int as n, sum(cost_usd) as cost, sum(reserved_usd) as reserved from done group by dag_id),
    dag_lock as materialized (
      select g.id from dags g where g.id in (select dag_id from per_dag) and ${AFTER_AGENT_LOCK} order by g.id for no key update of g
    ),
    dag_update as (
      update dags g set
        tasks_open = g.tasks_open - p.n,
        ${spendSettleDagSet(sql`p.cost`, sql`p.reserved`)},
        status = case when g.tasks_open - p.n = 0 and g.status = 'running' then 'completed' else g.status end,
        completed_at = case when g.tasks_open - p.n = 0 and g.status = 'running' then now() else g.completed_at end,
        updated_at = now()
      from per_dag p where g.id = p.dag_id and (select count(*) from dag_lock) >= 0
      returning g.id, g.status, g.tasks_open
    ),
    -- One UPDATE per agent row (a row is updated once per statement): the spend settled, and the stamp of a
    -- hand-off (claim_writer, as a claim that took tasks writes it).
    agent_spend as (
      update agents a set ${spendSettleAgentSet(sql`s.cost`, sql`s.reserved`)}
        ${hand ? sql`, claim_writer = case when s.handed then pg_current_xact_id() else a.claim_writer end` : sql``}
      from (select claimed_by, sum(cost) as cost, sum(reserved) as reserved, bool_or(handed) as handed from (
              select claimed_by, cost_usd as cost, reserved_usd as reserved, false as handed from done where cost_usd > 0 or reserved_usd > 0
              ${hand ? sql`union all select ${hand.agentId}, 0, 0, true where exists (select 1 from handed_ids)` : sql``}
            ) x group by claimed_by) s
      where a.id = s.claimed_by and ${AFTER_AGENT_LOCK}
    ),
    dag_events as (
      insert into events (type, dag_id) select 'dag.completed', id from dag_update where tasks_open = 0 and status = 'completed'
    ),
    woke as (select ${readyNotifySql(sql`unblocked`)} as n)
    ${opts.checked ? sql`` : sql`,
    -- The items the UPDATE skipped, as this statement's snapshot saw their row and the attempt under the
    -- reported fence (engine/attempt/refusal.ts turns each into its answer).
    -- The skipped items first, then each one's row and attempt by their keys (LATERAL): joined the other way round,
    -- PostgreSQL read all of attempts to join it with the batch before the anti-join left nothing (0.5 ms of a
    -- batch of 200 at 400 attempts; EXPLAIN ANALYZE), and a batch that completes fully must pay only the anti-join.
    skipped as materialized (select i.id, i.fence, i.output from input i where not exists (select 1 from done d where d.id = i.id)),
    refused as (
      select s.id, r.* from skipped s
      left join lateral (
        select ${refusedRowColumns('t', 'a', sql`s.output`)}
        from tasks t left join attempts a on a.task_id = t.id and a.fence = s.fence
        where t.id = s.id
      ) r on true
    )`}
    select
      (select array_agg(id) from done) as completed,
      (select count(*)::int from unblocked where status = 'ready') + (select n::int * 0 from woke) as unblocked,
      (select array_agg(id) from dag_update where tasks_open = 0 and status = 'completed') as dags_completed,
      (select jsonb_object_agg(type, n) from (select type, count(*)::int as n from done group by type) x) as by_type,
      (select array_agg(id) from done where late_dependents) as late
      ${hand ? sql`, (select jsonb_agg(to_jsonb(u) - 'status' - 'cap_key' - 'tenant_id' - 'handed') from unblocked u where u.handed) as handed` : sql``}
      ${opts.checked ? sql`` : sql`, (select jsonb_agg(to_jsonb(r)) from refused r) as refused`}`;
}

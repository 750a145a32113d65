import { sql } from 'drizzle-orm';
import type { Db } from '../connection.js';
import { effectivePriorityOnReadySql } from '../../model/priority.js';
import { fromStates } from '../../model/state-machine.js';
import { rowsOf, textArray } from '../statement.js';
import { readyNotifySql } from './ready-hint.js';
import { spendSettleCtes, spendSql } from './spend.js';
import type { AttemptSpend } from '../rows.js';

export interface LeasedTaskRow {
  id: string; dagId: string; key: string; priority: number; status: string; claimedBy: string | null;
  /** What its free-form subtasks inherit: who may run them, on which models. */
  requiredCapabilities: string[]; models: string[]; fallbackModels: string[];
  /** Ceilings its free-form subtasks inherit: an agent may lower them, never lift or drop them. */
  maxCostUsd: number | null; maxDurationSec: number | null; heartbeatSec: number | null;
  /** Its token estimate: a free-form subtask reserves at least as much under a declared rate limit. */
  estimatedTokens: number | null;
  /** Its concurrency key, which its subtasks share. */
  concurrency: { key: string; limit: number } | null;
}

/** Outputs of this parent's completed subtasks among `ids` (a spawn that names them again returns them). */
export async function taskChildOutputs(db: Db, parentId: string, ids: string[]): Promise<Map<string, unknown>> {
  if (ids.length === 0) return new Map();
  const rows = await rowsOf<{ id: string; output: unknown }>(db, sql`
    select id, output from tasks where parent_id = ${parentId} and status = 'completed' and id = any(${textArray(ids)})`);
  return new Map(rows.map((r) => [r.id, r.output]));
}

/** Lock a task its caller still holds (state and fencing token) and mark it a parent, for a spawn; null if the lease is gone. */
export async function taskLockLeased(db: Db, id: string, fence: number): Promise<LeasedTaskRow | null> {
  const [r] = await rowsOf<LeasedTaskRow>(db, sql`
    update tasks set has_children = true
    where id = ${id} and fence = ${fence} and status = any(${textArray(fromStates('waitForChildren'))})
    returning id, dag_id as "dagId", key, priority, status, claimed_by as "claimedBy", required_capabilities as "requiredCapabilities",
      coalesce(spec->'models', '[]'::jsonb) as models, coalesce(spec->'fallbackModels', '[]'::jsonb) as "fallbackModels",
      max_cost_usd::float8 as "maxCostUsd", max_duration_sec as "maxDurationSec", heartbeat_sec as "heartbeatSec",
      estimated_tokens as "estimatedTokens",
      case when conc_key is null then null else jsonb_build_object('key', conc_key, 'limit', conc_limit) end as concurrency`);
  return r ?? null;
}

/**
 * leased → pending until `children` more upstream tasks complete: the attempt
 * ends without counting (attempts is given back, like a release), is recorded
 * with outcome `waiting` and the cost reported so far, which is charged to the DAG and the agent.
 */
export async function taskWaitForChildren(db: Db, w: AttemptSpend & { id: string; fence: number; children: number }): Promise<boolean> {
  const { cost, tokensIn, tokensOut } = spendSql(w);
  const r = await rowsOf(db, sql`
    with waiting as (
      update tasks t set status = 'pending', deps_remaining = t.deps_remaining + ${w.children}, attempts = t.attempts - 1,
        lease_expires_at = null, ready_at = null, updated_at = now(),
        cost_usd = t.cost_usd + ${cost}, tokens_in = t.tokens_in + ${tokensIn}, tokens_out = t.tokens_out + ${tokensOut}
      where t.id = ${w.id} and t.fence = ${w.fence} and t.status = any(${textArray(fromStates('waitForChildren'))})
      returning t.*
    ),
    recorded as (
      insert into attempts (task_id, dag_id, attempt, fence, agent_id, outcome, started_at, ended_at, duration_ms, cost_usd, tokens_in, tokens_out, model)
      select id, dag_id, attempts + 1, fence, claimed_by, 'waiting', claimed_at, now(),
             (extract(epoch from now() - claimed_at) * 1000)::int, ${cost}, ${tokensIn}, ${tokensOut}, ${w.model ?? null}
      from waiting
    ),
    ${spendSettleCtes('waiting', cost)}
    select id from waiting`);
  return r.length > 0;
}

/**
 * Before runtime edges from existing tasks are added (a spawn, dagEdgesAdd), lock the unfinished ones
 * among `keys` in DAG `dagId` and mark them `late_dependents`, in the edge insert's transaction and
 * before its snapshot of the DAG is read. A completion already holding one of them is waited out, so
 * the read that follows sees it completed; one that comes later finds the mark on the row it updates,
 * even when its own snapshot predates the new edge, and recounts (taskLateDependentsRecount).
 */
export async function taskUpstreamsHold(db: Db, dagId: string, keys: string[]): Promise<void> {
  if (keys.length === 0) return;
  // Locked in id order first (the order completions and recounts take rows in), then marked.
  await db.execute(sql`
    update tasks t set late_dependents = true
    from (select id from tasks where dag_id = ${dagId} and key = any(${textArray(keys)}) and status <> 'completed' order by id for no key update) h
    where t.id = h.id and not t.late_dependents`);
}

/**
 * After the completion of tasks marked `late_dependents` has committed, recount their PENDING
 * dependents in a fresh snapshot: the completion statement counted dependents down from edges in
 * its own snapshot, which may predate an edge added while it ran. Its own transaction, like any
 * recount, so it holds no row of the completion while it waits for other upstreams.
 */
export async function taskLateDependentsRecount(db: Db, upstreamIds: string[]): Promise<number> {
  if (upstreamIds.length === 0) return 0;
  const dependents = await rowsOf<{ id: string }>(db, sql`
    select distinct downstream_id as id from edges where upstream_id = any(${textArray(upstreamIds)})`);
  return taskDepsRecount(db, dependents.map((d) => d.id));
}

/**
 * Recount the unfinished upstream tasks of PENDING tasks and unblock those left
 * with none: the repair the deps-reconciler and taskLateDependentsRecount run.
 * The row locks come first, in their own statements, so the count (a new
 * snapshot) sees every completion that held them.
 * Call it inside a transaction, so the lock lasts until the count is written.
 */
export async function taskDepsRecount(db: Db, ids: string[]): Promise<number> {
  if (ids.length === 0) return 0;
  // Wait out completions of their upstreams already in flight (they hold the upstream row), upstream rows
  // first and then the dependents, the order a completion takes them in, so the two cannot deadlock.
  await db.execute(sql`
    select u.id from edges e join tasks u on u.id = e.upstream_id
    where e.downstream_id = any(${textArray(ids)}) and u.status <> 'completed'
    order by u.id for share of u`);
  await db.execute(sql`select id from tasks where id = any(${textArray(ids)}) and status = 'pending' order by id for update`);
  const [r] = await rowsOf<{ n: number }>(db, sql`
    with counted as (
      select t.id, (
        select count(*) from edges e join tasks u on u.id = e.upstream_id
        where e.downstream_id = t.id and u.status <> 'completed'
      )::int as open
      from tasks t where t.id = any(${textArray(ids)}) and t.status = any(${textArray(fromStates('unblock'))})
    ),
    fixed as (
      update tasks t set deps_remaining = c.open,
        status = case when c.open = 0 and (t.run_at is null or t.run_at <= now()) then 'ready' else t.status end,
        ready_at = case when c.open = 0 and (t.run_at is null or t.run_at <= now()) then now() else t.ready_at end,
        ${effectivePriorityOnReadySql()},
        updated_at = now()
      from counted c where t.id = c.id and t.deps_remaining <> c.open
      returning t.status, t.cap_key
    )
    select count(*)::int as n, ${readyNotifySql(sql`fixed`)} as notified from fixed`);
  return r?.n ?? 0;
}

/**
 * PENDING tasks whose counter disagrees with their unfinished upstream tasks
 * and that nothing touched for `quietSec`: what taskDepsRecount could not
 * repair (a process that died between an edge insert and its recount). One
 * pass over the PENDING tasks, each checked through its incoming edges; run
 * it on a slow cadence.
 */
export async function taskDepsDriftList(db: Db, quietSec: number, limit: number): Promise<string[]> {
  const rows = await rowsOf<{ id: string }>(db, sql`
    select t.id from tasks t
    where t.status = 'pending' and t.updated_at < now() - make_interval(secs => ${quietSec})
      and t.deps_remaining <> (
        select count(*) from edges e join tasks u on u.id = e.upstream_id
        where e.downstream_id = t.id and u.status <> 'completed')
    limit ${limit}`);
  return rows.map((r) => r.id);
}

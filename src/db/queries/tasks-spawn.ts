import { sql } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { fromStates } from '../../model/state-machine.js';
import { rowsOf, textArray } from '../statement.js';
import { spendSettleCtes, spendSql } from './spend.js';
import type { AttemptSpend } from '../rows.js';
import { taskDepsAddSet } from './task-deps.js';
import { usageOfAttemptSql } from './usage.js';

export interface LeasedTaskRow {
  id: string; dagId: string; key: string; priority: number; status: string; claimedBy: string | null;
  /** What its free-form subtasks inherit: who may run them, on which models. */
  requiredCapabilities: string[]; models: string[]; fallbackModels: string[];
  /** Ceilings its free-form subtasks inherit: an agent may lower them, never lift or drop them. */
  maxCostUsd: number | null; maxTokens: number | null; maxDurationSec: number | null; heartbeatSec: number | null;
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
      max_cost_usd::float8 as "maxCostUsd", max_tokens::float8 as "maxTokens", max_duration_sec as "maxDurationSec", heartbeat_sec as "heartbeatSec",
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
      update tasks t set status = 'pending', ${taskDepsAddSet(sql`${w.children}`)}, attempts = t.attempts - 1,
        lease_expires_at = null, ready_at = null, updated_at = now(),
        cost_usd = t.cost_usd + ${cost}, tokens_in = t.tokens_in + ${tokensIn}, tokens_out = t.tokens_out + ${tokensOut}
      where t.id = ${w.id} and t.fence = ${w.fence} and t.status = any(${textArray(fromStates('waitForChildren'))})
      returning t.*
    ),
    recorded as (
      insert into attempts (task_id, dag_id, attempt, fence, agent_id, outcome, started_at, ended_at, duration_ms, cost_usd, tokens_in, tokens_out, model)
      select id, dag_id, attempts + 1, fence, claimed_by, 'waiting', claimed_at, now(),
             (extract(epoch from now() - claimed_at) * 1000)::int, ${cost} + ${usageOfAttemptSql('waiting').cost}, ${tokensIn} + ${usageOfAttemptSql('waiting').tokensIn}, ${tokensOut} + ${usageOfAttemptSql('waiting').tokensOut}, ${w.model ?? null}
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

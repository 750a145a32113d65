import { sql } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { fromStates } from '../../model/state-machine.js';
import { rowsOf, textArray } from '../statement.js';
import { MAP_WAIT_PREFIX } from './signals.js';
import { taskDepsAddSet } from './task-deps.js';
import { retryPolicyOf } from '../schema/column-types.js';
import type { RetryPolicy } from '../../dag/spec.js';

/** A for_each task as its children are made from it: the columns a child copies. */
export interface MapParentRow {
  id: string; dagId: string; key: string; fence: number; type: string; title: string | null;
  spec: Record<string, unknown>; requiredCapabilities: string[]; maxCostUsd: number | null; maxTokens: number | null; estimatedTokens: number | null;
  maxDurationSec: number | null; heartbeatSec: number | null; priority: number; boostPerMinute: number; estimateSec: number;
  deadline: string | null; maxAttempts: number; retryPolicy: RetryPolicy; outputSpec: Record<string, unknown> | null;
  tags: string[]; origin: string; concKey: string | null; concLimit: number | null;
}

/** WAITING for_each tasks (to map over their list, or to collect their children), oldest first; through tasks_waiting_idx. */
export function taskMapWaiting(db: Db, limit: number): Promise<Array<{ id: string; fence: number; dagId: string }>> {
  return rowsOf(db, sql`
    select id, fence, dag_id as "dagId" from tasks where status = 'waiting' and starts_with(wait_key, ${MAP_WAIT_PREFIX})
    order by updated_at limit ${limit}`);
}

/** Lock a WAITING for_each task still at `fence`; null when it moved on or another pass holds it. */
export async function taskMapLock(db: Db, id: string, fence: number): Promise<MapParentRow | null> {
  const [r] = await rowsOf<MapParentRow>(db, sql`
    update tasks set updated_at = now()
    where id = ${id} and fence = ${fence} and status = 'waiting' and starts_with(wait_key, ${MAP_WAIT_PREFIX})
      and id = (select id from tasks where id = ${id} for update skip locked)
    returning id, dag_id as "dagId", key, fence, type, title, spec, required_capabilities as "requiredCapabilities",
      max_cost_usd::float8 as "maxCostUsd", max_tokens::float8 as "maxTokens", estimated_tokens as "estimatedTokens", max_duration_sec as "maxDurationSec",
      heartbeat_sec as "heartbeatSec", priority, boost_per_minute::float8 as "boostPerMinute", estimate_sec::float8 as "estimateSec",
      deadline::text as deadline, max_attempts as "maxAttempts", retry_policy as "retryPolicy", output_spec as "outputSpec",
      tags, origin, conc_key as "concKey", conc_limit as "concLimit"`);
  return r ? { ...r, retryPolicy: retryPolicyOf(r.retryPolicy) } : null;
}

/** How many children a for_each task has, how many are not completed, and their outputs' size as JSON text. */
export async function taskMapChildrenSize(db: Db, parentId: string): Promise<{ children: number; open: number; bytes: number }> {
  const [r] = await rowsOf<{ children: number; open: number; bytes: number }>(db, sql`
    select count(*)::int as children, (count(*) filter (where status <> 'completed'))::int as open,
      coalesce(sum(octet_length(output::text)), 0)::float8 as bytes
    from tasks where parent_id = ${parentId}`);
  return r!;
}

/** A for_each task's children in item order, with their states and (once completed) outputs. */
export function taskMapChildren(db: Db, parentId: string): Promise<Array<{ id: string; status: string; output: unknown }>> {
  return rowsOf(db, sql`
    select id, status, output from tasks where parent_id = ${parentId}
    order by (spec->'input'->>'index')::int`);
}

/**
 * waiting → pending until its `children` complete (mapWait): the attempt the await trigger opened is given back,
 * as a spawn's wait gives back the parent's; when the last child completes it becomes READY, so WAITING again, to collect.
 */
export async function taskMapWait(db: Db, w: { id: string; fence: number; children: number }): Promise<boolean> {
  const r = await rowsOf(db, sql`
    update tasks set status = 'pending', ${taskDepsAddSet(sql`${w.children}`)}, attempts = attempts - 1, has_children = true,
      lease_expires_at = null, ready_at = null, updated_at = now()
    where id = ${w.id} and fence = ${w.fence} and status = any(${textArray(fromStates('mapWait'))})
    returning id`);
  return r.length > 0;
}

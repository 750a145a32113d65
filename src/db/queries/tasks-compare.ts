import { sql } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { dateOf, rowsOf } from '../statement.js';

/** A task of a DAG as `dag compare` sets it beside the same key in another DAG (engine/read/compare.ts). */
export interface TaskCompareRow {
  id: string;
  key: string;
  type: string;
  status: string;
  createdAt: Date;
  output: unknown;
  costUsd: number;
  tokensIn: number;
  tokensOut: number;
  attempts: number;
  /** Carried over by a rerun with a change: the task whose output it holds (and whose attempt's model and verdicts are given). */
  reusedFrom: string | null;
  /** Its attempts' time working, all of them; null when none ran (a carried task, one still waiting). */
  durationMs: number | null;
  /**
   * The model and the validation verdicts of its last attempt that completed or failed: the one that completed it, or
   * the failure that left it dead-lettered (a carried task's: of the task it came from).
   */
  model: string | null;
  verdicts: unknown[] | null;
  /** Usage reports of its attempts whose cost the reporter did not know. */
  unpricedReports: number;
}

/**
 * Every task of a DAG but the validation tasks (their verdicts are on the attempt they judged), with what its attempts
 * took. One statement: the attempts by their key (task_id, fence), the ledger by usage_reports_key_idx.
 */
export async function taskCompareRows(db: Db, dagId: string): Promise<TaskCompareRow[]> {
  const rows = await rowsOf<Record<string, unknown>>(db, sql`
    select t.id, t.key, t.type, t.status, t.created_at, t.output, t.cost_usd::float8 as cost_usd, t.tokens_in, t.tokens_out,
      t.attempts, t.reused_from,
      (select sum(a.duration_ms)::float8 from attempts a where a.task_id = t.id) as duration_ms,
      done.model, done.verdicts,
      (select count(*)::int from usage_reports u where u.task_id = t.id and u.cost_usd is null) as unpriced
    from tasks t
    left join lateral (
      select a.model, a.details->'verdicts' as verdicts from attempts a
      where a.task_id = coalesce(t.reused_from, t.id) and a.outcome in ('completed', 'failed')
      order by a.fence desc limit 1
    ) done on true
    where t.dag_id = ${dagId} and t.validates_id is null`);
  return rows.map((r) => ({
    id: String(r.id),
    key: String(r.key),
    type: String(r.type),
    status: String(r.status),
    createdAt: dateOf(r.created_at as string)!,
    output: r.output ?? null,
    costUsd: Number(r.cost_usd),
    tokensIn: Number(r.tokens_in),
    tokensOut: Number(r.tokens_out),
    attempts: Number(r.attempts),
    reusedFrom: (r.reused_from as string | null) ?? null,
    durationMs: r.duration_ms == null ? null : Number(r.duration_ms),
    model: (r.model as string | null) ?? null,
    verdicts: Array.isArray(r.verdicts) ? r.verdicts : null,
    unpricedReports: Number(r.unpriced),
  }));
}

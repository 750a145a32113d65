import { sql } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { dateOf, rowsOf } from '../statement.js';

/**
 * Pause `model` for the fleet for `delaySec` from now, reported by `agentId`'s attempt; the time it is paused until,
 * or null when this report paused nothing. Pauses come in runs: a report on a model not paused for `maxDelaySec`
 * begins one. Within a run, an agent's own reports extend the pause to at most `maxDelaySec` past the run's start, and
 * once it has lifted it cannot begin it again; only an agent that has not reported in this run extends it further
 * (by its own delay, at most `maxDelaySec` from now). So one agent, however often it reports, pauses a model for at
 * most `maxDelaySec`, then leaves it free for as long; n agents at most n times that.
 */
export async function modelPause(
  db: Db, p: { model: string; delaySec: number; maxDelaySec: number; reason: string; taskId: string; agentId: string },
): Promise<Date | null> {
  const [r] = await rowsOf<{ until: string; paused: boolean }>(db, sql`
    insert into model_pauses as p (model, until, reason, task_id, started_at, reporters)
    values (${p.model}, now() + make_interval(secs => ${p.delaySec}::float8), ${p.reason}, ${p.taskId}, now(), array[${p.agentId}::text])
    on conflict (model) do update set
      until = case
        when p.until <= now() - make_interval(secs => ${p.maxDelaySec}::float8) then excluded.until
        when ${p.agentId}::text = any(p.reporters) then greatest(p.until, least(excluded.until, p.started_at + make_interval(secs => ${p.maxDelaySec}::float8)))
        else greatest(p.until, excluded.until) end,
      started_at = case when p.until <= now() - make_interval(secs => ${p.maxDelaySec}::float8) then now() else p.started_at end,
      reporters = case
        when p.until <= now() - make_interval(secs => ${p.maxDelaySec}::float8) then excluded.reporters
        when ${p.agentId}::text = any(p.reporters) then p.reporters
        else (p.reporters || excluded.reporters)[1:64] end,
      reason = excluded.reason, task_id = excluded.task_id, hits = p.hits + 1
    returning until, until > now() as paused`);
  return r!.paused ? dateOf(r!.until) : null;
}

export interface ModelPauseRow { model: string; until: Date; reason: string | null; taskId: string | null; hits: number; remainingSec: number }

/** Every model with a pause on record; `remainingSec` 0 once it has lifted. */
export async function modelPauseList(db: Db): Promise<ModelPauseRow[]> {
  const rows = await rowsOf<Omit<ModelPauseRow, 'until'> & { until: string }>(db, sql`
    select model, until, reason, task_id as "taskId", hits, greatest(0, extract(epoch from until - now()))::float8 as "remainingSec"
    from model_pauses order by until desc limit 1000`);
  return rows.map((r) => ({ ...r, until: dateOf(r.until)! }));
}

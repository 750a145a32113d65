import { sql } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { dateOf, rowsOf } from '../statement.js';

/** Pause `model` for the fleet until `delaySec` from now (a later pause only extends it). */
export async function modelPause(db: Db, p: { model: string; delaySec: number; reason: string; taskId: string }): Promise<Date> {
  const [r] = await rowsOf<{ until: string }>(db, sql`
    insert into model_pauses (model, until, reason, task_id) values (${p.model}, now() + make_interval(secs => ${p.delaySec}::float8), ${p.reason}, ${p.taskId})
    on conflict (model) do update set until = greatest(model_pauses.until, excluded.until), reason = excluded.reason,
      task_id = excluded.task_id, hits = model_pauses.hits + 1
    returning until`);
  return dateOf(r!.until)!;
}

export interface ModelPauseRow { model: string; until: Date; reason: string | null; taskId: string | null; hits: number; remainingSec: number }

/** Every model with a pause on record; `remainingSec` 0 once it has lifted. */
export function modelPauseList(db: Db): Promise<ModelPauseRow[]> {
  return rowsOf<ModelPauseRow>(db, sql`
    select model, until, reason, task_id as "taskId", hits, greatest(0, extract(epoch from until - now()))::float8 as "remainingSec"
    from model_pauses order by until desc limit 1000`);
}

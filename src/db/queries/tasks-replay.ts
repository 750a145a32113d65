import { sql } from 'drizzle-orm';
import type { Db } from '../connection.js';
import { rowsOf } from '../statement.js';

/**
 * What the attempt under `fence` already reported, for telling a report made again
 * (its reply was lost, so the agent sent it once more) from a different one.
 * `sameOutput` compares as jsonb (key order and number spelling do not matter).
 */
export interface SettledAttempt {
  status: string;
  fence: number;
  /** The attempt row of that fence: its outcome and failure, if it ended. */
  outcome: string | null;
  errorClass: string | null;
  errorMessage: string | null;
  sameOutput: boolean | null;
  runAt: Date | null;
  /** The task's newest dead letter, when it is dead-lettered. */
  deadLetter: { id: string; reason: string; poisonPill: boolean } | null;
}

export async function taskAttemptSettled(db: Db, taskId: string, fence: number, output?: unknown): Promise<SettledAttempt | null> {
  const [r] = await rowsOf<SettledAttempt>(db, sql`
    select t.status, t.fence, a.outcome, a.error_class as "errorClass", a.error_message as "errorMessage", t.run_at as "runAt",
      -- A validation task's output is its verdict as the engine completed it; what its agent sent is on the attempt (details.reported).
      ${output === undefined ? sql`null::boolean` : sql`(t.output = ${JSON.stringify(output ?? null)}::jsonb or coalesce(a.details->'reported' = ${JSON.stringify(output ?? null)}::jsonb, false))`} as "sameOutput",
      (select jsonb_build_object('id', l.id, 'reason', l.reason, 'poisonPill', l.poison_pill) from dead_letters l
        where l.task_id = t.id and t.status = 'dead_lettered' order by l.created_at desc limit 1) as "deadLetter"
    from tasks t left join attempts a on a.task_id = t.id and a.fence = ${fence}
    where t.id = ${taskId}`);
  return r ?? null;
}

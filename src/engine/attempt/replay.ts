import type { Db } from '../../db/connection.js';
import { taskAttemptSettled } from '../../db/queries/tasks-replay.js';
import { ConflictError } from '../../errors.js';
import type { TaskRef } from './refusal.js';

/**
 * Reports are idempotent. An agent whose reply was lost (a dropped connection, a 503)
 * sends the same report again: the attempt under that fence has already ended, and the
 * same report is answered as before without changing anything. A different report for
 * an attempt that already ended is a 409: an attempt has one result.
 * The failure side is failureReplayed in fail.ts. These run only after the guarded statement refused a report, so the hot path pays nothing.
 */

/** True when this completion was already applied (same fence, same output); throws CONFLICT for a different result. */
export async function completionReplayed(db: Db, c: TaskRef & { output: unknown }): Promise<{ status: string } | null> {
  const s = await taskAttemptSettled(db, c.taskId, c.fence, c.output ?? null);
  if (!s || s.fence !== c.fence) return null;
  if ((s.status === 'completed' || s.status === 'validating') && s.outcome !== 'failed') {
    if (s.sameOutput) return { status: s.status };
    throw new ConflictError(`task ${c.taskId}: the attempt under fence ${c.fence} already reported a different output; an attempt has one result`, { taskId: c.taskId, fence: c.fence });
  }
  if (s.outcome === 'failed') {
    throw new ConflictError(`task ${c.taskId}: the attempt under fence ${c.fence} already failed (${s.errorClass}); it cannot also complete`, { taskId: c.taskId, fence: c.fence });
  }
  return null;
}

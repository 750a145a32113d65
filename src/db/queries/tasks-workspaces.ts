import { sql } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { dateOf, rowsOf, textArray } from '../statement.js';

/**
 * Where the attempt a worktree was made for stands (src/workspaces/reclaim.ts decides its fate from this): the
 * task's state and current fence (null: no such task, its DAG pruned), and the attempt's end as its row recorded it
 * (null while it runs, or when it ended without a row: it waits for its subtasks, say).
 */
export interface WorkspaceAttemptState {
  taskId: string;
  fence: number;
  taskStatus: string | null;
  taskFence: number | null;
  outcome: string | null;
  errorClass: string | null;
  endedAt: Date | null;
}

/** The state of each (task, fence) attempt, in one statement, whatever their number. */
export async function taskWorkspaceAttempts(db: Db, refs: ReadonlyArray<{ taskId: string; fence: number }>): Promise<WorkspaceAttemptState[]> {
  if (refs.length === 0) return [];
  const rows = await rowsOf<Omit<WorkspaceAttemptState, 'endedAt'> & { endedAt: string | Date | null }>(db, sql`
    select r.task_id as "taskId", r.fence::int as fence, t.status as "taskStatus", t.fence as "taskFence",
      a.outcome, a.error_class as "errorClass", a.ended_at as "endedAt"
    from unnest(${textArray(refs.map((r) => r.taskId))}, ${textArray(refs.map((r) => String(r.fence)))}::int[]) as r(task_id, fence)
    left join tasks t on t.id = r.task_id
    left join attempts a on a.task_id = r.task_id and a.fence = r.fence`);
  return rows.map((r) => ({ ...r, endedAt: dateOf(r.endedAt) }));
}

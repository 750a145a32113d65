import type { Db } from '../../db/handle.js';
import { taskLeaseExtend, taskStartMark } from '../../db/queries/tasks-lifecycle.js';
import { refusalExplain, type TaskRef } from './refusal.js';

/**
 * An attempt's lease while its agent holds the task: start it, keep it. Every call presents the fencing token;
 * a stale one is LEASE_LOST.
 */

/** claimed → running; the heartbeat lease starts (default: three of the task's heartbeat_sec, else 60 s). */
export async function taskStart(db: Db, ref: TaskRef, leaseSec?: number): Promise<Date> {
  return (await taskStartMark(db, ref.taskId, ref.fence, leaseSec)) ?? refusalExplain(db, ref, 'start');
}

/** Extend the lease and record progress. Throws LeaseLostError if the caller no longer holds the task. */
export async function taskHeartbeat(
  db: Db, ref: TaskRef & { progress?: number; message?: string; leaseSec?: number },
): Promise<Date> {
  // Four decimals are plenty, and a value like 1e-320 would underflow the column's real type.
  const progress = ref.progress === undefined ? undefined : Math.round(ref.progress * 10_000) / 10_000;
  const lease = await taskLeaseExtend(db, ref.taskId, ref.fence, ref.leaseSec, progress, ref.message);
  return lease ?? refusalExplain(db, ref, 'heartbeat');
}

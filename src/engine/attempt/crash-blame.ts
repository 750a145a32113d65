/**
 * Who a crash is charged to. An agent process that dies takes every task it was running
 * with it, but usually one task killed it (a poison pill that exhausts memory, crashes the
 * runtime, calls exit). Charging each of them a crash made innocent tasks poison pills after
 * two such deaths. Only evidence is charged:
 *
 * - the task was alone: its agent held no other lapsed task when it died;
 * - the task is the one common to this crash and an earlier one it was part of: none of the
 *   tasks it dies with now were there the time before (an earlier crash alone counts too);
 * - or it has already been spared CRASH_SHARED_MAX times (tasks that always run together
 *   cannot be told apart for ever).
 *
 * A task spared goes back to READY without spending an attempt (outcome `crash_shared`, with
 * the tasks it died with, which later crashes compare against).
 */
export const CRASH_SHARED_MAX = 3;

export interface CrashRecord {
  /** Charged as a crash (a failed attempt), or spared (`crash_shared`). */
  charged: boolean;
  /** The other tasks its agent was running when it died; null when not recorded. */
  with: string[] | null;
}

export function crashBlame(taskId: string, diedWith: readonly string[], history: readonly CrashRecord[]): { charged: boolean; why: string } {
  const others = diedWith.filter((id) => id !== taskId);
  if (others.length === 0) return { charged: true, why: 'it was the only task its agent was running when the agent died' };
  const spared = history.filter((h) => !h.charged).length;
  if (spared >= CRASH_SHARED_MAX) return { charged: true, why: `its agent died holding ${others.length} other task(s), and it was already spared ${spared} times` };
  const now = new Set(others);
  const alone = history.find((h) => h.with !== null && !h.with.some((id) => now.has(id)));
  if (alone) return { charged: true, why: `it is the only task common to this crash and an earlier one it was part of` };
  return { charged: false, why: `its agent died holding ${others.length} other task(s), and nothing points at this one yet: no attempt spent` };
}

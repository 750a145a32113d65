import { withTx } from '../db/tx.js';
import { eventInsertMany } from '../db/queries/events.js';
import { taskDepsDriftList, taskDepsRecount } from '../db/queries/task-deps.js';
import { serviceCreate, type MaintenanceService, type LoopIdentity, type LoopOptions } from './service.js';

export const DEPS_RECONCILER_INTERVAL_MS_DEFAULT = 60_000;
/** A task changed within this many seconds may be mid-update: it is left for the next pass. */
export const DEPS_RECONCILER_QUIET_SEC = 30;
const BATCH = 500;

export interface DepsReconcilerOptions extends LoopOptions { intervalMs?: number; quietSec?: number }

/** This loop in the registry (index.ts): its name (its lease's, in maintenance_leases) and whether one process at a time runs it. */
export const DEPS_RECONCILER_LOOP = { name: 'deps-reconciler', gated: true } as const satisfies LoopIdentity;

/**
 * The safety net under runtime edges: finds PENDING tasks whose unfinished-
 * upstream counter drifted (see taskDepsRecount) and recounts them, so a
 * dependent can never wait for ever on work that is done. Expected to find
 * nothing; every repair is logged and recorded as an event.
 */
export function depsReconcilerCreate(o: DepsReconcilerOptions): MaintenanceService {
  return serviceCreate({
    ...DEPS_RECONCILER_LOOP,
    db: o.db,
    log: o.log,
    leaseSec: o.leaseSec,
    intervalMs: o.intervalMs ?? DEPS_RECONCILER_INTERVAL_MS_DEFAULT,
    async work() {
      const ids = await taskDepsDriftList(o.db, o.quietSec ?? DEPS_RECONCILER_QUIET_SEC, BATCH);
      if (ids.length === 0) return 0;
      const fixed = await withTx(o.db, async (tx) => {
        const n = await taskDepsRecount(tx, ids);
        await eventInsertMany(tx, ids.map((taskId) => ({ type: 'task.deps_repaired', taskId })));
        return n;
      });
      o.log?.warn({ tasks: ids, fixed }, 'dependency counters had drifted; recounted');
      return fixed;
    },
  });
}

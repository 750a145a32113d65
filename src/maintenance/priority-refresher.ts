import { taskPriorityRefresh } from '../db/queries/tasks-priority.js';
import { drain, serviceCreate, type MaintenanceService, type LoopIdentity, type LoopOptions } from './service.js';

export const PRIORITY_REFRESH_INTERVAL_MS_DEFAULT = 2_000;
/** A stored effective priority this close to the true one is left alone: refreshing costs an index update. */
export const PRIORITY_REFRESH_TOLERANCE = 0.1;
const BATCH = 5_000;
const MAX_BATCHES_PER_TICK = 4;

export interface PriorityRefresherOptions extends LoopOptions {
  intervalMs?: number;
  tolerance?: number;
  /** The clock (tests simulate hours). Default the database's. */
  now?: () => Date;
}

/** This loop in the registry (index.ts): its name (its lease's, in maintenance_leases) and whether one process at a time runs it. */
export const PRIORITY_REFRESHER_LOOP = { name: 'priority-refresher', gated: true } as const satisfies LoopIdentity;

/**
 * Keeps the stored effective priority of READY tasks current as they age and
 * their deadlines near (the claim orders by the stored value), and flags tasks
 * whose deadline can no longer be met. Transitions to READY compute it
 * themselves; this loop covers the passing of time.
 */
export function priorityRefresherCreate(o: PriorityRefresherOptions): MaintenanceService {
  return serviceCreate({
    ...PRIORITY_REFRESHER_LOOP,
    db: o.db,
    log: o.log,
    leaseSec: o.leaseSec,
    intervalMs: o.intervalMs ?? PRIORITY_REFRESH_INTERVAL_MS_DEFAULT,
    work: () => drain(BATCH, async () => {
      const r = await taskPriorityRefresh(o.db, { limit: BATCH, tolerance: o.tolerance ?? PRIORITY_REFRESH_TOLERANCE, at: o.now?.() });
      for (const t of r.deadlinesMissed) o.log?.warn({ taskId: t.id, dagId: t.dagId }, 'deadline can no longer be met; the task still runs, flagged');
      return r.refreshed;
    }, MAX_BATCHES_PER_TICK),
  });
}

import { taskTypeDurationsRefresh } from '../db/queries/tasks-priority.js';
import { serviceCreate, type MaintenanceService, type LoopIdentity, type LoopOptions } from './service.js';

export const DURATION_LEARNER_INTERVAL_MS_DEFAULT = 5 * 60_000;

/** This loop in the registry (index.ts): its name (its lease's, in maintenance_leases) and whether one process at a time runs it. */
export const DURATION_LEARNER_LOOP = { name: 'duration-learner', gated: true } as const satisfies LoopIdentity;

/** Re-learns the median run time of each task type from the last day's completed attempts (estimates for the critical path). */
export function durationLearnerCreate(o: LoopOptions & { intervalMs?: number }): MaintenanceService {
  return serviceCreate({
    ...DURATION_LEARNER_LOOP,
    db: o.db,
    log: o.log,
    leaseSec: o.leaseSec,
    intervalMs: o.intervalMs ?? DURATION_LEARNER_INTERVAL_MS_DEFAULT,
    work: () => taskTypeDurationsRefresh(o.db),
  });
}

import { taskPromoteDue } from '../db/queries/tasks-maintenance.js';
import { drain, serviceCreate, type MaintenanceService, type LoopIdentity, type LoopOptions } from './service.js';

export const PROMOTER_INTERVAL_MS_DEFAULT = 1_000;
export const PROMOTER_BATCH_DEFAULT = 1_000;

export interface PromoterOptions extends LoopOptions { intervalMs?: number; batch?: number }

/** This loop in the registry (index.ts): its name (its lease's, in maintenance_leases) and whether one process at a time runs it. */
export const PROMOTER_LOOP = { name: 'promoter', gated: true } as const satisfies LoopIdentity;

/** Moves RETRYING tasks whose retry time came, and PENDING tasks whose not_before passed, to READY. */
export function promoterCreate(o: PromoterOptions): MaintenanceService {
  const batch = o.batch ?? PROMOTER_BATCH_DEFAULT;
  return serviceCreate({
    ...PROMOTER_LOOP,
    db: o.db,
    log: o.log,
    leaseSec: o.leaseSec,
    intervalMs: o.intervalMs ?? PROMOTER_INTERVAL_MS_DEFAULT,
    work: () => drain(batch, () => taskPromoteDue(o.db, batch)),
  });
}

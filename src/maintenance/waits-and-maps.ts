import { approvalsExpiredSettle } from '../engine/waits/approvals.js';
import { mapTasksSettle } from '../engine/dag/map.js';
import { signalWaitsSettle } from '../engine/waits/signals.js';
import { drain, serviceCreate, type MaintenanceService, type LoopIdentity, type LoopOptions } from './service.js';

export const WAITS_INTERVAL_MS_DEFAULT = 1_000;
export const WAITS_BATCH_DEFAULT = 500;

export interface WaitsOptions extends LoopOptions { intervalMs?: number; batch?: number }

/** This loop in the registry (index.ts): its name (its lease's, in maintenance_leases) and whether one process at a time runs it. */
export const WAITS_LOOP = { name: 'waits', gated: true } as const satisfies LoopIdentity;

/**
 * Settles WAITING tasks nobody else will: a signal that came before its task began waiting completes
 * it here (within a pass); a wait for a signal past its timeout fails with class timeout; an approval
 * past its timeout takes its step's on_timeout (approve, reject, or the dead-letter queue); a for_each
 * task gets its children, or, once they are done, completes with their outputs (engine/dag/map.ts).
 */
export function waitsCreate(o: WaitsOptions): MaintenanceService {
  const batch = o.batch ?? WAITS_BATCH_DEFAULT;
  return serviceCreate({
    ...WAITS_LOOP,
    db: o.db,
    log: o.log,
    leaseSec: o.leaseSec,
    intervalMs: o.intervalMs ?? WAITS_INTERVAL_MS_DEFAULT,
    work: () => drain(batch, async () => await signalWaitsSettle(o.db, { batch, log: o.log }) + await approvalsExpiredSettle(o.db, { batch, log: o.log })
      + await mapTasksSettle(o.db, { batch, log: o.log })),
  });
}

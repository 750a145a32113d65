import { DECLARED_RATE_LIMIT_DEFAULTS } from '../config/index.js';
import { RATE_USAGE_PRUNE_BATCH, rateUsagePrune } from '../db/queries/rate-limits.js';
import { drain, serviceCreate, type MaintenanceService, type LoopIdentity, type LoopOptions } from './service.js';

export interface RateUsageOptions extends LoopOptions { intervalMs?: number }

/** This loop in the registry (index.ts): its name (its lease's, in maintenance_leases) and whether one process at a time runs it. */
export const RATE_USAGE_LOOP = { name: 'rate-usage', gated: true } as const satisfies LoopIdentity;

/**
 * Prunes what declared rate limits can no longer count: usage rows older than the longest window a limit may
 * have (an hour), so a window made longer, or a limit removed and declared again, still counts what it held.
 */
export function rateUsageCreate(o: RateUsageOptions): MaintenanceService {
  return serviceCreate({
    ...RATE_USAGE_LOOP,
    db: o.db,
    log: o.log,
    leaseSec: o.leaseSec,
    intervalMs: o.intervalMs ?? DECLARED_RATE_LIMIT_DEFAULTS.pruneIntervalMs,
    work: () => drain(RATE_USAGE_PRUNE_BATCH, () => rateUsagePrune(o.db, DECLARED_RATE_LIMIT_DEFAULTS.windowMaxSec)),
  });
}

import type { Logger } from 'pino';
import type { Db } from '../db/handle.js';
import { DECLARED_RATE_LIMIT_DEFAULTS } from '../config/index.js';
import { RATE_USAGE_PRUNE_BATCH, rateUsagePrune } from '../db/queries/rate-limits.js';
import { serviceCreate, type MaintenanceService } from './service.js';

export interface RateUsageOptions { db: Db; log?: Logger; intervalMs?: number }

/**
 * Prunes what declared rate limits can no longer count: usage rows older than the longest window a limit may
 * have (an hour), so a window made longer, or a limit removed and declared again, still counts what it held.
 */
export function rateUsageCreate(o: RateUsageOptions): MaintenanceService {
  return serviceCreate({
    name: 'rate-usage',
    db: o.db,
    log: o.log,
    intervalMs: o.intervalMs ?? DECLARED_RATE_LIMIT_DEFAULTS.pruneIntervalMs,
    async work() {
      let total = 0;
      for (;;) {
        const n = await rateUsagePrune(o.db, DECLARED_RATE_LIMIT_DEFAULTS.windowMaxSec);
        total += n;
        if (n < RATE_USAGE_PRUNE_BATCH) return total;
      }
    },
  });
}

import type { Logger } from 'pino';
import type { Db } from '../db/handle.js';
import { taskPromoteDue } from '../db/queries/tasks-maintenance.js';
import { serviceCreate, type MaintenanceService } from './service.js';

export const PROMOTER_INTERVAL_MS_DEFAULT = 1_000;
export const PROMOTER_BATCH_DEFAULT = 1_000;

export interface PromoterOptions { db: Db; log?: Logger; intervalMs?: number; batch?: number }

/** Moves RETRYING tasks whose retry time came, and PENDING tasks whose not_before passed, to READY. */
export function promoterCreate(o: PromoterOptions): MaintenanceService {
  const batch = o.batch ?? PROMOTER_BATCH_DEFAULT;
  return serviceCreate({
    name: 'promoter',
    db: o.db,
    log: o.log,
    intervalMs: o.intervalMs ?? PROMOTER_INTERVAL_MS_DEFAULT,
    async work() {
      let total = 0;
      for (;;) {
        const n = await taskPromoteDue(o.db, batch);
        total += n;
        if (n < batch) return total;
      }
    },
  });
}

import { RETENTION_DEFAULTS } from '../config/index.js';
import { prune } from '../engine/ops/retention.js';
import { serviceCreate, type MaintenanceService, type LoopIdentity, type LoopOptions } from './service.js';

export interface RetentionLoopOptions extends LoopOptions {
  /** The retention period in seconds (DAGENT_RETENTION); null: the loop does nothing. */
  retentionSec?: number | null;
  intervalMs?: number;
}

/** This loop in the registry (index.ts): its name (its lease's, in maintenance_leases) and whether one process at a time runs it. */
export const RETENTION_LOOP = { name: 'retention', gated: true } as const satisfies LoopIdentity;

/**
 * Prunes finished DAGs (and the rest retention covers) older than the period, in small batches
 * (src/engine/ops/retention.ts). Off when DAGENT_RETENTION is `off`.
 */
export function retentionLoopCreate(o: RetentionLoopOptions): MaintenanceService {
  const log = o.log?.child({ service: 'retention' });
  let stopping = false;
  const service = serviceCreate({
    ...RETENTION_LOOP,
    db: o.db,
    log: o.log,
    leaseSec: o.leaseSec,
    intervalMs: o.intervalMs ?? RETENTION_DEFAULTS.intervalMs,
    async work() {
      if (o.retentionSec == null) return 0;
      // A time box well inside the interval: a large first prune goes on at the next tick, never two at once,
      // and a shutdown waits for one statement at most.
      const until = Date.now() + RETENTION_DEFAULTS.passMs;
      const c = await prune(o.db, { olderThanSec: o.retentionSec, by: 'retention', goOn: () => !stopping && Date.now() < until });
      const handled = c.dags + c.events + c.agents + c.deliveries;
      if (handled > 0) log?.info({ ...c }, 'retention pruned');
      return handled;
    },
  });
  return {
    ...service,
    start: () => { stopping = false; service.start(); },
    stop: () => { stopping = true; return service.stop(); },
  };
}

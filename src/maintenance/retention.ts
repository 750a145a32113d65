import { RETENTION_DEFAULTS } from '../config/index.js';
import { prune, pruneStreams } from '../engine/ops/retention.js';
import { serviceCreate, type MaintenanceService, type LoopIdentity, type LoopOptions } from './service.js';

export interface RetentionLoopOptions extends LoopOptions {
  /** The retention period in seconds (DAGENT_RETENTION); null: the loop does nothing. */
  retentionSec?: number | null;
  /** The streams' period in seconds (DAGENT_RETENTION_STREAMS); null: streams go with their DAG. */
  retentionStreamsSec?: number | null;
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
      // A time box well inside the interval: a large first prune goes on at the next tick, never two at once,
      // and a shutdown waits for one statement at most.
      const until = Date.now() + RETENTION_DEFAULTS.passMs;
      const goOn = () => !stopping && Date.now() < until;
      let handled = 0;
      if (o.retentionStreamsSec != null) {
        const s = await pruneStreams(o.db, { olderThanSec: o.retentionStreamsSec, goOn });
        if (s.streams > 0) log?.info({ ...s }, 'retention pruned streams of finished tasks');
        handled += s.streams;
      }
      if (o.retentionSec == null) return handled;
      const c = await prune(o.db, { olderThanSec: o.retentionSec, by: 'retention', goOn });
      handled += c.dags + c.events + c.agents + c.deliveries;
      if (c.dags + c.events + c.agents + c.deliveries > 0) log?.info({ ...c }, 'retention pruned');
      return handled;
    },
  });
  return {
    ...service,
    start: () => { stopping = false; service.start(); },
    stop: () => { stopping = true; return service.stop(); },
  };
}

import type { Logger } from 'pino';
import { engineEvents } from '../observability/engine-events.js';
import type { Db } from '../db/connection.js';
import { agentMarkStaleOffline } from '../db/queries/agents.js';
import { eventInsertMany } from '../db/queries/events.js';
import { taskLeaseExpiredList, type ExpiredLease } from '../db/queries/tasks-maintenance.js';
import { DagentError } from '../errors.js';
import { taskFail } from '../engine/failure.js';
import { serviceCreate, type MaintenanceService } from './service.js';

const SKIPPABLE = new Set(['LEASE_LOST', 'ILLEGAL_TRANSITION', 'TRANSITION_RACED']);

export const REAPER_INTERVAL_MS_DEFAULT = 5_000;
export const REAPER_BATCH_DEFAULT = 200;
/** An agent silent for this long is marked offline (its tasks come back through their own leases). */
export const AGENT_STALE_SEC_DEFAULT = 90;

export interface ReaperOptions {
  db: Db;
  log?: Logger;
  /** Default REAPER_INTERVAL_MS_DEFAULT (5 s). */
  intervalMs?: number;
  /** Most tasks taken back per pass. Default 200. */
  batch?: number;
  agentStaleSec?: number;
}

/**
 * Takes back leased tasks whose holder went quiet: CLAIMED past its claim TTL
 * (error class `timeout`), RUNNING past its heartbeat lease (`crash`), or RUNNING
 * past max_duration_sec (`timeout`). Each goes through the normal failure path,
 * so the retry policy, poison-pill rule and DLQ apply. The failure UPDATE re-checks
 * expiry, so a task completed or heartbeated meanwhile is left alone.
 */
export function reaperCreate(o: ReaperOptions): MaintenanceService {
  const reapOne = async (t: ExpiredLease): Promise<boolean> => {
    const errorClass = t.reason === 'heartbeat' ? 'crash' : 'timeout';
    const message = {
      claim_ttl: 'claimed but not started before the claim TTL expired',
      heartbeat: 'heartbeat lease expired: the agent stopped responding',
      max_duration: 'ran past max_duration_sec',
    }[t.reason];
    try {
      await taskFail(o.db, { taskId: t.id, fence: t.fence, errorClass, message }, {
        log: o.log, reapCondition: t.reason === 'max_duration' ? 'over_max_duration' : 'lease_expired',
      });
      await eventInsertMany(o.db, [{ type: 'task.reaped', dagId: t.dagId, taskId: t.id, agentId: t.agentId, data: { reason: t.reason } }]);
      engineEvents.emit('reaped', { agentId: t.agentId, reason: t.reason });
      return true;
    } catch (e) {
      // Completed, heartbeated or reclaimed since the scan: nothing to take back.
      if (e instanceof DagentError && SKIPPABLE.has(e.code)) return false;
      o.log?.warn({ err: e, taskId: t.id }, 'reaper could not take a task back; continuing with the batch');
      return false;
    }
  };
  return serviceCreate({
    name: 'reaper',
    db: o.db,
    log: o.log,
    intervalMs: o.intervalMs ?? REAPER_INTERVAL_MS_DEFAULT,
    async work() {
      await agentMarkStaleOffline(o.db, o.agentStaleSec ?? AGENT_STALE_SEC_DEFAULT);
      const expired = await taskLeaseExpiredList(o.db, o.batch ?? REAPER_BATCH_DEFAULT);
      let n = 0;
      for (const t of expired) if (await reapOne(t)) n++;
      return n;
    },
  });
}

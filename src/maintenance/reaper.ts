import { LEASE_DEFAULTS } from '../config/index.js';
import { attemptsEndedEmit, engineEvents } from '../observability/engine-events.js';
import { agentMarkStaleOffline } from '../db/queries/agents.js';
import { eventInsertMany } from '../db/queries/events.js';
import { taskReleaseMark } from '../db/queries/tasks-lifecycle.js';
import { taskLeaseExpiredList, type ExpiredLease } from '../db/queries/tasks-maintenance.js';
import { DagentError } from '../errors.js';
import { taskFail } from '../engine/attempt/fail.js';
import { crashBlame } from '../engine/attempt/crash-blame.js';
import { attemptCrashHistory } from '../db/queries/attempts.js';
import { serviceCreate, type MaintenanceService, type LoopIdentity, type LoopOptions } from './service.js';

const SKIPPABLE = new Set(['LEASE_LOST', 'ILLEGAL_TRANSITION', 'TRANSITION_RACED']);

export const REAPER_INTERVAL_MS_DEFAULT = 5_000;
export const REAPER_BATCH_DEFAULT = 200;
/** How many passes a task the failure path threw on stays out of the reaper's scan. */
export const REAPER_SET_ASIDE_PASSES = 12;
/** An agent silent for this long is marked offline (its tasks come back through their own leases). */
export const AGENT_STALE_SEC_DEFAULT = LEASE_DEFAULTS.agentStaleSec;

export interface ReaperOptions extends LoopOptions {
  /** Default REAPER_INTERVAL_MS_DEFAULT (5 s). */
  intervalMs?: number;
  /** Most tasks taken back per pass. Default 200. */
  batch?: number;
  agentStaleSec?: number;
}

/** This loop in the registry (index.ts): its name (its lease's, in maintenance_leases) and whether one process at a time runs it. */
export const REAPER_LOOP = { name: 'reaper', gated: true } as const satisfies LoopIdentity;

/**
 * Takes back leased tasks whose holder went quiet: CLAIMED past its claim TTL
 * (error class `timeout`), RUNNING past its heartbeat lease (`crash`), or RUNNING
 * past max_duration_sec (`timeout`). Each goes through the normal failure path,
 * so the retry policy, poison-pill rule and DLQ apply. The failure UPDATE re-checks
 * expiry, so a task completed or heartbeated meanwhile is left alone.
 */
export function reaperCreate(o: ReaperOptions): MaintenanceService {
  const intervalMs = o.intervalMs ?? REAPER_INTERVAL_MS_DEFAULT;
  // Tasks the failure path threw on for a reason other than a race: left out of the scan for a
  // while, so a few rows that keep failing cannot fill every batch and hold up everyone else's.
  const setAside = new Map<string, number>();
  const reapOne = async (t: ExpiredLease): Promise<boolean> => {
    // A claim whose agent never showed a sign of life (its reply was most likely lost) is handed
    // back without spending an attempt, a bounded number of times (LEASE_DEFAULTS.claimLapsesMax).
    if (t.unstarted && t.reason !== 'max_duration') {
      const lapsed = await taskReleaseMark(o.db, t.id, t.fence, 'claim lapsed before the agent started it (its reply was likely lost); no attempt spent', {}, { lapsed: true })
        .catch((e: unknown) => { o.log?.warn({ err: e, taskId: t.id }, 'reaper could not hand back a lapsed claim; failing it instead'); return null; });
      if (lapsed) {
        await eventInsertMany(o.db, [{ type: 'task.reaped', dagId: t.dagId, taskId: t.id, agentId: t.agentId, data: { reason: t.reason, lapsed: true } }]);
        engineEvents.emit('reaped', { agentId: t.agentId, reason: t.reason });
        attemptsEndedEmit(() => [{ taskId: t.id, fence: t.fence }]);
        return true;
      }
    }
    // A dead agent takes every task it ran with it; only evidence is charged a crash (engine/attempt/crash-blame.ts).
    let details: Record<string, unknown> | undefined;
    let blame = '';
    if (t.reason === 'heartbeat' && t.status === 'running') {
      const verdict = crashBlame(t.id, t.diedWith, await attemptCrashHistory(o.db, t.id));
      const crashWith = t.diedWith.filter((id) => id !== t.id);
      details = { crashWith, blame: verdict.why };
      blame = ` (${verdict.why})`;
      if (!verdict.charged) {
        const spared = await taskReleaseMark(o.db, t.id, t.fence, `heartbeat lease expired: the agent stopped responding${blame}`, {}, { crashShared: true, details })
          .catch((e: unknown) => { o.log?.warn({ err: e, taskId: t.id }, 'reaper could not spare a shared crash; failing it instead'); return null; });
        if (spared) {
          await eventInsertMany(o.db, [{ type: 'task.reaped', dagId: t.dagId, taskId: t.id, agentId: t.agentId, data: { reason: t.reason, crashShared: true, with: crashWith } }]);
          engineEvents.emit('reaped', { agentId: t.agentId, reason: t.reason });
          attemptsEndedEmit(() => [{ taskId: t.id, fence: t.fence }]);
          return true;
        }
      }
    }
    const errorClass = t.reason === 'heartbeat' ? 'crash' : 'timeout';
    const message = {
      claim_ttl: 'claimed but not started before the claim TTL expired',
      heartbeat: 'heartbeat lease expired: the agent stopped responding',
      max_duration: 'ran past max_duration_sec',
    }[t.reason];
    try {
      await taskFail(o.db, { taskId: t.id, fence: t.fence, errorClass, message: `${message}${blame}`, details }, {
        log: o.log, reapCondition: t.reason === 'max_duration' ? 'over_max_duration' : 'lease_expired',
      });
      await eventInsertMany(o.db, [{ type: 'task.reaped', dagId: t.dagId, taskId: t.id, agentId: t.agentId, data: { reason: t.reason } }]);
      engineEvents.emit('reaped', { agentId: t.agentId, reason: t.reason });
      return true;
    } catch (e) {
      // Completed, heartbeated or reclaimed since the scan: nothing to take back.
      if (e instanceof DagentError && SKIPPABLE.has(e.code)) return false;
      setAside.set(t.id, Date.now() + REAPER_SET_ASIDE_PASSES * intervalMs);
      o.log?.error({ err: e, taskId: t.id, dagId: t.dagId }, 'reaper could not take a task back; set aside for a while, continuing with the batch');
      return false;
    }
  };
  return serviceCreate({
    ...REAPER_LOOP,
    db: o.db,
    log: o.log,
    leaseSec: o.leaseSec,
    intervalMs,
    async work() {
      await agentMarkStaleOffline(o.db, o.agentStaleSec ?? AGENT_STALE_SEC_DEFAULT);
      const now = Date.now();
      for (const [id, until] of setAside) if (until <= now) setAside.delete(id);
      const expired = await taskLeaseExpiredList(o.db, o.batch ?? REAPER_BATCH_DEFAULT, [...setAside.keys()]);
      let n = 0;
      for (const t of expired) if (await reapOne(t)) n++;
      return n;
    },
  });
}

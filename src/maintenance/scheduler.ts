import type { Logger } from 'pino';
import type { Db } from '../db/handle.js';
import { scheduleFireDue, type Clock } from '../engine/ops/cron.js';
import { serviceCreate, type MaintenanceService, type LoopIdentity } from './service.js';

export const SCHEDULER_INTERVAL_MS_DEFAULT = 1_000;

export interface SchedulerOptions {
  db: Db;
  log?: Logger;
  /** Default SCHEDULER_INTERVAL_MS_DEFAULT. */
  intervalMs?: number;
  /** Where "now" comes from. Default the database clock; tests inject one. */
  clock?: Clock;
  /** Skip fires while READY + PENDING tasks number this many or more (the submit backpressure limit). */
  maxQueued?: number;
}

/** This loop in the registry (index.ts): its name (its lease's, in maintenance_leases) and whether one process at a time runs it. */
export const SCHEDULER_LOOP = { name: 'scheduler', gated: false } as const satisfies LoopIdentity;

/**
 * Fires due cron schedules. Not behind the cadence gate: every process ticks,
 * and the schedule row lock plus the per-fire idempotency key make each fire
 * happen once however many schedulers run (tested with three processes).
 */
export function schedulerCreate(o: SchedulerOptions): MaintenanceService {
  return serviceCreate({
    ...SCHEDULER_LOOP,
    db: o.db,
    log: o.log,
    intervalMs: o.intervalMs ?? SCHEDULER_INTERVAL_MS_DEFAULT,
    async work() {
      const reports = await scheduleFireDue(o.db, { clock: o.clock, log: o.log, maxQueued: o.maxQueued });
      return reports.reduce((n, r) => n + r.fired.length, 0);
    },
  });
}

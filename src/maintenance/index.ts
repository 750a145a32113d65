import type { Logger } from 'pino';
import type { Db } from '../db/handle.js';
import { budgetWatchCreate } from './budget-watch.js';
import { depsReconcilerCreate } from './deps-reconciler.js';
import { durationLearnerCreate } from './duration-learner.js';
import { priorityRefresherCreate } from './priority-refresher.js';
import { promoterCreate } from './promoter.js';
import { rateUsageCreate } from './rate-usage.js';
import { reaperCreate } from './reaper.js';
import { retentionLoopCreate } from './retention.js';
import { schedulerCreate } from './scheduler.js';
import type { MaintenanceService } from './service.js';
import { waitsCreate } from './waits-and-maps.js';
import { webhookDispatcherCreate } from './webhook-dispatcher.js';

export type { MaintenanceService };

/** Every maintenance loop, with its defaults. A new loop is one file in this folder and one line here. */
const LOOPS: Array<(o: LoopContext) => MaintenanceService> = [
  reaperCreate,
  promoterCreate,
  schedulerCreate,
  depsReconcilerCreate,
  priorityRefresherCreate,
  durationLearnerCreate,
  webhookDispatcherCreate,
  budgetWatchCreate,
  waitsCreate,
  rateUsageCreate,
  retentionLoopCreate,
];

/** What every loop is created with. */
export interface LoopContext {
  db: Db;
  log?: Logger;
  /** The backpressure limit submits obey (DAGENT_MAX_QUEUED); the scheduler skips fires while the queue is this full. */
  maxQueued?: number;
  /** The retention period (DAGENT_RETENTION) in seconds; null or absent: nothing is pruned. */
  retentionSec?: number | null;
}

/** The maintenance loops a long-running dagent process runs. */
export function maintenanceServices(db: Db, log?: Logger, opts: { maxQueued?: number; retentionSec?: number | null } = {}): MaintenanceService[] {
  return LOOPS.map((create) => create({ db, log, maxQueued: opts.maxQueued, retentionSec: opts.retentionSec }));
}

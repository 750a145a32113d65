import type { Logger } from 'pino';
import type { Db } from '../db/handle.js';
import { BUDGET_WATCH_LOOP, budgetWatchCreate } from './budget-watch.js';
import { DEPS_RECONCILER_LOOP, depsReconcilerCreate } from './deps-reconciler.js';
import { DURATION_LEARNER_LOOP, durationLearnerCreate } from './duration-learner.js';
import { PRIORITY_REFRESHER_LOOP, priorityRefresherCreate } from './priority-refresher.js';
import { PROMOTER_LOOP, promoterCreate } from './promoter.js';
import { RATE_USAGE_LOOP, rateUsageCreate } from './rate-usage.js';
import { REAPER_LOOP, reaperCreate } from './reaper.js';
import { RETENTION_LOOP, retentionLoopCreate } from './retention.js';
import { SCHEDULER_LOOP, schedulerCreate } from './scheduler.js';
import { TENANT_SHARE_LOOP, tenantShareCreate } from './tenant-share.js';
import type { LoopIdentity, MaintenanceService } from './service.js';
import { WAITS_LOOP, waitsCreate } from './waits-and-maps.js';
import { WEBHOOK_DISPATCHER_LOOP, webhookDispatcherCreate } from './webhook-dispatcher.js';
import { WORKSPACE_RECLAIMER_LOOP, workspaceReclaimerCreate } from './workspace-reclaimer.js';

export type { MaintenanceService };

/**
 * Every maintenance loop, with its defaults, in the order a process starts them. A new loop is one file in this
 * folder and one line here; what lists the loops (dagent up's help and banner, the docs' loop table, the tests)
 * reads them from here.
 */
const LOOPS: ReadonlyArray<LoopIdentity & { create: (o: LoopContext) => MaintenanceService }> = [
  { ...REAPER_LOOP, create: reaperCreate },
  { ...PROMOTER_LOOP, create: promoterCreate },
  { ...SCHEDULER_LOOP, create: schedulerCreate },
  { ...DEPS_RECONCILER_LOOP, create: depsReconcilerCreate },
  { ...PRIORITY_REFRESHER_LOOP, create: priorityRefresherCreate },
  { ...DURATION_LEARNER_LOOP, create: durationLearnerCreate },
  { ...WEBHOOK_DISPATCHER_LOOP, create: webhookDispatcherCreate },
  { ...BUDGET_WATCH_LOOP, create: budgetWatchCreate },
  { ...WAITS_LOOP, create: waitsCreate },
  { ...RATE_USAGE_LOOP, create: rateUsageCreate },
  { ...TENANT_SHARE_LOOP, create: tenantShareCreate },
  { ...RETENTION_LOOP, create: retentionLoopCreate },
  { ...WORKSPACE_RECLAIMER_LOOP, create: (o) => workspaceReclaimerCreate({ ...o, root: o.workspaces?.root, keptSec: o.workspaces?.keptSec }) },
];

/** The loops' names, in start order. */
export const LOOP_NAMES: readonly string[] = LOOPS.map((l) => l.name);

/** The loops one process at a time runs (the holder of the loop's lease); the others run in every process. */
export const LOOPS_ELECTED: readonly string[] = LOOPS.filter((l) => l.gated).map((l) => l.name);

/** What every loop is created with. */
export interface LoopContext {
  db: Db;
  log?: Logger;
  /** The backpressure limit submits obey (DAGENT_MAX_QUEUED); the scheduler skips fires while the queue is this full. */
  maxQueued?: number;
  /** The retention period (DAGENT_RETENTION) in seconds; null or absent: nothing is pruned. */
  retentionSec?: number | null;
  /** The streams' retention (DAGENT_RETENTION_STREAMS) in seconds; null or absent: streams go with their DAG. */
  retentionStreamsSec?: number | null;
  /** Seconds a loop's lease lasts without a renewal (DAGENT_LOOP_LEASE_SEC). Default LOOP_LEASE_DEFAULTS.ttlSec. */
  leaseSec?: number;
  /** This machine's workspace root (DAGENT_WORKSPACE_ROOT) and how long kept worktrees stay (DAGENT_RETENTION_WORKSPACES). */
  workspaces?: { root?: string; keptSec?: number | null };
}

/** The maintenance loops a long-running dagent process runs. */
export function maintenanceServices(db: Db, log?: Logger, opts: Omit<LoopContext, 'db' | 'log'> = {}): MaintenanceService[] {
  return LOOPS.map((l) => l.create({ db, log, maxQueued: opts.maxQueued, retentionSec: opts.retentionSec, retentionStreamsSec: opts.retentionStreamsSec, leaseSec: opts.leaseSec, workspaces: opts.workspaces }));
}

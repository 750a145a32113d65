import type { Logger } from 'pino';
import type { Db } from '../db/connection.js';
import { depsReconcilerCreate } from './deps-reconciler.js';
import { durationLearnerCreate } from './duration-learner.js';
import { priorityRefresherCreate } from './priority-refresher.js';
import { promoterCreate } from './promoter.js';
import { reaperCreate } from './reaper.js';
import { schedulerCreate } from './scheduler.js';
import type { MaintenanceService } from './service.js';
import { webhookDispatcherCreate } from './webhook-dispatcher.js';

export type { MaintenanceService };
export { depsReconcilerCreate, durationLearnerCreate, priorityRefresherCreate, promoterCreate, reaperCreate, schedulerCreate, webhookDispatcherCreate };

/** The maintenance loops a long-running dagent process runs. */
export function maintenanceServices(db: Db, log?: Logger): MaintenanceService[] {
  return [
    reaperCreate({ db, log }), promoterCreate({ db, log }), schedulerCreate({ db, log }), depsReconcilerCreate({ db, log }),
    priorityRefresherCreate({ db, log }), durationLearnerCreate({ db, log }), webhookDispatcherCreate({ db, log }),
  ];
}

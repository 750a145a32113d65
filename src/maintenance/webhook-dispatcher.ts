import type { Logger } from 'pino';
import type { Db } from '../db/handle.js';
import { webhookDeliverDue, type DeliverOptions } from '../webhooks/webhooks.js';
import { serviceCreate, type MaintenanceService, type LoopIdentity } from './service.js';

export const WEBHOOK_DISPATCHER_INTERVAL_MS_DEFAULT = 1_000;

export interface WebhookDispatcherOptions extends DeliverOptions { db: Db; log?: Logger; intervalMs?: number }

/** This loop in the registry (index.ts): its name (its lease's, in maintenance_leases) and whether one process at a time runs it. */
export const WEBHOOK_DISPATCHER_LOOP = { name: 'webhook-dispatcher', gated: false } as const satisfies LoopIdentity;

/**
 * POSTs the webhook outbox (rows the events trigger wrote). Not gated: deliveries
 * are taken with SKIP LOCKED, so every process may share the work; it runs off the
 * task path, so a slow or failing receiver never holds up a claim or a completion.
 */
export function webhookDispatcherCreate(o: WebhookDispatcherOptions): MaintenanceService {
  return serviceCreate({
    ...WEBHOOK_DISPATCHER_LOOP,
    db: o.db,
    log: o.log,
    intervalMs: o.intervalMs ?? WEBHOOK_DISPATCHER_INTERVAL_MS_DEFAULT,
    work: () => webhookDeliverDue(o.db, o),
  });
}

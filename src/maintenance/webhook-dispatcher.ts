import type { Logger } from 'pino';
import type { Db } from '../db/handle.js';
import { webhookDeliverDue, type DeliverOptions } from '../webhooks/webhooks.js';
import { serviceCreate, type MaintenanceService } from './service.js';

export const WEBHOOK_DISPATCHER_INTERVAL_MS_DEFAULT = 1_000;

export interface WebhookDispatcherOptions extends DeliverOptions { db: Db; log?: Logger; intervalMs?: number }

/**
 * POSTs the webhook outbox (rows the events trigger wrote). Not gated: deliveries
 * are taken with SKIP LOCKED, so every process may share the work; it runs off the
 * task path, so a slow or failing receiver never holds up a claim or a completion.
 */
export function webhookDispatcherCreate(o: WebhookDispatcherOptions): MaintenanceService {
  return serviceCreate({
    name: 'webhook-dispatcher',
    db: o.db,
    log: o.log,
    gated: false,
    intervalMs: o.intervalMs ?? WEBHOOK_DISPATCHER_INTERVAL_MS_DEFAULT,
    work: () => webhookDeliverDue(o.db, o),
  });
}

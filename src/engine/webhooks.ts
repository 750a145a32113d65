import { createHmac } from 'node:crypto';
import type { Logger } from 'pino';
import type { Db } from '../db/connection.js';
import {
  webhookDelete, webhookDeliveryList, webhookDeliveryRecord, webhookDeliveryTakeDue, webhookInsert, webhookList,
  type DueDelivery, type WebhookRow,
} from '../db/queries/webhooks.js';
import { InvalidInputError, NotFoundError } from '../errors.js';
import { newWebhookId } from '../ids.js';
import { didYouMean } from '../dag/suggest.js';
import { retryDelaySec } from './retry-policy.js';
import type { RetryPolicy } from '../dag/spec.js';

/** Events a webhook may subscribe to. The trigger in migration 0010 lists the same types. */
export const WEBHOOK_EVENT_TYPES = ['task.dead_lettered', 'dag.blocked', 'dag.completed', 'dag.cancelled'] as const;

export const WEBHOOK_DEFAULTS = {
  /** Default subscription: dead letters only. */
  events: ['task.dead_lettered'] as string[],
  /** A POST that has not answered in this long counts as failed. */
  timeoutSec: 10,
  /** Retry n waits base · 2^(n-1) seconds (±20 %), capped at maxDelaySec. */
  retryBaseSec: 2,
  maxDelaySec: 600,
  /** Attempts before a delivery is marked failed (about 2 hours of retries with the defaults). */
  maxAttempts: 15,
  /** Deliveries one pass takes. */
  batch: 20,
};

export async function webhookAdd(db: Db, o: { url: string; events?: string[]; secret?: string }): Promise<WebhookRow> {
  let url: URL;
  try {
    url = new URL(o.url);
  } catch {
    throw new InvalidInputError(`webhook url ${o.url}: not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new InvalidInputError(`webhook url ${o.url}: expected http or https`);
  const events = o.events?.length ? [...new Set(o.events)] : WEBHOOK_DEFAULTS.events;
  for (const e of events) {
    if (!(WEBHOOK_EVENT_TYPES as readonly string[]).includes(e)) {
      throw new InvalidInputError(`webhook event ${e}: unknown${didYouMean(e, WEBHOOK_EVENT_TYPES)}; one of ${WEBHOOK_EVENT_TYPES.join(', ')}`);
    }
  }
  return webhookInsert(db, { id: newWebhookId(), url: url.toString(), events, secret: o.secret ?? null });
}

export async function webhookRemove(db: Db, id: string): Promise<void> {
  if (!(await webhookDelete(db, id))) throw new NotFoundError('webhook', id);
}

export { webhookList, webhookDeliveryList };

export interface DeliverOptions {
  log?: Logger;
  timeoutSec?: number;
  retryBaseSec?: number;
  maxDelaySec?: number;
  maxAttempts?: number;
  batch?: number;
  random?: () => number;
}

/**
 * One pass: POST every due delivery (concurrently, each with a timeout) and record
 * each attempt. A 2xx delivers; anything else (status, refusal, timeout) is retried
 * with backoff until maxAttempts. Returns how many deliveries were attempted.
 */
export async function webhookDeliverDue(db: Db, opts: DeliverOptions = {}): Promise<number> {
  const o = { ...WEBHOOK_DEFAULTS, ...opts };
  // The tasks' own backoff: doubling from retryBaseSec, ±20 %, capped at maxDelaySec.
  const backoff: RetryPolicy = { strategy: 'exponential', initialDelaySec: o.retryBaseSec, multiplier: 2, maxDelaySec: o.maxDelaySec, jitter: 0.2, noRetryOn: [] };
  const due = await webhookDeliveryTakeDue(db, o.batch, o.timeoutSec + 30);
  await Promise.all(due.map(async (d) => {
    const a = await deliveryPost(d, o.timeoutSec);
    const made = d.attempts + 1;
    const retryInSec = a.ok || made >= o.maxAttempts ? null : retryDelaySec(backoff, made, o.random);
    await webhookDeliveryRecord(db, d.id, { ...a, retryInSec });
    const fields = { deliveryId: d.id, eventId: d.eventId, type: d.eventType, attempt: made, status: a.status, error: a.error };
    if (a.ok) o.log?.info(fields, 'webhook delivered');
    else o.log?.warn({ ...fields, retryInSec }, retryInSec === null ? 'webhook delivery failed for good' : 'webhook delivery failed; will retry');
  }));
  return due.length;
}

async function deliveryPost(d: DueDelivery, timeoutSec: number): Promise<{ ok: boolean; status?: number; error?: string; ms: number }> {
  const body = JSON.stringify(d.payload);
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'user-agent': 'dagent-webhook',
    // Receivers de-duplicate on these: a delivery whose result was lost (a crash mid-POST) is sent again.
    'dagent-delivery': String(d.id),
    'dagent-event': String(d.eventId),
    'dagent-event-type': d.eventType,
  };
  if (d.secret) headers['dagent-signature'] = `sha256=${createHmac('sha256', d.secret).update(body).digest('hex')}`;
  const started = Date.now();
  try {
    const res = await fetch(d.url, { method: 'POST', headers, body, signal: AbortSignal.timeout(timeoutSec * 1000), redirect: 'manual' });
    await res.arrayBuffer().catch(() => undefined);
    return { ok: res.status >= 200 && res.status < 300, status: res.status, error: res.ok ? undefined : `HTTP ${res.status}`, ms: Date.now() - started };
  } catch (e) {
    // fetch wraps the network error: its code is on the cause (or on the first of an AggregateError's errors).
    const err = e as Error & { cause?: { code?: string; message?: string; errors?: Array<{ code?: string }> } };
    const code = err.cause?.code ?? err.cause?.errors?.[0]?.code;
    const error = err.name === 'TimeoutError' ? `timed out after ${timeoutSec}s` : `${code ?? err.name}: ${err.cause?.message || err.message}`;
    return { ok: false, error, ms: Date.now() - started };
  }
}

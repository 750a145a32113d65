import { createHmac } from 'node:crypto';
import type { Logger } from 'pino';
import type { Db } from '../db/handle.js';
import {
  webhookDelete, webhookDeliveryList, webhookDeliveryRecord, webhookDeliveryTakeDue, webhookInsert, webhookListAll,
  type DueDelivery, type WebhookRow,
} from '../db/queries/webhooks.js';
import { configFromEnv } from '../config/index.js';
import { urlRedact, webhookPost, webhookUrlRefusal } from './post.js';
import { InvalidInputError, NotFoundError, tenantUnknownError } from '../errors.js';
import { tenantKnown } from '../db/queries/tenants.js';
import { newWebhookId } from '../ids.js';
import { didYouMean } from '../dag/suggest.js';
import { retryDelaySec } from '../engine/attempt/retry-policy.js';
import type { RetryPolicy } from '../dag/spec.js';

/** Events a webhook may subscribe to. The trigger events_webhook_enqueue (migration 0023) lists the same types. */
export const WEBHOOK_EVENT_TYPES = ['task.dead_lettered', 'task.waiting', 'task.budget_exceeded', 'dag.blocked', 'dag.completed', 'dag.cancelled'] as const;

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
  /** Most of a receiver's answer read; beyond it the connection is dropped (only the status counts). */
  maxResponseBytes: 64 * 1024,
};

/** Hosts an operator allows webhooks to reach although they are local (DAGENT_WEBHOOK_ALLOW_HOSTS). */
function allowHostsOf(given: readonly string[] | undefined): readonly string[] {
  return given ?? configFromEnv().webhookAllowHosts;
}

/** Add a webhook; `tenant`: only that tenant's events (default every tenant's). */
export async function webhookAdd(db: Db, o: { url: string; events?: string[]; secret?: string; allowHosts?: readonly string[]; tenant?: string }): Promise<WebhookRow> {
  let url: URL;
  try {
    url = new URL(o.url);
  } catch {
    throw new InvalidInputError(`webhook url ${urlRedact(o.url)}: not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new InvalidInputError(`webhook url ${urlRedact(o.url)}: expected http or https`);
  const refusal = webhookUrlRefusal(url, allowHostsOf(o.allowHosts));
  if (refusal) throw new InvalidInputError(`webhook url ${urlRedact(o.url)}: ${refusal}; an operator may allow it with DAGENT_WEBHOOK_ALLOW_HOSTS=${url.hostname.replace(/^\[|\]$/g, '')}`);
  const events = o.events?.length ? [...new Set(o.events)] : WEBHOOK_DEFAULTS.events;
  for (const e of events) {
    if (!(WEBHOOK_EVENT_TYPES as readonly string[]).includes(e)) {
      throw new InvalidInputError(`webhook event ${e}: unknown${didYouMean(e, WEBHOOK_EVENT_TYPES)}; one of ${WEBHOOK_EVENT_TYPES.join(', ')}`);
    }
  }
  if (o.tenant !== undefined && !(await tenantKnown(db, o.tenant))) throw tenantUnknownError(o.tenant);
  return webhookInsert(db, { id: newWebhookId(), url: url.toString(), events, secret: o.secret ?? null, tenantId: o.tenant ?? null });
}

export async function webhookRemove(db: Db, id: string): Promise<void> {
  if (!(await webhookDelete(db, id))) throw new NotFoundError('webhook', id);
}

/** Every webhook, with credentials in its URL hidden (the secret itself is never listed). */
export async function webhookList(db: Db) {
  return (await webhookListAll(db)).map(({ secret, ...w }) => ({ ...w, url: urlRedact(w.url), signed: secret !== null }));
}

export { webhookDeliveryList };

export interface DeliverOptions {
  log?: Logger;
  /** Hosts allowed although local. Default: DAGENT_WEBHOOK_ALLOW_HOSTS. */
  allowHosts?: readonly string[];
  maxResponseBytes?: number;
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
  const allowHosts = allowHostsOf(opts.allowHosts);
  await Promise.all(due.map(async (d) => {
    const a = await deliveryPost(d, o.timeoutSec, o.maxResponseBytes, allowHosts);
    const made = d.attempts + 1;
    const retryInSec = a.ok || made >= o.maxAttempts ? null : retryDelaySec(backoff, made, o.random);
    await webhookDeliveryRecord(db, d.id, { ...a, retryInSec });
    const fields = { deliveryId: d.id, eventId: d.eventId, type: d.eventType, attempt: made, status: a.status, error: a.error };
    if (a.ok) o.log?.info(fields, 'webhook delivered');
    else o.log?.warn({ ...fields, retryInSec }, retryInSec === null ? 'webhook delivery failed for good' : 'webhook delivery failed; will retry');
  }));
  return due.length;
}

async function deliveryPost(d: DueDelivery, timeoutSec: number, maxResponseBytes: number, allowHosts: readonly string[]): Promise<{ ok: boolean; status?: number; error?: string; ms: number }> {
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
  const r = await webhookPost(new URL(d.url), headers, body, { timeoutMs: timeoutSec * 1000, maxResponseBytes, allowHosts });
  const ok = r.status !== undefined && r.status >= 200 && r.status < 300;
  return { ok, status: r.status, error: r.error ?? (ok ? undefined : `HTTP ${r.status}`), ms: Date.now() - started };
}

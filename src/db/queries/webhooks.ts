import { asc, desc, eq, sql } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { webhookDeliveries, webhooks } from '../schema/index.js';
import { isoTextOf, rowsOf } from '../statement.js';

export type WebhookRow = typeof webhooks.$inferSelect;
export type WebhookDeliveryRow = typeof webhookDeliveries.$inferSelect;

export async function webhookInsert(db: Db, row: typeof webhooks.$inferInsert): Promise<WebhookRow> {
  const [r] = await db.insert(webhooks).values(row).returning();
  return r!;
}

export function webhookListAll(db: Db) {
  return db.select().from(webhooks).orderBy(asc(webhooks.createdAt));
}

export async function webhookDelete(db: Db, id: string): Promise<boolean> {
  return (await db.delete(webhooks).where(eq(webhooks.id, id)).returning({ id: webhooks.id })).length > 0;
}

/** The latest deliveries, newest first; each attempt in a delivery's history with its `at` as ISO 8601 in UTC (isoTextOf). */
export async function webhookDeliveryList(db: Db, filter: { webhookId?: string; limit?: number } = {}): Promise<WebhookDeliveryRow[]> {
  const rows = await db.select().from(webhookDeliveries)
    .where(filter.webhookId ? eq(webhookDeliveries.webhookId, filter.webhookId) : undefined)
    .orderBy(desc(webhookDeliveries.id)).limit(filter.limit ?? 100);
  return rows.map((r) => (Array.isArray(r.history)
    ? { ...r, history: (r.history as Array<Record<string, unknown>>).map((h) => ({ ...h, at: isoTextOf(h.at) })) }
    : r));
}

export interface DueDelivery { id: number; url: string; secret: string | null; payload: Record<string, unknown>; attempts: number; eventId: number; eventType: string }

/**
 * Take due deliveries for one attempt each: SKIP LOCKED so several processes share
 * the work, and the due time pushed past the attempt's timeout (a lease), so a
 * process that dies mid-POST leaves the row to be retried, never stuck.
 */
export async function webhookDeliveryTakeDue(db: Db, limit: number, leaseSec: number): Promise<DueDelivery[]> {
  const rows = await rowsOf<{ id: string; url: string; secret: string | null; payload: Record<string, unknown>; attempts: number; event_id: string; event_type: string }>(db, sql`
    with due as (
      select d.id from webhook_deliveries d
      where d.status = 'pending' and d.next_attempt_at <= now()
      order by d.next_attempt_at limit ${limit}
      for update skip locked
    )
    update webhook_deliveries d set next_attempt_at = now() + make_interval(secs => ${leaseSec})
    from due, webhooks w
    where d.id = due.id and w.id = d.webhook_id
    returning d.id, w.url, w.secret, d.payload, d.attempts, d.event_id, d.event_type`);
  return rows.map((r) => ({ id: Number(r.id), url: r.url, secret: r.secret, payload: r.payload, attempts: r.attempts, eventId: Number(r.event_id), eventType: r.event_type }));
}

export interface DeliveryAttempt { status?: number; error?: string; ms: number }

/** Record one attempt: delivered, retried at `retryInSec`, or given up (`retryInSec` null). */
export async function webhookDeliveryRecord(db: Db, id: number, a: DeliveryAttempt & { ok: boolean; retryInSec: number | null }): Promise<void> {
  await db.execute(sql`
    update webhook_deliveries set
      attempts = attempts + 1,
      status = case when ${a.ok} then 'delivered' when ${a.retryInSec}::float8 is null then 'failed' else 'pending' end,
      next_attempt_at = case when ${a.ok} or ${a.retryInSec}::float8 is null then next_attempt_at else now() + make_interval(secs => ${a.retryInSec ?? 0}) end,
      delivered_at = case when ${a.ok} then now() end,
      last_status = ${a.status ?? null}, last_error = ${a.error ?? null},
      history = history || jsonb_build_array(jsonb_build_object('at', now(), 'status', ${a.status ?? null}::int, 'error', ${a.error ?? null}::text, 'ms', ${a.ms}::int))
    where id = ${id}`);
}

export function webhookDeliveryCounts(db: Db) {
  return rowsOf<{ status: string; n: number }>(db, sql`select status, count(*)::int as n from webhook_deliveries group by status`);
}

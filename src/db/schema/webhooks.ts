import { sql } from 'drizzle-orm';
import { bigint, bigserial, boolean, index, integer, jsonb, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import { tenants } from './tenants.js';

/** A webhook subscription: which event types are POSTed to `url`. */
export const webhooks = pgTable('webhooks', {
  id: text('id').primaryKey(),
  url: text('url').notNull(),
  events: text('events').array().notNull(),
  /** When set, each delivery carries `Dagent-Signature: sha256=<hmac of the body>`. */
  secret: text('secret'),
  enabled: boolean('enabled').notNull().default(true),
  /** Only this tenant's events (of its DAGs and tasks); null: every tenant's. */
  tenantId: text('tenant_id').references(() => tenants.id),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
});

/**
 * One event to deliver to one webhook: an outbox row, written by a trigger on
 * `events` in the transaction that wrote the event, so a dead letter and its
 * notification commit together. Unique per (webhook, event): never two deliveries of one event.
 */
export const webhookDeliveries = pgTable(
  'webhook_deliveries',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    webhookId: text('webhook_id').notNull().references(() => webhooks.id, { onDelete: 'cascade' }),
    eventId: bigint('event_id', { mode: 'number' }).notNull(),
    eventType: text('event_type').notNull(),
    payload: jsonb('payload').notNull(),
    /** pending | delivered | failed (gave up after the last attempt) */
    status: text('status').notNull().default('pending'),
    attempts: integer('attempts').notNull().default(0),
    /** When the next attempt is due; while one is in flight, when its lease runs out. */
    nextAttemptAt: timestamp('next_attempt_at', { withTimezone: true }).notNull().defaultNow(),
    lastStatus: integer('last_status'),
    lastError: text('last_error'),
    /** Every attempt: {at, status?, error?, ms}. */
    history: jsonb('history').notNull().default(sql`'[]'::jsonb`),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    deliveredAt: timestamp('delivered_at', { withTimezone: true }),
  },
  (t) => [
    uniqueIndex('webhook_deliveries_event_uq').on(t.webhookId, t.eventId),
    index('webhook_deliveries_due_idx').on(t.nextAttemptAt).where(sql`${t.status} = 'pending'`),
    // Retention: finished deliveries by age.
    index('webhook_deliveries_done_idx').on(t.createdAt).where(sql`${t.status} <> 'pending'`),
  ],
);

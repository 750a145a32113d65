import { integer, jsonb, pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';
import { tenants } from './tenants.js';

/**
 * The latest signal sent to each key (`POST /api/signals/:key`, `dagent signal`): a task
 * that begins waiting on the key after it arrived, and was created before, completes with it
 * (the waits loop), so an event that comes while the upstream work still runs is not lost.
 */
export const signals = pgTable('signals', {
  /** Keys are per tenant: a signal reaches only its tenant's tasks (a token scoped to a tenant signals into it). */
  tenantId: text('tenant_id').notNull().default('default').references(() => tenants.id),
  key: text('key').notNull(),
  payload: jsonb('payload'),
  receivedAt: timestamp('received_at', { withTimezone: true }).notNull().defaultNow(),
  /** Who sent it: `api:<token id>`, `cli:<user>`. */
  sentBy: text('sent_by'),
  /** How many signals the key has had. */
  received: integer('received').notNull().default(1),
}, (t) => [primaryKey({ columns: [t.tenantId, t.key] })]);

import { pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * Cadence gate of dagent before maintenance-loop leases (maintenance_leases): a loop ticked only if it won the UPDATE
 * that moved `ran_at` forward. Kept so nodes of that version keep working during a rolling upgrade; nothing here uses it.
 */
export const maintenanceGates = pgTable('maintenance_gates', {
  name: text('name').primaryKey(),
  ranAt: timestamp('ran_at', { withTimezone: true }).notNull(),
});

import { pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/** Cadence gate: a service ticks only if it wins the UPDATE that moves `ran_at` forward, so N processes do its work once. */
export const maintenanceGates = pgTable('maintenance_gates', {
  name: text('name').primaryKey(),
  ranAt: timestamp('ran_at', { withTimezone: true }).notNull(),
});

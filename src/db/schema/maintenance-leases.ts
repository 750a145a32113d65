import { pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * Which process runs each maintenance loop: one holder per loop, its lease renewed while it lives and taken over by
 * another process once it lapses (a node killed), or at once when the holder stops (maintenance/service.ts).
 */
export const maintenanceLeases = pgTable('maintenance_leases', {
  name: text('name').primaryKey(),
  /** The holding process: `<host>/<pid>/<random>` (maintenance/index.ts). */
  holder: text('holder').notNull(),
  /** When this holder took the lease. */
  acquiredAt: timestamp('acquired_at', { withTimezone: true }).notNull(),
  /** When the holder last started the loop's work. */
  ranAt: timestamp('ran_at', { withTimezone: true }),
  expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
});

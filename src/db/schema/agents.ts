import { date, integer, jsonb, numeric, pgTable, text, timestamp } from 'drizzle-orm/pg-core';
import { xid8 } from './column-types.js';
import { sql } from 'drizzle-orm';

/** A registered agent. The claim reads its capabilities and budget from here. */
export const agents = pgTable('agents', {
  id: text('id').primaryKey(),
  type: text('type').notNull(),
  capabilities: text('capabilities').array().notNull().default(sql`'{}'::text[]`),
  models: text('models').array().notNull().default(sql`'{}'::text[]`),
  /** The tenants whose work it takes; null: every tenant's. */
  tenants: text('tenants').array(),
  maxConcurrent: integer('max_concurrent').notNull().default(1),
  budgetUsd: numeric('budget_usd', { mode: 'number' }),
  spentUsd: numeric('spent_usd', { mode: 'number' }).notNull().default(0),
  /** Sum of the max costs its claimed and running tasks reserved: spent + reserved never exceeds the budget. */
  reservedUsd: numeric('reserved_usd', { mode: 'number' }).notNull().default(0),
  /** Most it may spend in one UTC day (null: no cap); day_spent_usd is what it spent on spend_day. */
  dailyBudgetUsd: numeric('daily_budget_usd', { mode: 'number' }),
  daySpentUsd: numeric('day_spent_usd', { mode: 'number' }).notNull().default(0),
  spendDay: date('spend_day'),
  /**
   * The transaction of the last claim that took tasks for this agent (pg_current_xact_id()): a claim whose
   * snapshot does not see it counted the agent's held tasks too early, and claims again after the row's lock.
   */
  claimWriter: xid8('claim_writer'),
  /** active | draining | offline */
  status: text('status').notNull().default('active'),
  metadata: jsonb('metadata').notNull().default({}),
  registeredAt: timestamp('registered_at', { withTimezone: true }).notNull().defaultNow(),
  heartbeatAt: timestamp('heartbeat_at', { withTimezone: true }).notNull().defaultNow(),
});

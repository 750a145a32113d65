import { sql } from 'drizzle-orm';
import { integer, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * A model paused for the whole fleet after its provider answered with a rate limit (class rate_limit):
 * until `until`, no claim hands an agent a task on it (a task that accepts another model the agent has
 * runs on that one). Written by the attempt that hit the limit; a later limit only extends it.
 */
export const modelPauses = pgTable('model_pauses', {
  model: text('model').primaryKey(),
  until: timestamp('until', { withTimezone: true }).notNull(),
  /** The provider's message of the latest limit. */
  reason: text('reason'),
  /** The task whose attempt hit the latest limit. */
  taskId: text('task_id'),
  /** How many limits paused it (its history, for /metrics). */
  hits: integer('hits').notNull().default(1),
  /**
   * When the run of pauses it is in began: reports extend a pause to at most RATE_LIMIT_DEFAULTS.maxDelaySec past
   * it, and a run goes on only while agents that have not paused it yet in that run report (model-pauses.ts).
   */
  startedAt: timestamp('started_at', { withTimezone: true }).notNull().defaultNow(),
  /** The agents whose reports paused it in this run. */
  reporters: text('reporters').array().notNull().default(sql`'{}'::text[]`),
});

import { sql } from 'drizzle-orm';
import { boolean, index, integer, jsonb, numeric, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';

/** A dead-lettered task waiting for (or resolved by) a human. `history` is the full attempt list at dead-letter time. */
export const deadLetters = pgTable(
  'dead_letters',
  {
    id: text('id').primaryKey(),
    taskId: text('task_id').notNull(),
    dagId: text('dag_id').notNull(),
    reason: text('reason').notNull(),
    errorClass: text('error_class'),
    poisonPill: boolean('poison_pill').notNull().default(false),
    attempts: integer('attempts').notNull(),
    history: jsonb('history').notNull(),
    totalCostUsd: numeric('total_cost_usd', { mode: 'number' }).notNull().default(0),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    /** null while open; retried | cancelled once a human resolved it */
    resolution: text('resolution'),
    resolvedAt: timestamp('resolved_at', { withTimezone: true }),
    resolvedBy: text('resolved_by'),
    resolvedNote: text('resolved_note'),
  },
  (t) => [
    uniqueIndex('dead_letters_open_task_uq').on(t.taskId).where(sql`${t.resolution} is null`),
    index('dead_letters_dag_idx').on(t.dagId),
    index('dead_letters_created_idx').on(t.createdAt),
  ],
);

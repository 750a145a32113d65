import { sql } from 'drizzle-orm';
import { bigserial, index, jsonb, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/** Append-only log of what happened to DAGs and tasks beyond the hot path (which attempts records). */
export const events = pgTable(
  'events',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    at: timestamp('at', { withTimezone: true }).notNull().defaultNow(),
    type: text('type').notNull(),
    dagId: text('dag_id'),
    taskId: text('task_id'),
    agentId: text('agent_id'),
    data: jsonb('data').notNull().default({}),
  },
  (t) => [
    index('events_task_idx').on(t.taskId, t.id),
    index('events_dag_idx').on(t.dagId, t.id),
    // Retention: events of no DAG (agents, schedules) by age; a DAG's events go with the DAG.
    index('events_dagless_at_idx').on(t.at).where(sql`${t.dagId} is null`),
  ],
);

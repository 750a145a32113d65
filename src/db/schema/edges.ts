import { index, pgTable, primaryKey, text } from 'drizzle-orm/pg-core';

/**
 * upstream → downstream: the downstream task may start only after the upstream one completed.
 *
 * No foreign keys: PostgreSQL checks those row by row (a lookup and a row lock per key), and a 10,000-task DAG's
 * 18,000 edges spent ~0.2 s of its submit on them (`npm run bench`, docs/benchmarks.md "A large DAG's submit").
 * Instead, a statement-level trigger (migration 0034, dagent_edges_tasks_check) checks each inserted edge's two tasks in
 * one join: they exist and belong to the edge's DAG (stronger than the keys were). Edges are deleted with their
 * tasks by the one path that deletes tasks (retention), and by a re-run's edge reset.
 */
export const edges = pgTable(
  'edges',
  {
    dagId: text('dag_id').notNull(),
    upstreamId: text('upstream_id').notNull(),
    downstreamId: text('downstream_id').notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.upstreamId, t.downstreamId] }),
    index('edges_downstream_idx').on(t.downstreamId),
    index('edges_dag_idx').on(t.dagId),
  ],
);

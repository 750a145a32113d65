import { index, pgTable, primaryKey, text } from 'drizzle-orm/pg-core';
import { dags } from './dags.js';
import { tasks } from './tasks.js';

/** upstream → downstream: the downstream task may start only after the upstream one completed. */
export const edges = pgTable(
  'edges',
  {
    dagId: text('dag_id').notNull().references(() => dags.id, { onDelete: 'cascade' }),
    upstreamId: text('upstream_id').notNull().references(() => tasks.id, { onDelete: 'cascade' }),
    downstreamId: text('downstream_id').notNull().references(() => tasks.id, { onDelete: 'cascade' }),
  },
  (t) => [
    primaryKey({ columns: [t.upstreamId, t.downstreamId] }),
    index('edges_downstream_idx').on(t.downstreamId),
    index('edges_dag_idx').on(t.dagId),
  ],
);

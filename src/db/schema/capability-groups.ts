import { sql } from 'drizzle-orm';
import { doublePrecision, integer, pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * Every distinct claim group tasks have had (inserted with the tasks): a set of required
 * capabilities and a set of accepted models. A claim reads the groups the agent covers (its
 * capabilities hold the group's, and it has one of the group's models, or the group names none),
 * then walks each group's range of tasks_ready_group_idx: tasks it cannot take are never visited.
 */
export const capabilityGroups = pgTable('capability_groups', {
  capKey: text('cap_key').notNull(),
  capabilities: text('capabilities').array().notNull(),
  models: text('models').array().notNull().default(sql`'{}'::text[]`),
  /** The tenant whose tasks the group holds: a claim walks each (group, tenant) range, tenants in fair-share order. */
  tenantId: text('tenant_id').notNull().default('default'),
}, (t) => [primaryKey({ columns: [t.capKey, t.tenantId], name: 'capability_groups_pk' })]);

/** Learned run time per task type: the median of recent completed attempts, refreshed by the duration learner (maintenance/duration-learner.ts). */
export const taskTypeDurations = pgTable('task_type_durations', {
  type: text('type').primaryKey(),
  medianSec: doublePrecision('median_sec').notNull(),
  samples: integer('samples').notNull(),
  updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
});

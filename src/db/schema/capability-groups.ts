import { doublePrecision, integer, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * Every distinct set of required capabilities tasks have had (inserted with the
 * tasks). A claim reads the groups the agent covers, then walks each group's
 * range of tasks_ready_group_idx: tasks it cannot take are never visited.
 */
export const capabilityGroups = pgTable('capability_groups', {
  capKey: text('cap_key').primaryKey(),
  capabilities: text('capabilities').array().notNull(),
});

/** Learned run time per task type: the median of recent completed attempts, refreshed by the priority refresher. */
export const taskTypeDurations = pgTable('task_type_durations', {
  type: text('type').primaryKey(),
  medianSec: doublePrecision('median_sec').notNull(),
  samples: integer('samples').notNull(),
  updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
});

import { bigint, integer, jsonb, numeric, pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * One row per finished attempt, written when the attempt ends (completed, failed,
 * reaped or released) so the hot path writes it once. The attempt in progress is on the task row.
 * Keyed by (task, fence): the fencing token is unique per claim, so it names the attempt
 * without a serial id and its index (one index insertion fewer per completed task).
 */
export const attempts = pgTable(
  'attempts',
  {
    taskId: text('task_id').notNull(),
    dagId: text('dag_id').notNull(),
    attempt: integer('attempt').notNull(),
    fence: integer('fence').notNull(),
    agentId: text('agent_id'),
    /** completed | failed | released | waiting (ended by spawning subtasks with wait) | cancelled */
    outcome: text('outcome').notNull(),
    errorClass: text('error_class'),
    errorMessage: text('error_message'),
    startedAt: timestamp('started_at', { withTimezone: true }).notNull(),
    endedAt: timestamp('ended_at', { withTimezone: true }).notNull().defaultNow(),
    durationMs: integer('duration_ms').notNull(),
    costUsd: numeric('cost_usd', { mode: 'number' }).notNull().default(0),
    tokensIn: bigint('tokens_in', { mode: 'number' }).notNull().default(0),
    tokensOut: bigint('tokens_out', { mode: 'number' }).notNull().default(0),
    model: text('model'),
    /**
     * No longer written: an attempt's replayed cost is the sum of its task_step_replays rows (attemptListForTask).
     * Kept so that a node of the version before, which writes it, can run beside this one during an upgrade.
     */
    replayedCostUsdUnused: numeric('replayed_cost_usd', { mode: 'number' }).notNull().default(0),
    details: jsonb('details'),
  },
  // No index on dag_id: a DAG's attempts are found through its tasks ((dag_id, key), then this key), and an index
  // entry per attempt was 80 bytes of a flat task's WAL (migration 0053, docs/benchmarks.md "What a task writes").
  (t) => [primaryKey({ name: 'attempts_pkey', columns: [t.taskId, t.fence] })],
);

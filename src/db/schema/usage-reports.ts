import { sql } from 'drizzle-orm';
import { bigint, bigserial, index, integer, numeric, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import { tasks } from './tasks.js';

/**
 * The usage ledger: one row per usage report an attempt made while it ran (ctx.reportCost, POST
 * /api/tasks/:id/usage), written when it was reported and charged at once to the task, its DAG and its agent, so a
 * crash keeps it. `report_key` is the reporter's id for the report: the same report sent again (its reply was lost)
 * is applied once. Deleted with its task.
 */
export const usageReports = pgTable(
  'usage_reports',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    taskId: text('task_id').notNull().references(() => tasks.id, { onDelete: 'cascade' }),
    /** The claim that reported it. */
    fence: integer('fence').notNull(),
    attempt: integer('attempt').notNull(),
    dagId: text('dag_id').notNull(),
    agentId: text('agent_id'),
    /** The API token it came through (HTTP, MCP); null for an agent run in a dagent process. */
    tokenId: text('token_id'),
    reportKey: text('report_key').notNull(),
    model: text('model'),
    /** Null: the reporter could not price it (a model it has no price for): cost unknown, shown as such, never as 0. */
    costUsd: numeric('cost_usd', { mode: 'number' }).default(0),
    tokensIn: bigint('tokens_in', { mode: 'number' }).notNull().default(0),
    tokensOut: bigint('tokens_out', { mode: 'number' }).notNull().default(0),
    /** Input tokens read from the provider's prompt cache, and written to it: priced apart from the rest. */
    cachedReadTokens: bigint('cached_read_tokens', { mode: 'number' }).notNull().default(0),
    cacheWriteTokens: bigint('cache_write_tokens', { mode: 'number' }).notNull().default(0),
    reportedAt: timestamp('reported_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex('usage_reports_key_idx').on(t.taskId, t.fence, t.reportKey),
    index('usage_reports_dag_idx').on(t.dagId, t.reportedAt),
    // What `dagent costs`, the dashboard and the metrics show as cost unknown: usually no rows at all.
    index('usage_reports_unpriced_idx').on(t.model).where(sql`${t.costUsd} is null`),
  ],
);

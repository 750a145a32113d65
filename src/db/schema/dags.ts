import { sql } from 'drizzle-orm';
import { DAG_STATES } from '../../model/state-machine.js';
import { tenants } from './tenants.js';
import { check, date, integer, real, jsonb, numeric, pgTable, text, timestamp, uniqueIndex, index } from 'drizzle-orm/pg-core';

/** One submitted DAG. `tasks_open` counts tasks not yet COMPLETED or CANCELLED; it reaching 0 completes the DAG. */
export const dags = pgTable(
  'dags',
  {
    id: text('id').primaryKey(),
    name: text('name').notNull(),
    title: text('title'),
    /** running | completed | blocked | cancelled — derived by dagStatusRefresh (db/queries/dags.ts) and the completion statement */
    status: text('status').notNull().default('running'),
    blockedReason: text('blocked_reason'),
    params: jsonb('params').notNull().default({}),
    spec: jsonb('spec').notNull(),
    sourceFile: text('source_file'),
    budgetUsd: numeric('budget_usd', { mode: 'number' }),
    spentUsd: numeric('spent_usd', { mode: 'number' }).notNull().default(0),
    /** Sum of the max costs its claimed and running tasks reserved: spent + reserved never exceeds the budget. */
    reservedUsd: numeric('reserved_usd', { mode: 'number' }).notNull().default(0),
    /** Most it may spend in one UTC day (null: no cap); day_spent_usd is what it spent on spend_day. */
    dailyBudgetUsd: numeric('daily_budget_usd', { mode: 'number' }),
    daySpentUsd: numeric('day_spent_usd', { mode: 'number' }).notNull().default(0),
    spendDay: date('spend_day'),
    /** The share of a limit past which a report's answer says `low` (null: USAGE_DEFAULTS.lowAt). */
    budgetLowAt: real('budget_low_at'),
    tasksTotal: integer('tasks_total').notNull().default(0),
    tasksOpen: integer('tasks_open').notNull().default(0),
    idempotencyKey: text('idempotency_key'),
    createdBy: text('created_by').notNull().default('api'),
    /** What its agents may spawn into it (dag/spec.ts SpawnPolicy); null: data-only subtasks of their own making. */
    spawnPolicy: jsonb('spawn_policy'),
    /** For a DAG a schedule fired: the fire's scheduled instant (created_by is cron:<name>). */
    scheduledAt: timestamp('scheduled_at', { withTimezone: true }),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
    completedAt: timestamp('completed_at', { withTimezone: true }),
    /**
     * When retention began deleting it (src/engine/ops/retention.ts): its tasks go in batches, then the row. A DAG
     * being pruned is not run again (rerun answers 409), so a prune that a crash interrupted resumes where it was.
     */
    prunedAt: timestamp('pruned_at', { withTimezone: true }),
    /** Every tag its tasks carry at submit (`defaults.tags` and each task's): what the DAG list filters by. */
    tags: text('tags').array().notNull().default(sql`'{}'::text[]`),
    /**
     * For a DAG made by `dag rerun --model/--set` (engine/dag/rerun-changed.ts): the finished DAG it re-runs with a change. No
     * foreign key: retention may delete that DAG first, and the rerun keeps saying what it was made from.
     */
    rerunOf: text('rerun_of'),
    /** What the rerun changed, and which tasks it ran again and carried over (RerunChangeRecord); null for any other DAG. */
    rerunChange: jsonb('rerun_change'),
    /** The tenant it belongs to (tenants.ts); its tasks carry it too. */
    tenantId: text('tenant_id').notNull().default('default').references(() => tenants.id),
  },
  (t) => [
    check('dags_status_ck', sql.raw(`status in (${DAG_STATES.map((s) => `'${s}'`).join(', ')})`)),
    // Per tenant: one tenant's key never finds (nor collides with) another's DAG.
    uniqueIndex('dags_tenant_idempotency_key_uq').on(t.tenantId, t.idempotencyKey).where(sql`${t.idempotencyKey} is not null`),
    index('dags_status_idx').on(t.status, t.createdAt),
    // The DAG list, newest first, a page at a time (keyset on created_at, id), and its tag filter.
    index('dags_created_idx').on(t.createdAt, t.id),
    index('dags_tags_idx').using('gin', t.tags),
    // The claim reads the open DAGs whose budget is spent once per statement (tasks-claim.ts, broke): this keeps it off the history.
    // Retention: finished DAGs, oldest first, and those a prune has begun.
    index('dags_finished_idx').on(t.completedAt).where(sql`${t.status} in ('completed', 'cancelled') and ${t.prunedAt} is null`),
    index('dags_pruning_idx').on(t.id).where(sql`${t.prunedAt} is not null`),
    index('dags_budget_open_idx').on(t.id).where(sql`${t.budgetUsd} is not null and ${t.status} in ('running', 'blocked')`),
    // The reruns of a DAG (its page links them).
    index('dags_rerun_of_idx').on(t.rerunOf).where(sql`${t.rerunOf} is not null`),
    // A tenant's DAG list.
    index('dags_tenant_created_idx').on(t.tenantId, t.createdAt, t.id),
    // A tenant's spend of a day (its money quota, summed by the share loop) and its open DAGs (their reservations, its queued count).
    index('dags_tenant_spend_day_idx').on(t.tenantId, t.spendDay),
    index('dags_tenant_open_idx').on(t.tenantId).where(sql`${t.status} in ('running', 'blocked')`),
    index('dags_daily_budget_open_idx').on(t.id).where(sql`${t.dailyBudgetUsd} is not null and ${t.status} in ('running', 'blocked')`),
  ],
);

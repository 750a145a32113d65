import { sql } from 'drizzle-orm';
import { bigint, check, integer, jsonb, numeric, pgTable, primaryKey, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import { STEP_SCOPES, type StepScope } from '../../model/step-scopes.js';
import { tasks } from './tasks.js';

/** How long a recorded step is reused: by every later attempt of its task, or only by the attempt that recorded it. */
export { STEP_SCOPES, type StepScope };

/**
 * Durable steps (ctx.step, PUT /api/tasks/:id/steps/:name): the JSON result of a named piece of an attempt's work (an
 * LLM call, a tool call), recorded under the holder's fence so a retry, a lost lease or a crash replays it instead of
 * paying for it again. A `task` step is recorded once per task (first write wins) and replayed by every later attempt;
 * an `attempt` step runs fresh in each attempt and is kept for visibility only.
 *
 * Keyed by (task, fence, name): the fence names the attempt exactly (a release or a shared crash spends no attempt
 * number, so `attempt` repeats across claims; a re-run numbers from 1 again). Deleted with the task (foreign key, on
 * delete cascade), so retention's task batches take them along.
 */
export const taskSteps = pgTable(
  'task_steps',
  {
    taskId: text('task_id').notNull().references(() => tasks.id, { onDelete: 'cascade' }),
    dagId: text('dag_id').notNull(),
    name: text('name').notNull(),
    /** task | attempt (STEP_SCOPES). */
    scope: text('scope').notNull(),
    /** The attempt that recorded it (tasks.attempts when it did). */
    attempt: integer('attempt').notNull(),
    /** The fence of the claim that recorded it. */
    fence: integer('fence').notNull(),
    result: jsonb('result'),
    /** The result's size as JSON, in bytes (at most LIMITS.stepResultBytes). */
    sizeBytes: integer('size_bytes').notNull(),
    /** How long the step's work took, as the agent measured it. */
    durationMs: integer('duration_ms'),
    /** What the agent reported spending while the step ran; also charged with its attempt, never again on a replay. */
    costUsd: numeric('cost_usd', { mode: 'number' }).notNull().default(0),
    tokensIn: bigint('tokens_in', { mode: 'number' }).notNull().default(0),
    tokensOut: bigint('tokens_out', { mode: 'number' }).notNull().default(0),
    model: text('model'),
    /** When the step's work began, as the agent says (null: not said). */
    startedAt: timestamp('started_at', { withTimezone: true }),
    recordedAt: timestamp('recorded_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ name: 'task_steps_pkey', columns: [t.taskId, t.fence, t.name] }),
    // First write wins: one task-scoped result per name and task.
    uniqueIndex('task_steps_task_name_idx').on(t.taskId, t.name).where(sql`${t.scope} = 'task'`),
    check('task_steps_scope_ck', sql`${t.scope} in ('task', 'attempt')`),
  ],
);

/**
 * A task-scoped step an attempt replayed instead of running (its lookup found it recorded by an earlier attempt): when,
 * and what the step had cost, which the attempt did not pay again. Written by the lookup itself, under the holder's
 * live lease, so a crash right after a replay keeps it; keyed by (task, fence, name), so a lookup repeated after a lost
 * reply writes nothing more. The sum per (task, fence) is the attempt's replayed cost.
 */
export const taskStepReplays = pgTable(
  'task_step_replays',
  {
    taskId: text('task_id').notNull().references(() => tasks.id, { onDelete: 'cascade' }),
    /** The fence of the claim that replayed it. */
    fence: integer('fence').notNull(),
    name: text('name').notNull(),
    /** The attempt that replayed it (tasks.attempts when it did). */
    attempt: integer('attempt').notNull(),
    /** The fence that had recorded the step. */
    recordedFence: integer('recorded_fence').notNull(),
    costUsd: numeric('cost_usd', { mode: 'number' }).notNull().default(0),
    replayedAt: timestamp('replayed_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ name: 'task_step_replays_pkey', columns: [t.taskId, t.fence, t.name] })],
);

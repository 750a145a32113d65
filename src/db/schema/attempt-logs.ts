import { bigserial, index, integer, jsonb, pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * What an agent logged during an attempt (ctx.log in TypeScript, POST /api/tasks/:id/logs over HTTP), one row per
 * line, kept per attempt within LIMITS.logLinesPerAttempt and LIMITS.logBytesPerAttempt. Keyed like `attempts`, by
 * (task, fence): written while the attempt runs, before its attempts row exists. Never on the claim or completion path.
 */
export const attemptLogs = pgTable(
  'attempt_logs',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    taskId: text('task_id').notNull(),
    fence: integer('fence').notNull(),
    /** The level pino names: trace, debug, info, warn, error, fatal. */
    level: text('level').notNull(),
    message: text('message').notNull(),
    /** The line's other fields (`ctx.log.info({ file }, 'read')`), as JSON. */
    fields: jsonb('fields'),
    /** When the agent logged it, kept between the attempt's claim and the time it was received. */
    at: timestamp('at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index('attempt_logs_task_idx').on(t.taskId, t.fence, t.id)],
);

/** Per attempt: how much of its log is kept, and how many lines the limits dropped. */
export const attemptLogStats = pgTable(
  'attempt_log_stats',
  {
    taskId: text('task_id').notNull(),
    fence: integer('fence').notNull(),
    /** The attempt's number (tasks.attempts when it ran); a re-run numbers its attempts from 1 again, the fence does not. */
    attempt: integer('attempt').notNull(),
    lines: integer('lines').notNull().default(0),
    bytes: integer('bytes').notNull().default(0),
    dropped: integer('dropped').notNull().default(0),
  },
  (t) => [primaryKey({ name: 'attempt_log_stats_pkey', columns: [t.taskId, t.fence] })],
);

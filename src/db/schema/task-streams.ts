import { sql } from 'drizzle-orm';
import { bigint, check, integer, pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';
import { tasks } from './tasks.js';

/**
 * Streams (ctx.stream, POST /api/tasks/:id/streams/:name): what an agent writes while its attempt runs (an LLM's
 * answer as it is generated), kept per attempt and read live or afterwards from any position. Keyed by (task, fence,
 * name): the fence names the attempt exactly. Deleted with the task (foreign key, on delete cascade); the chunks of a
 * finished task also go earlier, after DAGENT_RETENTION_STREAMS.
 *
 * A stream's row counts what was written: `chunks` is the last chunk's sequence number (chunks are numbered from 1,
 * in order, each written once: a writer's batch names the sequence it starts at), `bytes` their size. It has ended
 * when `end_reason` is set (`ended`: the writer ended it; `truncated`: its attempt's streams reached
 * STREAM_DEFAULTS.attemptBytes), or when its attempt has ended (its attempts row: a writer killed mid-stream).
 */
export const taskStreams = pgTable(
  'task_streams',
  {
    taskId: text('task_id').notNull().references(() => tasks.id, { onDelete: 'cascade' }),
    fence: integer('fence').notNull(),
    name: text('name').notNull(),
    /** The attempt's number (tasks.attempts when it wrote). */
    attempt: integer('attempt').notNull(),
    chunks: integer('chunks').notNull().default(0),
    /** What its chunks count against LIMITS.streamBytesPerAttempt: their bytes, each at least STREAM_DEFAULTS.chunkMinBytes. */
    bytes: bigint('bytes', { mode: 'number' }).notNull().default(0),
    endReason: text('end_reason'),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ name: 'task_streams_pkey', columns: [t.taskId, t.fence, t.name] }),
    check('task_streams_end_ck', sql`${t.endReason} in ('ended', 'truncated')`),
  ],
);

/** One chunk of a stream: text, or JSON (kept as its text). */
export const taskStreamChunks = pgTable(
  'task_stream_chunks',
  {
    taskId: text('task_id').notNull().references(() => tasks.id, { onDelete: 'cascade' }),
    fence: integer('fence').notNull(),
    name: text('name').notNull(),
    seq: integer('seq').notNull(),
    /** text | json */
    kind: text('kind').notNull(),
    data: text('data').notNull(),
    writtenAt: timestamp('written_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ name: 'task_stream_chunks_pkey', columns: [t.taskId, t.fence, t.name, t.seq] }),
    check('task_stream_chunks_kind_ck', sql`${t.kind} in ('text', 'json')`),
  ],
);

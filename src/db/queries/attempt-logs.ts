import { sql } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { dateOf, rowsOf, textArray } from '../statement.js';

/** Per-attempt logs: who may append (the holder, at its fence), what is kept, and reading them back. */

export interface LogLineRow { level: string; message: string; fields: string | null; at: string | null; bytes: number }

export interface AttemptLogStats { fence: number; attempt: number; lines: number; bytes: number; dropped: number }

/** An attempt's counts, and what the task's other attempts (and releases) kept. */
export interface AttemptLogCounts extends AttemptLogStats { taskLines: number; taskBytes: number }

/** The attempt a log line belongs to, if `fence` still holds the task (claimed or running), locked against its end. */
export async function attemptLogHolder(db: Db, taskId: string, fence: number): Promise<{ attempt: number; claimedAt: string } | undefined> {
  const [r] = await rowsOf<{ attempt: number; claimedAt: string }>(db, sql`
    select attempts as attempt, claimed_at::text as "claimedAt" from tasks
    where id = ${taskId} and fence = ${fence} and status in ('claimed', 'running') for share`);
  return r;
}

/**
 * The attempt's counts so far, its row locked: appends to one attempt are counted one after another; and the task's
 * over its other attempts (only one holds the task at a time, and its appends hold the task's row: attemptLogHolder).
 */
export async function attemptLogStatsLock(db: Db, taskId: string, fence: number, attempt: number): Promise<AttemptLogCounts> {
  const [r] = await rowsOf<AttemptLogCounts>(db, sql`
    with mine as (
      insert into attempt_log_stats (task_id, fence, attempt) values (${taskId}, ${fence}, ${attempt})
      on conflict (task_id, fence) do update set attempt = excluded.attempt
      returning fence, attempt, lines, bytes, dropped
    ),
    others as (
      select coalesce(sum(lines), 0)::int as lines, coalesce(sum(bytes), 0)::float8 as bytes
      from attempt_log_stats where task_id = ${taskId} and fence <> ${fence}
    )
    select mine.*, mine.lines + others.lines as "taskLines", mine.bytes + others.bytes as "taskBytes" from mine, others`);
  return r!;
}

/** Store lines in one statement; each `at` is kept between the attempt's claim and now (an agent's clock is not trusted). */
export async function attemptLogInsert(db: Db, taskId: string, fence: number, claimedAt: string, lines: LogLineRow[]): Promise<void> {
  if (lines.length === 0) return;
  await db.execute(sql`
    insert into attempt_logs (task_id, fence, level, message, fields, at)
    select ${taskId}, ${fence}, x.level, x.message, x.fields::jsonb, least(greatest(coalesce(x.at::timestamptz, now()), ${claimedAt}::timestamptz), now())
    from unnest(${textArray(lines.map((l) => l.level))}, ${textArray(lines.map((l) => l.message))},
                ${textArray(lines.map((l) => l.fields))}, ${textArray(lines.map((l) => l.at))}) with ordinality as x(level, message, fields, at, n)
    order by x.n`);
}

export async function attemptLogStatsAdd(db: Db, taskId: string, fence: number, add: { lines: number; bytes: number; dropped: number }): Promise<void> {
  await db.execute(sql`
    update attempt_log_stats set lines = lines + ${add.lines}, bytes = bytes + ${add.bytes}, dropped = dropped + ${add.dropped}
    where task_id = ${taskId} and fence = ${fence}`);
}

/** Every attempt of a task that logged, oldest first. */
export function attemptLogAttempts(db: Db, taskId: string): Promise<AttemptLogStats[]> {
  return rowsOf(db, sql`
    select fence, attempt, lines, bytes, dropped from attempt_log_stats where task_id = ${taskId} order by fence`);
}

export interface LogLine { id: number; level: string; message: string; fields: Record<string, unknown> | null; at: Date }

/** Lines as the raw statement gives them: `at` as text. */
const logLinesOf = (rows: Array<Omit<LogLine, 'at'> & { at: string }>): LogLine[] => rows.map((r) => ({ ...r, at: dateOf(r.at)! }));

/** An attempt's lines after `afterId`, in order; through attempt_logs_task_idx. */
export async function attemptLogRead(db: Db, taskId: string, fence: number, afterId: number, limit: number): Promise<LogLine[]> {
  return logLinesOf(await rowsOf(db, sql`
    select id, level, message, fields, at from attempt_logs
    where task_id = ${taskId} and fence = ${fence} and id > ${afterId}
    order by id limit ${limit}`));
}

/** An attempt's last `limit` lines, in order; the same index, walked backwards. */
export async function attemptLogReadTail(db: Db, taskId: string, fence: number, limit: number): Promise<LogLine[]> {
  return logLinesOf(await rowsOf(db, sql`
    select * from (
      select id, level, message, fields, at from attempt_logs
      where task_id = ${taskId} and fence = ${fence}
      order by id desc limit ${limit}
    ) last order by id`));
}

import { withTx } from '../../db/tx.js';
import type { Db } from '../../db/handle.js';
import {
  attemptLogAttempts, attemptLogHolder, attemptLogInsert, attemptLogRead, attemptLogReadTail, attemptLogStatsAdd, attemptLogStatsLock,
  type AttemptLogStats, type LogLine, type LogLineRow,
} from '../../db/queries/attempt-logs.js';
import { taskGet, taskHolderGet } from '../../db/queries/tasks-read.js';
import { LIMITS } from '../../config/index.js';
import { LeaseLostError, NotFoundError } from '../../errors.js';
import { jsonProblem } from '../../json-guard.js';
import { INSTANT_EARLIEST_MS, INSTANT_LATEST_MS, isoInstantRead } from '../../durations.js';
import type { TaskRef } from '../attempt/refusal.js';

/**
 * Per-attempt logs: what an agent logs while it holds a task is stored with that attempt (task, fence), so a
 * person sees what the task said (`dagent logs`, the dashboard, `dlq show`). The holder appends, at its fence,
 * while the task is claimed or running; each attempt keeps at most LIMITS.logLinesPerAttempt lines and
 * LIMITS.logBytesPerAttempt bytes, each task at most LIMITS.logLinesPerTask and LIMITS.logBytesPerTask over all its
 * attempts and releases, and the lines past either are counted as dropped: a chatty or hostile agent fills its own
 * task's allowance, never the database.
 */

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface LogLineInput {
  level?: string;
  message: string;
  fields?: Record<string, unknown> | null;
  /** When it was logged (ISO 8601 or ms since the epoch); kept between the claim and its arrival. Default: arrival. */
  at?: string | number;
}

export interface AppendResult { stored: number; dropped: number }

/** Append lines to the attempt `ref` holds; a LeaseLostError when it holds the task no more. */
export async function attemptLogAppend(db: Db, ref: TaskRef, lines: LogLineInput[]): Promise<AppendResult> {
  const rows = lines.map(logLineRow);
  return withTx(db, async (tx) => {
    const holder = await attemptLogHolder(tx, ref.taskId, ref.fence);
    if (!holder) {
      const h = await taskHolderGet(tx, ref.taskId);
      if (!h) throw new NotFoundError('task', ref.taskId);
      throw new LeaseLostError(ref.taskId, ref.fence, h.fence, h.status);
    }
    const stats = await attemptLogStatsLock(tx, ref.taskId, ref.fence, holder.attempt);
    // In order, until the first line past any allowance (the attempt's, the task's over all its attempts and
    // releases): what is kept is a prefix, never a line here and there.
    let keptBytes = 0;
    let kept = 0;
    for (const r of rows) {
      const lines = kept + 1;
      const bytes = keptBytes + r.bytes;
      if (stats.lines + lines > LIMITS.logLinesPerAttempt || stats.bytes + bytes > LIMITS.logBytesPerAttempt) break;
      if (stats.taskLines + lines > LIMITS.logLinesPerTask || stats.taskBytes + bytes > LIMITS.logBytesPerTask) break;
      kept = lines;
      keptBytes = bytes;
    }
    await attemptLogInsert(tx, ref.taskId, ref.fence, holder.claimedAt, rows.slice(0, kept));
    await attemptLogStatsAdd(tx, ref.taskId, ref.fence, { lines: kept, bytes: keptBytes, dropped: rows.length - kept });
    return { stored: kept, dropped: rows.length - kept };
  });
}

/** A line as stored: a known level, the message cut to LIMITS.logLineChars, fields as JSON within that size too. */
function logLineRow(l: LogLineInput): LogLineRow {
  const level = (LOG_LEVELS as readonly string[]).includes(l.level ?? '') ? l.level! : 'info';
  let message = storable(String(l.message ?? ''));
  if (message.length > LIMITS.logLineChars) message = `${message.slice(0, LIMITS.logLineChars)}… (cut: ${message.length} characters)`;
  let fields: string | null = null;
  if (l.fields && typeof l.fields === 'object' && Object.keys(l.fields).length > 0) {
    const text = jsonText(l.fields);
    fields = text === null || jsonProblem(JSON.parse(text), LIMITS.jsonDepth)
      ? JSON.stringify({ _dropped: 'the fields could not be stored as JSON' })
      : text.length > LIMITS.logLineChars ? JSON.stringify({ _dropped: `the fields were ${text.length} characters as JSON; at most ${LIMITS.logLineChars}` }) : text;
  }
  return {
    level, message, fields, at: logLineAt(l.at),
    bytes: Buffer.byteLength(message) + (fields === null ? 0 : Buffer.byteLength(fields)),
  };
}

/**
 * A line's `at` as the insert takes it, or null (the line is dated when it arrives). The HTTP API and MCP refuse a date
 * dagent does not take (isoInstantRead); from a caller in this process (the agent runtime) it is dropped instead, where
 * PostgreSQL's error would fail the whole batch.
 */
function logLineAt(at: string | number | undefined): string | null {
  const d = typeof at === 'number' ? new Date(at) : typeof at === 'string' ? isoInstantRead(at) : undefined;
  return d instanceof Date && d.getTime() >= INSTANT_EARLIEST_MS && d.getTime() <= INSTANT_LATEST_MS ? d.toISOString() : null;
}

/** PostgreSQL stores neither NUL in text nor an unpaired surrogate in jsonb: each becomes U+FFFD. */
function storable(s: string): string {
  return s.replace(/\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');
}

function jsonText(v: unknown): string | null {
  try {
    return JSON.stringify(v, (_k, x: unknown) => (typeof x === 'string' ? storable(x) : typeof x === 'bigint' ? String(x) : x)) ?? null;
  } catch {
    return null;
  }
}

export interface AttemptLogView {
  /** Every attempt of the task that logged, oldest first. */
  attempts: AttemptLogStats[];
  /** The attempt shown (the one asked for, else the latest); undefined when the task has logged nothing. */
  attempt?: AttemptLogStats & { entries: LogLine[]; running: boolean; next: number };
}

/** Most lines one read of an attempt's log returns (GET /api/tasks/:id/logs without `limit`); `next` pages on. */
export const LOG_READ_PAGE_LINES = 1_000;

/**
 * A task's log: one attempt's lines after `after` (a line id), up to `limit` (default LOG_READ_PAGE_LINES), or its
 * last `tail` lines. The attempt is the one numbered `attempt` (the latest of that number: a re-run numbers its
 * attempts from 1 again), or the one at `fence` (a reader paging through one attempt), else the latest that logged.
 */
export async function attemptLogsGet(
  db: Db, taskId: string, opts: { attempt?: number; fence?: number; after?: number; limit?: number; tail?: number } = {},
): Promise<AttemptLogView> {
  const task = await taskGet(db, taskId);
  if (!task) throw new NotFoundError('task', taskId);
  const attempts = await attemptLogAttempts(db, taskId);
  const chosen = opts.fence !== undefined ? attempts.find((a) => a.fence === opts.fence)
    : opts.attempt === undefined ? attempts.at(-1) : attempts.filter((a) => a.attempt === opts.attempt).at(-1);
  if (opts.attempt !== undefined && !chosen) throw new NotFoundError(`log of attempt ${opts.attempt} of task`, taskId);
  if (!chosen) return { attempts };
  const entries = opts.tail !== undefined
    ? await attemptLogReadTail(db, taskId, chosen.fence, opts.tail)
    : await attemptLogRead(db, taskId, chosen.fence, opts.after ?? 0, opts.limit ?? LOG_READ_PAGE_LINES);
  const running = task.fence === chosen.fence && ['claimed', 'running'].includes(task.status);
  return { attempts, attempt: { ...chosen, entries, running, next: entries.at(-1)?.id ?? opts.after ?? 0 } };
}

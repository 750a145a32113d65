import { sql, type SQL } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { STREAM_DEFAULTS } from '../../config/index.js';
import { rowsOf, STREAM_CHANNEL, textArray } from '../statement.js';
import { taskHeldSql, taskStandingOf, taskStandingSql, type TaskStanding } from './task-hold.js';

/**
 * Streams (schema/task-streams.ts): a batch of chunks appended by its attempt's holder, in order and once; read from
 * a position. One statement each, so a batch is never half written and a reader never sees a gap.
 */

export type StreamChunkKind = 'text' | 'json';
export interface StreamChunkInput { kind: StreamChunkKind; data: string }

/**
 * What the append saw: `refused` (the fence no longer holds the task under a live lease: nothing written),
 * `appended`, or `not_appended` with the stream as it stood, to say why (ended, a repeat of a batch already
 * written, a gap, or past the attempt's bytes).
 */
export type StreamAppendResult =
  | { kind: 'refused'; task: TaskStanding }
  | { kind: 'appended'; chunks: number }
  | { kind: 'not_appended'; exists: boolean; chunks: number; endReason: string | null; attemptBytes: number; attemptStreams: number; attempt: number };

/**
 * Append `chunks` (numbered from `fromSeq`) to the stream `name` of the attempt `fence` holds, and NOTIFY its
 * readers, in ONE statement: only when the batch starts right after the last chunk written (a batch sent again
 * after a lost reply starts before it: nothing is written twice), the stream has not ended, and the attempt's
 * streams stay within `attemptBytesMax`. `end`: the stream ends after this batch. The stream's row is the lock
 * (the upsert's ON CONFLICT re-checks its conditions on the latest version), so two writers cannot interleave.
 */
export async function streamAppend(db: Db, o: {
  taskId: string; fence: number; name: string; fromSeq: number; chunks: StreamChunkInput[]; end: boolean; attemptBytesMax: number;
  /** Most streams the attempt may have: a new one past it is not made. */
  attemptStreamsMax: number;
}): Promise<StreamAppendResult> {
  const bytes = streamBatchBytes(o.chunks);
  const n = o.chunks.length;
  // What the attempt's streams hold: read under the stream row's lock by the upsert (a few rows: one per stream).
  const used = (task: SQL, fence: SQL) => sql`(select coalesce(sum(x.bytes), 0) from task_streams x where x.task_id = ${task} and x.fence = ${fence})`;
  const [r] = await rowsOf<Record<string, unknown>>(db, sql`
    with holder as (
      select t.id, t.fence, t.attempts from tasks t where t.id = ${o.taskId} and ${taskHeldSql('t', o.fence)} for key share of t
    ), upsert as (
      insert into task_streams as s (task_id, fence, name, attempt, chunks, bytes, end_reason)
      select h.id, h.fence, ${o.name}, h.attempts, ${n}::int, ${bytes}::bigint, case when ${o.end} then 'ended' end
      from holder h
      -- A new stream starts at 1; an existing one goes to the conflict's update, whose conditions decide (an
      -- INSERT … SELECT of no row never reaches ON CONFLICT).
      -- A new stream needs a chunk or its end (an empty first batch makes no row), and room among the attempt's streams.
      where (exists (select 1 from task_streams x where x.task_id = h.id and x.fence = h.fence and x.name = ${o.name})
          or (${o.fromSeq}::int = 1 and (${n}::int > 0 or ${o.end})
              and (select count(*) from task_streams x where x.task_id = h.id and x.fence = h.fence) < ${o.attemptStreamsMax}))
        and ${used(sql`h.id`, sql`h.fence`)} + ${bytes} <= ${o.attemptBytesMax}
      on conflict (task_id, fence, name) do update set chunks = s.chunks + ${n}::int, bytes = s.bytes + ${bytes}::bigint,
        end_reason = case when ${o.end} then 'ended' end, updated_at = now()
      where s.end_reason is null and s.chunks = ${o.fromSeq}::int - 1 and ${used(sql`s.task_id`, sql`s.fence`)} + ${bytes} <= ${o.attemptBytesMax}
      returning s.chunks
    ), written as (
      insert into task_stream_chunks (task_id, fence, name, seq, kind, data)
      select ${o.taskId}, ${o.fence}, ${o.name}, ${o.fromSeq}::int + c.ord::int - 1, c.kind, c.data
      from unnest(${textArray(o.chunks.map((c) => c.kind))}, ${textArray(o.chunks.map((c) => c.data))}) with ordinality as c(kind, data, ord)
      where exists (select 1 from upsert)
      returning 1
    ), woke as (
      select pg_notify(${STREAM_CHANNEL}, ${`${o.taskId}:${o.fence}:${o.name}`}) where exists (select 1 from upsert)
    )
    select exists (select 1 from holder) as held, (select chunks from upsert) as appended, (select count(*) from written) as rows,
      (select count(*) from woke) as woke, (select attempts from holder) as attempt,
      s.chunks, s.end_reason, s.task_id is not null as exists, ${used(sql`${o.taskId}`, sql`${o.fence}::int`)} as attempt_bytes,
      (select count(*) from task_streams x where x.task_id = ${o.taskId} and x.fence = ${o.fence}) as attempt_streams,
      ${taskStandingSql(o.taskId)}
    from (select 1) one left join task_streams s on s.task_id = ${o.taskId} and s.fence = ${o.fence} and s.name = ${o.name}`);
  const row = r!;
  if (row.held !== true) return { kind: 'refused', task: taskStandingOf(row) };
  if (row.appended != null) return { kind: 'appended', chunks: Number(row.appended) };
  return {
    kind: 'not_appended', chunks: Number(row.chunks ?? 0), endReason: (row.end_reason as string | null) ?? null,
    exists: row.exists === true, attemptBytes: Number(row.attempt_bytes), attemptStreams: Number(row.attempt_streams), attempt: Number(row.attempt),
  };
}

/**
 * End a stream whose next batch (from `fromSeq`, of `bytes`) does not fit its attempt's bytes (`truncated`): only
 * when, on the latest row, it has not ended, the batch is still the next one, and it still does not fit (a batch
 * racing its own resend must not end the stream). Creates its row for a first batch. True when it ended it.
 */
export async function streamTruncate(db: Db, o: { taskId: string; fence: number; name: string; attempt: number; fromSeq: number; bytes: number; attemptBytesMax: number }): Promise<boolean> {
  const used = sql`(select coalesce(sum(x.bytes), 0) from task_streams x where x.task_id = ${o.taskId} and x.fence = ${o.fence}::int)`;
  const [r] = await rowsOf<{ n: number }>(db, sql`
    with ended as (
      insert into task_streams as s (task_id, fence, name, attempt, end_reason)
      select ${o.taskId}, ${o.fence}, ${o.name}, ${o.attempt}, 'truncated'
      -- A first batch makes the row; a later one's row exists and goes to the conflict's update (an INSERT … SELECT
      -- of no row never reaches ON CONFLICT).
      where (${o.fromSeq}::int = 1 or exists (select 1 from task_streams x where x.task_id = ${o.taskId} and x.fence = ${o.fence}::int and x.name = ${o.name}))
        and ${used} + ${o.bytes} > ${o.attemptBytesMax}
      on conflict (task_id, fence, name) do update set end_reason = 'truncated', updated_at = now()
      where s.end_reason is null and s.chunks = ${o.fromSeq}::int - 1 and ${used} + ${o.bytes} > ${o.attemptBytesMax}
      returning 1
    ), woke as (select pg_notify(${STREAM_CHANNEL}, ${`${o.taskId}:${o.fence}:${o.name}`}) from ended)
    select (select count(*) from ended)::int as n, (select count(*) from woke) as w`);
  return (r?.n ?? 0) > 0;
}

/** The bytes a batch counts against its attempt's: each chunk at least STREAM_DEFAULTS.chunkMinBytes. */
export function streamBatchBytes(chunks: StreamChunkInput[]): number {
  return chunks.reduce((n, c) => n + Math.max(Buffer.byteLength(c.data), STREAM_DEFAULTS.chunkMinBytes), 0);
}

/** A stream as a reader needs it: which attempt, how far written, and whether it (or its attempt) has ended. */
export interface StreamState {
  fence: number; attempt: number; chunks: number; bytes: number;
  endReason: string | null;
  /** The outcome of its attempt once the attempt has ended (its attempts row; `ended` when it has none), else null. */
  attemptOutcome: string | null;
}

/**
 * The stream `name` of `taskId` a reader follows: of the attempt numbered `attempt`, else the latest attempt's (the
 * task's current hold when it holds one, else the last stream written). A hold that has not written yet is
 * followed too (chunks 0), so a reader can connect before the writer starts. `fence`: that claim's, exactly (a
 * reader that already follows it; with `mustExist`, only if written or held under it). Undefined: no such stream.
 */
export async function streamStateGet(
  db: Db, taskId: string, name: string, attempt?: number, fence?: number, mustExist = false, followUnwritten = true,
): Promise<StreamState | undefined> {
  // A hold that has not written this name yet is followed only for a name a reader may expect before the first
  // write (`followUnwritten`): any other name must have been written by some attempt, so a reader cannot make the
  // node poll streams that no one writes.
  const unwritten = followUnwritten ? sql`true` : sql`exists (select 1 from task_streams w where w.task_id = ${taskId} and w.name = ${name})`;
  const [r] = await rowsOf<Record<string, unknown>>(db, sql`
    with target as (
      ${fence !== undefined
    ? sql`select ${fence}::int as fence,
          coalesce((select s.attempt from task_streams s where s.task_id = ${taskId} and s.name = ${name} and s.fence = ${fence}),
            (select t.attempts from tasks t where t.id = ${taskId} and t.fence = ${fence}), 0) as attempt
        -- mustExist (a reader asking for it): a stream written under that fence, or the task held under it now.
        where not ${mustExist} or exists (select 1 from task_streams s where s.task_id = ${taskId} and s.name = ${name} and s.fence = ${fence})
          or (${unwritten} and exists (select 1 from tasks t where t.id = ${taskId} and t.fence = ${fence} and t.status in ('claimed', 'running')))`
    : attempt !== undefined
    ? sql`select s.fence, s.attempt from task_streams s where s.task_id = ${taskId} and s.name = ${name} and s.attempt = ${attempt} order by s.fence desc limit 1`
    : sql`select fence, attempt from (
          select t.fence, t.attempts as attempt, 1 as pref from tasks t
          where t.id = ${taskId} and t.status in ('claimed', 'running') and ${unwritten}
            and t.fence > coalesce((select max(fence) from task_streams where task_id = ${taskId} and name = ${name}), 0)
          union all
          select s.fence, s.attempt, 2 from task_streams s where s.task_id = ${taskId} and s.name = ${name}
        ) c order by pref, fence desc limit 1`}
    )
    select g.fence, g.attempt, coalesce(s.chunks, 0) as chunks, coalesce(s.bytes, 0) as bytes, s.end_reason,
      -- Its attempt's outcome once it has one; an attempt that ended without a row (released, taken back before it
      -- started) has ended all the same once the task no longer runs under its fence.
      coalesce((select outcome from attempts a where a.task_id = ${taskId} and a.fence = g.fence),
        case when exists (select 1 from tasks t where t.id = ${taskId} and t.fence = g.fence and t.status in ('claimed', 'running')) then null else 'ended' end) as outcome
    from target g left join task_streams s on s.task_id = ${taskId} and s.fence = g.fence and s.name = ${name}`);
  if (!r) return undefined;
  return {
    fence: Number(r.fence), attempt: Number(r.attempt), chunks: Number(r.chunks), bytes: Number(r.bytes),
    endReason: (r.end_reason as string | null) ?? null, attemptOutcome: (r.outcome as string | null) ?? null,
  };
}

/** Up to `limit` chunks of a stream after sequence `afterSeq`, in order. */
export function streamChunksRead(db: Db, o: { taskId: string; fence: number; name: string; afterSeq: number; limit: number }): Promise<Array<{ seq: number; kind: StreamChunkKind; data: string }>> {
  return rowsOf(db, sql`
    select seq, kind, data from task_stream_chunks
    where task_id = ${o.taskId} and fence = ${o.fence} and name = ${o.name} and seq > ${o.afterSeq}
    order by seq limit ${o.limit}`);
}

/** Every stream of a task: name, attempt, how much was written, how it ended (the end_reason check allows these two). */
export function streamListForTask(db: Db, taskId: string): Promise<Array<{ name: string; fence: number; attempt: number; chunks: number; bytes: number; endReason: 'ended' | 'truncated' | null }>> {
  return rowsOf(db, sql`
    select name, fence, attempt, chunks, bytes::float8 as bytes, end_reason as "endReason" from task_streams
    where task_id = ${taskId} order by fence, name`);
}

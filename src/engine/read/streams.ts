import type { Db } from '../../db/handle.js';
import { streamChunksRead, streamListForTask, streamStateGet, type StreamChunkKind, type StreamState } from '../../db/queries/streams.js';
import { taskHolderGet } from '../../db/queries/tasks-read.js';
import { NotFoundError } from '../../errors.js';
import { STREAM_NAME_DEFAULT } from '../attempt/streams.js';
import { STREAM_DEFAULTS } from '../../config/index.js';

/**
 * Reading a stream (db/queries/streams.ts) from a position: which attempt's stream a reader follows, and whether it
 * has ended, from its own end or its attempt's (a writer killed mid-stream leaves what it flushed, ended by the
 * attempt's failure).
 */

export type { StreamState };
export interface StreamChunk { seq: number; kind: StreamChunkKind; data: string }
/** Why a stream ended: by its writer, at its attempt's bytes, or with its attempt (its outcome: failed, completed, …). */
export interface StreamEnd { reason: 'ended' | 'truncated' | 'attempt_ended'; outcome: string | null; chunks: number }

/** The stream a reader follows (the named attempt's, else the latest's); NOT_FOUND naming what is missing. */
export async function streamOpen(db: Db, taskId: string, name: string, attempt?: number, fence?: number): Promise<StreamState> {
  // Before its first write only the default stream is followed (or one some attempt of the task has written).
  const s = await streamStateGet(db, taskId, name, fence === undefined ? attempt : undefined, fence, fence !== undefined, name === STREAM_NAME_DEFAULT);
  if (s) return s;
  if (!(await taskHolderGet(db, taskId))) throw new NotFoundError('task', taskId);
  throw new NotFoundError('stream', `${taskId}/${name}${fence !== undefined ? ` of fence ${fence}` : attempt !== undefined ? ` of attempt ${attempt}` : ''}`);
}

/** The end of a stream whose chunks a reader has read up to `readSeq`, or null while more may come. */
export async function streamEndAfter(db: Db, s: { taskId: string; fence: number; name: string }, readSeq: number): Promise<StreamEnd | null> {
  const st = await streamStateGet(db, s.taskId, s.name, undefined, s.fence);
  if (!st || readSeq < st.chunks) return null;
  if (st.endReason) return { reason: st.endReason as 'ended' | 'truncated', outcome: st.attemptOutcome, chunks: st.chunks };
  if (st.attemptOutcome) return { reason: 'attempt_ended', outcome: st.attemptOutcome, chunks: st.chunks };
  return null;
}

export function streamRead(db: Db, s: { taskId: string; fence: number; name: string }, afterSeq: number, limit: number): Promise<StreamChunk[]> {
  return streamChunksRead(db, { ...s, afterSeq, limit });
}

/** Every stream of a task, oldest attempt first; NOT_FOUND for an unknown task. */
export async function streamList(db: Db, taskId: string) {
  const streams = await streamListForTask(db, taskId);
  if (streams.length === 0 && !(await taskHolderGet(db, taskId))) throw new NotFoundError('task', taskId);
  return streams;
}

/** What one read of a stream answers at once: its chunks after a position, whether more are written, its end. */
export interface StreamPage {
  stream: StreamState;
  /** In order, after the position asked for: up to `maxBytes` (past it by one chunk at most). */
  chunks: StreamChunk[];
  /** The sequence number to read on from (the last chunk returned; the position asked for when none). */
  last: number;
  /** More chunks are written past `last` already. */
  more: boolean;
  /** Set once the stream has ended and `last` is its last chunk. */
  end: StreamEnd | null;
}

/** A stream's chunks after `afterSeq` (of the attempt named, else the latest's), for a reader that asks again for more. */
export async function streamPageRead(
  db: Db, taskId: string, name: string, o: { afterSeq: number; attempt?: number; maxBytes?: number },
): Promise<StreamPage> {
  const stream = await streamOpen(db, taskId, name, o.attempt);
  const key = { taskId, fence: stream.fence, name };
  const maxBytes = o.maxBytes ?? STREAM_DEFAULTS.readBytes;
  const chunks: StreamChunk[] = [];
  let last = o.afterSeq;
  let bytes = 0;
  for (;;) {
    const rows = await streamRead(db, key, last, STREAM_DEFAULTS.readRows);
    for (const r of rows) {
      if (bytes >= maxBytes) break;
      chunks.push(r);
      // As the chunk counts against its attempt's bytes: empty chunks still fill the page.
      bytes += Math.max(Buffer.byteLength(r.data), STREAM_DEFAULTS.chunkMinBytes);
      last = r.seq;
    }
    if (rows.length < STREAM_DEFAULTS.readRows || bytes >= maxBytes) break;
  }
  const end = await streamEndAfter(db, key, last);
  const now = end ? end.chunks : (await streamStateGet(db, taskId, name, undefined, stream.fence))?.chunks ?? 0;
  return { stream, chunks, last, more: now > last, end };
}

import { LIMITS } from '../../config/index.js';
import type { Db } from '../../db/handle.js';
import { streamAppend, streamBatchBytes, streamTruncate, type StreamChunkInput } from '../../db/queries/streams.js';
import { InvalidInputError } from '../../errors.js';
import { holdRefusalRead, type TaskRef } from './refusal.js';

/**
 * Streams written while an attempt runs (ctx.stream, POST /api/tasks/:id/streams/:name): chunks appended in order,
 * each once, by the holder of the task (db/queries/streams.ts). Past the attempt's bytes (LIMITS.streamBytesPerAttempt)
 * the stream being written ends, marked `truncated`, and the attempt goes on; a write after a stream ended is
 * answered with how it ended and writes nothing.
 */

/** A stream's name: what readers ask for (`output` by default). */
export const STREAM_NAME_PATTERN = /^[a-z0-9][a-z0-9_.-]{0,63}$/;
export const STREAM_NAME_DEFAULT = 'output';
/** The highest chunk sequence (a PostgreSQL integer with room): from_seq, ?from and Last-Event-ID stay within it. */
export const STREAM_SEQ_MAX = 2_000_000_000;
/** Most chunks in one write: a writer's batch coalesces text, so a batch holds few. */
export const STREAM_CHUNKS_PER_WRITE = 1000;

export interface StreamWriteInput {
  name: string;
  /** The sequence number of the batch's first chunk: one after the last chunk the writer wrote (1 for the first). */
  fromSeq: number;
  chunks: StreamChunkInput[];
  /** The stream ends after these chunks. */
  end?: boolean;
}

export interface StreamWriteAnswer {
  /** False: nothing written (a batch sent again after a lost reply, or the stream had ended). */
  applied: boolean;
  /** The sequence number of the stream's last chunk. */
  chunks: number;
  /** Set once the stream has ended: `ended` (by its writer) or `truncated` (its attempt's streams hold LIMITS.streamBytesPerAttempt). */
  ended: 'ended' | 'truncated' | null;
}

/** The longest prefix of `s` within `maxBytes` as UTF-8, never splitting a surrogate pair. */
export function streamTextPrefix(s: string, maxBytes: number): string {
  if (Buffer.byteLength(s) <= maxBytes) return s;
  let bytes = 0;
  let i = 0;
  while (i < s.length) {
    const cp = s.codePointAt(i)!;
    const len = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    if (bytes + len > maxBytes) break;
    bytes += len;
    i += cp >= 0x10000 ? 2 : 1;
  }
  return s.slice(0, i);
}

/** Text as the chunks a write carries: at most LIMITS.streamChunkBytes each, a NUL (which PostgreSQL text cannot hold) as U+FFFD. */
export function streamTextChunks(text: string): StreamChunkInput[] {
  const chunks: StreamChunkInput[] = [];
  let rest = text.replaceAll('\u0000', '\uFFFD');
  while (rest.length) {
    // A limit set below one character's bytes still makes progress (and the write is refused, naming the chunk).
    const take = streamTextPrefix(rest, LIMITS.streamChunkBytes) || String.fromCodePoint(rest.codePointAt(0)!);
    chunks.push({ kind: 'text', data: take });
    rest = rest.slice(take.length);
  }
  return chunks;
}

/** The write's fields, checked: a clear error naming the field, before anything is written. */
export function streamWriteCheck(w: StreamWriteInput): void {
  if (typeof w.name !== 'string' || !STREAM_NAME_PATTERN.test(w.name)) {
    throw new InvalidInputError(`stream name ${JSON.stringify(w.name)}: lowercase letters, digits, _ . - (1-64, starting with a letter or digit)`, { field: 'name' });
  }
  if (!Number.isInteger(w.fromSeq) || w.fromSeq < 1 || w.fromSeq > STREAM_SEQ_MAX) {
    throw new InvalidInputError(`from_seq ${w.fromSeq}: expected a whole number from 1`, { field: 'from_seq' });
  }
  if (!Array.isArray(w.chunks) || w.chunks.length > STREAM_CHUNKS_PER_WRITE) {
    throw new InvalidInputError(`chunks: expected a list of at most ${STREAM_CHUNKS_PER_WRITE}`, { field: 'chunks' });
  }
  w.chunks.forEach((c, i) => {
    if (c.kind !== 'text' && c.kind !== 'json') throw new InvalidInputError(`chunks[${i}]: expected text or json`, { field: `chunks[${i}]` });
    if (typeof c.data !== 'string') throw new InvalidInputError(`chunks[${i}]: expected a string`, { field: `chunks[${i}]` });
    if (Buffer.byteLength(c.data) > LIMITS.streamChunkBytes) {
      throw new InvalidInputError(`chunks[${i}]: ${Buffer.byteLength(c.data)} bytes; a chunk holds at most ${LIMITS.streamChunkBytes} (LIMITS.streamChunkBytes): write it as several`, { field: `chunks[${i}]` });
    }
    // NUL cannot be stored in a PostgreSQL text column: refused here, not as a 500 from the database.
    if (c.data.includes('\u0000')) throw new InvalidInputError(`chunks[${i}]: contains a NUL character`, { field: `chunks[${i}]` });
  });
}

/**
 * Append one batch of the holder `ref`'s stream. LEASE_LOST (NOT_FOUND for no such task, BUDGET_EXCEEDED after a
 * stop at a spend limit) when the fence no longer holds the task: nothing is written.
 */
export async function streamWrite(db: Db, ref: TaskRef, w: StreamWriteInput): Promise<StreamWriteAnswer> {
  streamWriteCheck(w);
  const end = w.end === true;
  const append = { taskId: ref.taskId, fence: ref.fence, name: w.name, fromSeq: w.fromSeq, chunks: w.chunks, end, attemptBytesMax: LIMITS.streamBytesPerAttempt, attemptStreamsMax: LIMITS.streamsPerAttempt };
  for (let tries = 0; ; tries++) {
    const r = await streamAppend(db, append);
    if (r.kind === 'refused') throw await holdRefusalRead(db, ref, r.task);
    if (r.kind === 'appended') return { applied: true, chunks: r.chunks, ended: end ? 'ended' : null };
    const last = w.fromSeq + w.chunks.length - 1;
    // Written before (a batch sent again after its reply was lost): answered as it was.
    if (w.chunks.length > 0 && last <= r.chunks) return { applied: false, chunks: r.chunks, ended: r.endReason as StreamWriteAnswer['ended'] };
    if (r.endReason) return { applied: false, chunks: r.chunks, ended: r.endReason as StreamWriteAnswer['ended'] };
    if (!r.exists && w.fromSeq === 1 && w.chunks.length === 0 && !end) return { applied: false, chunks: 0, ended: null };
    if (w.fromSeq !== r.chunks + 1) {
      throw new InvalidInputError(`from_seq ${w.fromSeq}: stream ${w.name} has ${r.chunks} chunks; the next batch starts at ${r.chunks + 1}`, { field: 'from_seq', chunks: r.chunks });
    }
    if (!r.exists && r.attemptStreams >= LIMITS.streamsPerAttempt) {
      throw new InvalidInputError(`stream ${w.name}: an attempt writes at most ${LIMITS.streamsPerAttempt} streams (LIMITS.streamsPerAttempt)`, { field: 'name' });
    }
    // This statement saw the stream as it stood when it began: a batch racing its own resend (the twin committed
    // meanwhile) looks like one that does not fit. Asked again once, in a fresh statement, before ending anything.
    if (tries === 0) continue;
    // Past the attempt's bytes: the stream ends here, marked, and the attempt goes on.
    if (await streamTruncate(db, { ...append, attempt: r.attempt, bytes: streamBatchBytes(w.chunks) })) return { applied: false, chunks: r.chunks, ended: 'truncated' };
    if (tries >= 3) throw new Error(`stream ${w.name}: the batch from ${w.fromSeq} neither appended nor truncated after ${tries + 1} tries`);
  }
}

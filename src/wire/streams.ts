import { z } from 'zod';
import { LIMITS } from '../config/index.js';
import { STREAM_CHUNKS_PER_WRITE, STREAM_NAME_PATTERN } from '../engine/attempt/streams.js';

/** A stream write's body and answer (src/http/routes/task-streams.ts): the same as ctx.stream's writer sends. */

export const streamNameSchema = z.string().regex(STREAM_NAME_PATTERN, { error: 'lowercase letters, digits, _ . - (1-64, starting with a letter or digit)' });

const chunkSchema = z.union([
  z.strictObject({ text: z.string().max(LIMITS.streamChunkBytes).describe('text, appended to what came before') }),
  z.strictObject({ json: z.unknown().describe('a JSON value: a chunk of its own') }),
]);

export const streamWriteBodyFields = {
  from_seq: z.number().int().min(1).max(2_000_000_000)
    .describe('the sequence number of this batch\'s first chunk: one after your last (1 for the first). A batch sent again after a lost reply names the same and is written once'),
  chunks: z.array(chunkSchema).max(STREAM_CHUNKS_PER_WRITE).describe(`in order; each at most ${LIMITS.streamChunkBytes} bytes`),
  end: z.boolean().optional().describe('the stream ends after these chunks (readers see it end)'),
};

export const streamWriteAnswerSchema = z.object({
  applied: z.boolean().describe('false: nothing written (a batch written before, or the stream had ended)'),
  chunks: z.number().describe('the sequence number of the stream\'s last chunk: your next batch starts after it'),
  ended: z.enum(['ended', 'truncated']).nullable()
    .describe(`set once the stream has ended: ended (you ended it) or truncated (the attempt's streams reached ${LIMITS.streamBytesPerAttempt} bytes: write no more; the attempt goes on)`),
}).meta({ id: 'StreamWriteAnswer' });

/** A stream of a task as listed (GET /api/tasks/:id/streams): which attempt wrote it, how much, and how it ended. */
export const streamViewSchema = z.object({
  name: z.string(),
  attempt: z.number().describe('the attempt that wrote it (?attempt= of GET /api/tasks/:id/streams/:name)'),
  fence: z.number().describe('the fence of that attempt\'s claim'),
  chunks: z.number().describe('the sequence number of its last chunk (chunks are numbered from 1)'),
  bytes: z.number().describe('what its chunks count against the attempt\'s bytes: their size, each at least STREAM_DEFAULTS.chunkMinBytes (64)'),
  endReason: z.enum(['ended', 'truncated']).nullable()
    .describe('ended: its writer ended it; truncated: its attempt\'s streams reached their bytes; null: not ended by either (it may still be written, or it ended with its attempt)'),
}).meta({ id: 'StreamView' });
export type StreamView = z.infer<typeof streamViewSchema>;

export const streamListAnswerSchema = z.object({
  streams: z.array(streamViewSchema).describe('oldest attempt first, by name within an attempt'),
});
export type StreamListAnswer = z.infer<typeof streamListAnswerSchema>;

import type { Logger } from 'pino';
import type { Db } from '../db/handle.js';
import type { StreamChunkInput } from '../db/queries/streams.js';
import type { TaskRef } from '../engine/attempt/refusal.js';
import { STREAM_NAME_DEFAULT, streamTextPrefix, streamWrite, streamWriteCheck, type StreamWriteAnswer } from '../engine/attempt/streams.js';
import { LIMITS, STREAM_DEFAULTS } from '../config/index.js';
import { DagentError, InvalidInputError } from '../errors.js';
import { untilReachable } from './until-reachable.js';

/** What ctx.stream(name) returns: write text or JSON as it is produced; end when done. */
export interface StreamWriter {
  /** The stream's name (`output` unless named). */
  readonly name: string;
  /** Append text (appended to what came before) or a JSON value (a chunk of its own). Buffered; durable within STREAM_DEFAULTS.batchMs. */
  write(value: unknown): void;
  /** Send what is buffered now; resolves once it is durable. */
  flush(): Promise<void>;
  /** End the stream: what is buffered, then the end. Readers see it end. Further writes are ignored. */
  end(): Promise<void>;
  /** Set once the stream ended: `ended` (end()), `truncated` (the attempt's streams reached LIMITS.streamBytesPerAttempt), or `lost` (the task is no longer this attempt's). */
  readonly ended: 'ended' | 'truncated' | 'lost' | null;
}

/**
 * One attempt's streams. Each stream buffers what is written and sends it as one statement per STREAM_DEFAULTS.batchMs
 * (or batchBytes), adjacent text coalesced into chunks of at most LIMITS.streamChunkBytes, one batch in flight: a
 * token-by-token writer costs a few statements a second. Each batch names the sequence it starts at, so a batch sent
 * again after a lost reply is written once. The attempt's end flushes every stream first; a stream not ended by its
 * writer ends with its attempt (readers see the attempt's outcome).
 */
export class AttemptStreams {
  private readonly streams = new Map<string, Stream>();

  constructor(private readonly db: Db, private readonly ref: TaskRef, private readonly log: Logger) {}

  open(name: string = STREAM_NAME_DEFAULT): StreamWriter {
    let s = this.streams.get(name);
    if (!s) {
      streamWriteCheck({ name, fromSeq: 1, chunks: [] });
      this.streams.set(name, s = new Stream(this.db, this.ref, name, this.log));
    }
    return s;
  }

  /** Send what every stream buffers: before the attempt's end is reported. */
  async flush(): Promise<void> {
    await Promise.all([...this.streams.values()].map((s) => s.flush()));
  }
}

class Stream implements StreamWriter {
  private pending: StreamChunkInput[] = [];
  private pendingBytes = 0;
  /** The last pending chunk's bytes (text grows it a token at a time: not measured again at each). */
  private lastTextBytes = 0;
  private nextSeq = 1;
  private timer: NodeJS.Timeout | undefined;
  private sending: Promise<void> = Promise.resolve();
  private endRequested = false;
  ended: StreamWriter['ended'] = null;

  constructor(private readonly db: Db, private readonly ref: TaskRef, readonly name: string, private readonly log: Logger) {}

  write(value: unknown): void {
    if (this.ended || this.endRequested) return;
    if (typeof value === 'string') this.text(value);
    else {
      let data: string | undefined;
      try {
        data = JSON.stringify(value);
      } catch (err) {
        throw new InvalidInputError(`stream ${this.name}: a value that is not text must be JSON: ${(err as Error).message}`);
      }
      if (data === undefined) throw new InvalidInputError(`stream ${this.name}: ${typeof value} is neither text nor JSON`);
      if (Buffer.byteLength(data) > LIMITS.streamChunkBytes) throw new InvalidInputError(`stream ${this.name}: a JSON chunk holds at most ${LIMITS.streamChunkBytes} bytes`);
      this.push({ kind: 'json', data });
    }
    if (this.pendingBytes >= STREAM_DEFAULTS.batchBytes) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), STREAM_DEFAULTS.batchMs);
  }

  /** Text joins the last pending text chunk while it fits; a NUL (which PostgreSQL text cannot hold) becomes U+FFFD. */
  private text(s: string): void {
    let rest = s.replaceAll('\u0000', '\uFFFD');
    while (rest.length) {
      const last = this.pending.at(-1);
      if (last?.kind === 'text') {
        const take = streamTextPrefix(rest, LIMITS.streamChunkBytes - this.lastTextBytes);
        if (take.length) {
          const n = Buffer.byteLength(take);
          last.data += take;
          this.lastTextBytes += n;
          this.pendingBytes += n;
          rest = rest.slice(take.length);
          continue;
        }
      }
      const take = streamTextPrefix(rest, LIMITS.streamChunkBytes);
      this.push({ kind: 'text', data: take });
      rest = rest.slice(take.length);
    }
  }

  private push(c: StreamChunkInput): void {
    this.pending.push(c);
    this.lastTextBytes = Buffer.byteLength(c.data);
    this.pendingBytes += this.lastTextBytes;
  }

  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.pending;
    const end = this.endRequested;
    this.pending = [];
    this.pendingBytes = 0;
    if (batch.length || end) this.sending = this.sending.then(() => this.send(batch, end));
    return this.sending;
  }

  async end(): Promise<void> {
    if (this.ended || this.endRequested) return this.sending;
    this.endRequested = true;
    return this.flush();
  }

  private async send(chunks: StreamChunkInput[], end: boolean): Promise<void> {
    if (this.ended) return;
    const fromSeq = this.nextSeq;
    let a: StreamWriteAnswer;
    try {
      a = await untilReachable('stream write', () => streamWrite(this.db, this.ref, { name: this.name, fromSeq, chunks, end }), this.log);
    } catch (err) {
      // No longer this attempt's (lost, stopped): what it writes has no attempt to join. The runtime ends the attempt.
      this.ended = 'lost';
      if (!(err instanceof DagentError)) this.log.error({ err, stream: this.name }, 'stream write failed');
      return;
    }
    this.nextSeq = a.chunks + 1;
    if (a.ended === 'truncated') {
      this.ended = 'truncated';
      this.log.warn({ stream: this.name, limitBytes: LIMITS.streamBytesPerAttempt }, 'stream truncated: the attempt\'s streams reached their bytes; the attempt goes on');
    } else if (a.ended) this.ended = a.ended;
  }
}

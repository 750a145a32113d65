import type { Logger } from 'pino';
import type { Db } from '../db/handle.js';
import { ReadyListener } from '../db/ready-listener.js';
import { STREAM_CHANNEL } from '../db/statement.js';
import { STREAM_DEFAULTS } from '../config/index.js';
import { SingleFlight } from '../event-loop.js';
import { streamEndAfter, streamRead, type StreamChunk, type StreamEnd } from '../engine/read/streams.js';

/** A reader of one stream: what it has been sent so far, and where to send the rest. */
export interface StreamReader {
  /** The sequence of the last chunk it has (0: none). */
  after: number;
  send(chunks: StreamChunk[]): void;
  end(e: StreamEnd): void;
}

/**
 * The streams this node's readers follow (GET /api/tasks/:id/streams/:name). Readers of one stream share one feed:
 * a write's NOTIFY (or the poll, every STREAM_DEFAULTS.pollMs) makes ONE read from the furthest-behind reader's
 * position, fanned out to each reader past its own; so 500 readers of a stream cost one statement per write, and no
 * reader holds a PostgreSQL connection (they share the node's one LISTEN connection). A reader that does not read is
 * the route's to cut off (bounded buffers); it does not slow the feed, which only writes to sockets.
 */
export class StreamFeeds {
  private readonly feeds = new Map<string, Feed>();
  private listener: ReadyListener | undefined;
  private unlisten: (() => void) | undefined;
  private starting: Promise<void> | undefined;

  /** `listener`: the node's LISTEN connection when it listens to STREAM_CHANNEL; without one the feeds open their own on first use. */
  constructor(private readonly o: { db: Db; databaseUrl: string; log?: Logger; listener?: ReadyListener; pollMs?: number }) {}

  /**
   * Follow (task, fence, name) from `reader.after`; returns how to stop following, and how to ask for a read now (a
   * reader that paused for its socket to drain set its `after` back to what it sent, and reads on from there).
   */
  async follow(key: { taskId: string; fence: number; name: string }, reader: StreamReader): Promise<{ stop: () => void; wake: () => void }> {
    await (this.starting ??= this.listen());
    const id = `${key.taskId}:${key.fence}:${key.name}`;
    let feed = this.feeds.get(id);
    if (!feed?.open) {
      const made: Feed = new Feed(this.o.db, key, this.o.log, this.o.pollMs ?? STREAM_DEFAULTS.pollMs, () => {
        // Only this feed's own entry: a feed closed while a new one for the same stream was made must not remove it.
        if (this.feeds.get(id) === made) this.feeds.delete(id);
      });
      this.feeds.set(id, feed = made);
    }
    feed.add(reader);
    const f = feed;
    return { stop: () => f.remove(reader), wake: () => void f.wake() };
  }

  /** Readers across every feed (for tests and metrics). */
  get readers(): number {
    let n = 0;
    for (const f of this.feeds.values()) n += f.size;
    return n;
  }

  async close(): Promise<void> {
    for (const f of this.feeds.values()) f.close();
    this.feeds.clear();
    this.unlisten?.();
    await this.listener?.stop();
  }

  private async listen(): Promise<void> {
    const onNotify = (payload?: string) => {
      // A payload names one stream; none (a reconnect: notifications may have been lost) wakes every feed.
      if (payload) void this.feeds.get(payload)?.wake();
      else for (const f of this.feeds.values()) void f.wake();
    };
    if (this.o.listener?.channels.includes(STREAM_CHANNEL)) {
      this.unlisten = this.o.listener.subscribe(onNotify, STREAM_CHANNEL);
      return;
    }
    this.listener = new ReadyListener({ url: this.o.databaseUrl, log: this.o.log, channels: [STREAM_CHANNEL] });
    this.listener.subscribe(onNotify);
    await this.listener.start();
  }
}

class Feed {
  private readonly readers = new Set<StreamReader>();
  private readonly reads = new SingleFlight(() => this.read(), () => this.readers.size > 0, (err) => this.log?.warn({ err, stream: this.key }, 'stream read failed; the next wake retries'));
  private readonly timer: NodeJS.Timeout;
  private closed = false;

  constructor(
    private readonly db: Db, private readonly key: { taskId: string; fence: number; name: string },
    private readonly log: Logger | undefined, pollMs: number, private readonly gone: () => void,
  ) {
    this.timer = setInterval(() => void this.wake(), pollMs);
    this.timer.unref();
  }

  get size(): number {
    return this.readers.size;
  }

  add(r: StreamReader): void {
    this.readers.add(r);
    void this.wake();
  }

  /** Whether it still serves readers (a feed whose last reader left is closed; a new reader makes a new one). */
  get open(): boolean {
    return !this.closed;
  }

  remove(r: StreamReader): void {
    this.readers.delete(r);
    if (this.readers.size === 0) this.close();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    this.readers.clear();
    this.gone();
  }

  /** Read now. Single-flight; a wake during a read runs one more (what it was woken for may have come after the read). */
  wake(): Promise<void> {
    return this.reads.wake();
  }

  private async read(): Promise<void> {
    for (;;) {
      if (this.readers.size === 0) return;
      const from = Math.min(...[...this.readers].map((r) => r.after));
      const rows = await streamRead(this.db, this.key, from, STREAM_DEFAULTS.readRows);
      for (const r of this.readers) {
        const mine = rows.filter((c) => c.seq > r.after);
        if (!mine.length) continue;
        r.after = mine.at(-1)!.seq;
        r.send(mine);
      }
      if (rows.length < STREAM_DEFAULTS.readRows) break;
    }
    // Caught up: has it ended? Each reader that has everything gets the end once.
    const last = Math.min(...[...this.readers].map((r) => r.after));
    const end = await streamEndAfter(this.db, this.key, last);
    if (!end) return;
    for (const r of [...this.readers]) {
      if (r.after >= end.chunks) {
        this.readers.delete(r);
        r.end(end);
      }
    }
    if (this.readers.size === 0) this.close();
  }
}

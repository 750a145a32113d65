import { isConnectionLost } from '../db/pg-errors.js';
import type { Db } from '../db/handle.js';
import type { ClaimedTask } from '../engine/attempt/claim.js';
import type { Completion } from '../engine/attempt/completion-write.js';
import type { HandOff } from '../db/rows.js';
import { attemptsComplete, type AttemptsCompleted } from '../engine/attempt/complete.js';
import type { OutputOutcome } from '../engine/attempt/settle.js';

export const COMPLETION_BATCHER_DEFAULTS = {
  /** Flush once this many completions are waiting (else on the next turn of the event loop). */
  maxBatch: 100,
  /** Flush statements in flight at once: one being written while the next fills. */
  maxInFlight: 2,
  /**
   * The largest batch that hands dependents on (handTo). An agent whose completions come a few at a time is
   * waiting for work: the hand-off saves its next link a NOTIFY and a claim. One completing many at once is busy,
   * and its claim loop takes what they unblock in fewer, fuller statements. Chains 40 × 50 on 32 slots (bench loop,
   * two alternating runs each; batches of ~18): handing on from any batch, PostgreSQL 290–300 and Node 180–200 µs
   * per task, 2.6–2.8k tasks/s; from batches of up to 4, 195–225 and 145 µs, 3.0–3.1k; never, 175–210 and
   * 126–136 µs, 3.0–3.6k. A lone completion (an idle agent's chain, the makespan's single-slot agents) is handed on.
   */
  handOffBatchMax: 4,
} as const;

export interface CompletionBatcherOptions {
  db: Db;
  /** Flush once this many completions are waiting. Default COMPLETION_BATCHER_DEFAULTS.maxBatch. */
  maxBatch?: number;
  /** Most flush statements in flight at once. Default COMPLETION_BATCHER_DEFAULTS.maxInFlight. */
  maxInFlight?: number;
  /** Called after a flush with how many dependents became READY (to wake local claimers). */
  onUnblocked?: (n: number) => void;
  /**
   * The agent whose tasks these are, asked at each flush of up to COMPLETION_BATCHER_DEFAULTS.handOffBatchMax
   * completions (`completing` of them): the dependents they unblock
   * that a claim of it would take first are handed to it in the same statement (tasks-hand-off.ts) and given to
   * `onHanded`. Null: hand nothing this time.
   */
  handTo?: (completing: number) => HandOff | null;
  onHanded?: (tasks: ClaimedTask[]) => void;
  /**
   * A flush that asked for a hand-off failed on a lost connection: it may have committed, and its handed tasks
   * are then held by the agent with no run (the agent releases such tasks once the database answers).
   */
  onHandOffInDoubt?: () => void;
}

export interface CompletionOutcome {
  /** False: refused (a stale fencing token or a task no longer held). */
  completed: boolean;
  /** For a task with output validation, or a validation task: what settling its output decided. */
  settled?: OutputOutcome;
}

/**
 * Collects completions and writes them in one statement per batch. A batch is
 * flushed when full, or on the next turn of the event loop, so a lone completion
 * waits microseconds, not a timer. Each caller learns whether its task was
 * accepted (a stale fencing token is refused, never thrown across the batch).
 */
export class CompletionBatcher {
  private pending: Array<{ c: Completion; resolve: (o: CompletionOutcome) => void; reject: (e: unknown) => void }> = [];
  private scheduled = false;
  private inFlight = 0;
  private readonly maxBatch: number;
  private readonly maxInFlight: number;
  private readonly idle = new Set<() => void>();

  constructor(private readonly o: CompletionBatcherOptions) {
    this.maxBatch = o.maxBatch ?? COMPLETION_BATCHER_DEFAULTS.maxBatch;
    this.maxInFlight = o.maxInFlight ?? COMPLETION_BATCHER_DEFAULTS.maxInFlight;
  }

  complete(c: Completion): Promise<CompletionOutcome> {
    return new Promise((resolve, reject) => {
      this.pending.push({ c, resolve, reject });
      if (this.pending.length >= this.maxBatch) this.flush();
      else if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => {
          this.scheduled = false;
          this.flush();
        });
      }
    });
  }

  /** Resolves once everything added so far is written. */
  async drain(): Promise<void> {
    while (this.pending.length || this.inFlight) {
      this.flush();
      await new Promise<void>((r) => this.idle.add(r));
    }
  }

  /** Flush statements in flight now. */
  get writing(): number {
    return this.inFlight;
  }

  private async write(batch: Array<{ c: Completion; resolve: (o: CompletionOutcome) => void }>): Promise<void> {
    const handTo = batch.length <= COMPLETION_BATCHER_DEFAULTS.handOffBatchMax ? this.o.handTo?.(batch.length) ?? undefined : undefined;
    let r: AttemptsCompleted;
    try {
      r = await attemptsComplete(this.o.db, batch.map((b) => b.c), { handTo });
    } catch (e) {
      if (handTo && isConnectionLost(e)) this.o.onHandOffInDoubt?.();
      throw e;
    }
    // A replayed report was applied the first time (the runtime retries across a dropped connection): not refused.
    batch.forEach((b, i) => {
      const o = r.outcomes[i]!;
      b.resolve({ completed: o.status !== 'refused', settled: o.status === 'settled' ? o.settled : undefined });
    });
    // In the same turn as the resolutions, so no continuation of theirs runs before the handed tasks are given on.
    if (r.handed.length > 0) this.o.onHanded?.(r.handed);
    if (r.unblocked > 0) this.o.onUnblocked?.(r.unblocked);
  }

  private flush(): void {
    if (this.pending.length === 0 || this.inFlight >= this.maxInFlight) return;
    const batch = this.pending.splice(0, this.maxBatch);
    this.inFlight++;
    this.write(batch)
      .catch(async (e) => {
        // One bad row fails the whole statement: unless the database is gone, retry the rows one by one,
        // so only the culprit's caller sees the error.
        if (batch.length === 1 || isConnectionLost(e)) return batch.forEach((b) => b.reject(e));
        for (const b of batch) await this.write([b]).catch((err) => b.reject(err));
      })
      .finally(() => {
        this.inFlight--;
        if (this.pending.length) this.flush();
        for (const f of this.idle) f();
        this.idle.clear();
      });
  }
}

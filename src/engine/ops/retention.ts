import type { Db } from '../../db/handle.js';
import {
  retentionAgentsDelete, retentionDagsDelete, retentionDagsMark, retentionDaglessEventsDelete, retentionDeliveriesDelete,
  retentionLogsDelete, retentionPreview, retentionStreamsDelete, retentionTasksDelete, type RetentionPreview,
} from '../../db/queries/retention.js';
import { RETENTION_DEFAULTS } from '../../config/index.js';
import { eventInsertMany } from '../../db/queries/events.js';

export type { RetentionPreview };

/** What a prune deleted (the preview's counts, less what is kept). */
export type PruneCounts = Omit<RetentionPreview, 'deadLettersKept'>;

export interface PruneOptions {
  /** Finished more than this many seconds ago. */
  olderThanSec: number;
  /** Tasks per statement (RETENTION_DEFAULTS.batchTasks). */
  batchTasks?: number;
  /** Events, deliveries or agents per statement (RETENTION_DEFAULTS.batchRows). */
  batchRows?: number;
  /** DAGs marked at a time (RETENTION_DEFAULTS.dagsPerPass). */
  dagsPerPass?: number;
  /** Called after each statement with the counts so far (the CLI's progress). */
  onProgress?: (soFar: PruneCounts) => void;
  /** Who pruned, for the `retention.pruned` event: `retention` (the loop) or `cli:<user>`. */
  by?: string;
  /**
   * Asked before each statement: false stops the prune there (the loop's time box, a shutdown). What was not
   * deleted yet is left for the next prune, which finishes marked DAGs first.
   */
  goOn?: () => boolean;
}

export function pruneCountsZero(): PruneCounts {
  return { dags: 0, tasks: 0, attempts: 0, logLines: 0, events: 0, deadLetters: 0, agents: 0, deliveries: 0 };
}

/**
 * Delete the streams (chunks, then their rows) of tasks that finished (completed, cancelled, dead-lettered) whose
 * last write is older than `olderThanSec` (DAGENT_RETENTION_STREAMS): `batchRows` chunks per statement. A stream
 * pruned is gone (a reader's 404); the task, its output and its attempts stay until their DAG goes.
 */
export async function pruneStreams(db: Db, o: { olderThanSec: number; batchRows?: number; goOn?: () => boolean }): Promise<{ streams: number; chunks: number }> {
  const batch = o.batchRows ?? RETENTION_DEFAULTS.batchRows;
  const goOn = o.goOn ?? (() => true);
  const total = { streams: 0, chunks: 0 };
  while (goOn()) {
    const r = await retentionStreamsDelete(db, o.olderThanSec, batch);
    total.chunks += r.chunks;
    total.streams += r.streams;
    if (r.chunks < batch) break;
  }
  return total;
}

/** What `prune` would delete now, and the open dead letters it keeps; deletes nothing. */
export function prunePreview(db: Db, olderThanSec: number): Promise<RetentionPreview> {
  return retentionPreview(db, olderThanSec);
}

/**
 * Delete what is older than the period, in batches: every statement is its own transaction and deletes at most
 * `batchTasks` tasks (with their attempts, logs and events) or `batchRows` other rows, so a prune of millions of
 * rows never holds many locks at once, and never locks a row a claim reads.
 *
 * DAGs go in three steps: marked (`pruned_at`, under the DAG's graph lock, so a re-run and a prune never both
 * proceed), their tasks deleted batch by batch, then the DAG rows with their own events and resolved dead letters.
 * A prune a crash interrupted leaves marked DAGs, and the next prune finishes them first. A prune that deleted
 * anything records it in one event of no DAG, `retention.pruned`, with its counts.
 */
export async function prune(db: Db, o: PruneOptions): Promise<PruneCounts> {
  const batchTasks = o.batchTasks ?? RETENTION_DEFAULTS.batchTasks;
  const batchRows = o.batchRows ?? RETENTION_DEFAULTS.batchRows;
  const dagsPerPass = o.dagsPerPass ?? RETENTION_DEFAULTS.dagsPerPass;
  const total = pruneCountsZero();
  const progress = () => o.onProgress?.({ ...total });
  const goOn = o.goOn ?? (() => true);

  prune: for (let marked = Infinity; ;) {
    for (;;) {
      if (!goOn()) break prune;
      const n = await retentionLogsDelete(db, batchRows);
      total.logLines += n;
      if (n < batchRows) break;
    }
    for (;;) {
      if (!goOn()) break prune;
      const b = await retentionTasksDelete(db, batchTasks);
      total.tasks += b.tasks;
      total.attempts += b.attempts;
      total.logLines += b.logLines;
      total.events += b.events;
      progress();
      if (b.tasks < batchTasks) break;
    }
    const d = await retentionDagsDelete(db);
    total.dags += d.dags;
    total.events += d.events;
    total.deadLetters += d.deadLetters;
    progress();
    if (marked < dagsPerPass || !goOn()) break;
    marked = await retentionDagsMark(db, o.olderThanSec, dagsPerPass);
    if (marked === 0) break;
  }

  while (goOn()) {
    const n = await retentionDaglessEventsDelete(db, o.olderThanSec, batchRows);
    total.events += n;
    if (n < batchRows) break;
  }
  while (goOn()) {
    const n = await retentionDeliveriesDelete(db, o.olderThanSec, batchRows);
    total.deliveries += n;
    if (n < batchRows) break;
  }
  while (goOn()) {
    const gone = await retentionAgentsDelete(db, o.olderThanSec, batchRows);
    total.agents += gone.length;
    if (gone.length < batchRows) break;
  }
  progress();
  if (Object.values(total).some((n) => n > 0)) {
    await eventInsertMany(db, [{ type: 'retention.pruned', data: { ...total, olderThanSec: o.olderThanSec, by: o.by ?? 'api' } }]);
  }
  return total;
}

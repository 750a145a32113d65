import { withTx, type Db } from '../db/connection.js';
import { dagLockGraph, dagStatusRefresh } from '../db/queries/dags.js';
import { deadLetterGet, deadLetterList, deadLetterResolve, type DeadLetterRow } from '../db/queries/dead-letters.js';
import { eventInsertMany } from '../db/queries/events.js';
import { taskCancelCascade, taskDeadLetterRetry, taskGet, type TaskRow } from '../db/queries/tasks.js';
import { DagentError, NotFoundError } from '../errors.js';
import { cancelledSettle } from './cancel.js';

export class DeadLetterResolvedError extends DagentError {
  constructor(entry: DeadLetterRow) {
    super('DLQ_RESOLVED', `dead letter ${entry.id} was already resolved (${entry.resolution} at ${entry.resolvedAt?.toISOString()})`, { id: entry.id });
  }
}

export interface DlqFilter { all?: boolean; dagId?: string; limit?: number }

export async function dlqList(db: Db, filter: DlqFilter = {}) {
  const rows = await deadLetterList(db, { open: !filter.all, dagId: filter.dagId, limit: filter.limit });
  return rows.map((r) => ({ ...r.entry, taskKey: r.taskKey, taskType: r.taskType }));
}

export async function dlqShow(db: Db, id: string): Promise<{ entry: DeadLetterRow; task: TaskRow }> {
  const entry = await deadLetterGet(db, id);
  if (!entry) throw new NotFoundError('dead letter', id);
  return { entry, task: (await taskGet(db, entry.taskId))! };
}

export interface Resolution { by?: string; note?: string }

/** Put a dead-lettered task back to READY (optionally with a fresh attempt budget); the DAG flows on. */
export async function dlqRetry(db: Db, id: string, opts: Resolution & { resetAttempts?: boolean } = {}): Promise<DeadLetterRow> {
  return withTx(db, async (tx) => {
    const entry = await openEntry(tx, id);
    await dagLockGraph(tx, entry.dagId);
    await deadLetterResolve(tx, id, 'retried', opts.by ?? 'human', opts.note ?? null);
    await taskDeadLetterRetry(tx, entry.taskId, opts.resetAttempts ?? false);
    await dagStatusRefresh(tx, [entry.dagId]);
    await eventInsertMany(tx, [{ type: 'dlq.retried', dagId: entry.dagId, taskId: entry.taskId, data: { deadLetterId: id, resetAttempts: opts.resetAttempts ?? false, by: opts.by ?? 'human', note: opts.note ?? null } }]);
    return (await deadLetterGet(tx, id))!;
  });
}

/** Give up on a dead-lettered task: cancel it and what depends on it, with a note. */
export async function dlqCancel(db: Db, id: string, opts: Resolution = {}): Promise<DeadLetterRow> {
  return withTx(db, async (tx) => {
    const entry = await openEntry(tx, id);
    await dagLockGraph(tx, entry.dagId);
    await deadLetterResolve(tx, id, 'cancelled', opts.by ?? 'human', opts.note ?? null);
    const cancelled = await taskCancelCascade(tx, [entry.taskId]);
    await cancelledSettle(tx, cancelled, opts.by ?? 'human', opts.note);
    await eventInsertMany(tx, [{ type: 'dlq.cancelled', dagId: entry.dagId, taskId: entry.taskId, data: { deadLetterId: id, by: opts.by ?? 'human', note: opts.note ?? null } }]);
    return (await deadLetterGet(tx, id))!;
  });
}

async function openEntry(tx: Db, id: string): Promise<DeadLetterRow> {
  const entry = await deadLetterGet(tx, id);
  if (!entry) throw new NotFoundError('dead letter', id);
  if (entry.resolution) throw new DeadLetterResolvedError(entry);
  return entry;
}

import { withTx } from '../../db/tx.js';
import type { Db } from '../../db/handle.js';
import { spendByAgent, spendByDag, spendByDay, spendRunning, spendStops } from '../../db/queries/costs.js';
import { dagGet } from '../../db/queries/dags.js';
import { eventInsertMany } from '../../db/queries/events.js';
import { taskGet } from '../../db/queries/tasks-read.js';
import { taskPrioritySet, taskUnclaimableList } from '../../db/queries/tasks-priority.js';
import { InvalidInputError, NotFoundError } from '../../errors.js';

/**
 * A human's priority override: the base priority of one task, or of every
 * unfinished task of a DAG, becomes `priority`; READY tasks are re-ranked at once.
 */
export async function priorityOverride(db: Db, id: string, priority: number, by = 'human'): Promise<{ tasks: number }> {
  if (!Number.isInteger(priority) || priority < 0 || priority > 100) throw new InvalidInputError(`priority must be a whole number 0–100 (lower is more urgent), got ${priority}`);
  return withTx(db, async (tx) => {
    const isDag = id.startsWith('dag_');
    const dagId = isDag ? (await dagGet(tx, id))?.id : (await taskGet(tx, id))?.dagId;
    if (!dagId) throw new NotFoundError(isDag ? 'DAG' : 'task', id);
    const ids = await taskPrioritySet(tx, isDag ? { dagId: id } : { taskId: id }, priority);
    await eventInsertMany(tx, [{ type: 'priority.set', dagId, taskId: isDag ? null : id, data: { priority, tasks: ids.length, by } }]);
    return { tasks: ids.length };
  });
}

export function unclaimableList(db: Db, limit = 200) {
  return taskUnclaimableList(db, limit);
}

/** Spend by day (UTC), by agent (with budget, reserved and left), and by DAG. */
export async function costsReport(db: Db, opts: { days?: number; dags?: number } = {}) {
  const [days, agents, dags, running, stops] = await Promise.all([
    spendByDay(db, opts.days ?? 7), spendByAgent(db), spendByDag(db, opts.dags ?? 20), spendRunning(db, 50), spendStops(db, opts.days ?? 7, 20),
  ]);
  return { days, agents, dags, running, stops };
}

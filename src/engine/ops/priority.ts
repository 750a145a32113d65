import { withTx } from '../../db/tx.js';
import type { Db } from '../../db/handle.js';
import { spendByAgent, spendByDag, spendByDay, spendRunning, spendStops } from '../../db/queries/costs.js';
import { dagGet } from '../../db/queries/dags.js';
import { eventInsertMany } from '../../db/queries/events.js';
import { taskGet } from '../../db/queries/tasks-read.js';
import { taskPrioritySet, taskUnclaimableList } from '../../db/queries/tasks-priority.js';
import { usageByModel } from '../../db/queries/usage.js';
import { COSTS_DEFAULTS } from '../../config/index.js';
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

/**
 * Spend by day (UTC), by agent (with budget, reserved and left), by DAG (the same), the attempts running with what
 * they reported, the attempts a spend limit stopped in those days, and by model from the usage ledger (with the
 * reports whose cost was unknown counted apart). `days` defaults to COSTS_DEFAULTS.days; `tenants`: only theirs.
 */
export async function costsReport(db: Db, opts: { days?: number; tenants?: readonly string[] | null } = {}) {
  const days = opts.days ?? COSTS_DEFAULTS.days;
  const t = opts.tenants ?? null;
  const [byDay, agents, dags, running, stops, models] = await Promise.all([
    spendByDay(db, days, t), spendByAgent(db, t), spendByDag(db, COSTS_DEFAULTS.dags, t), spendRunning(db, COSTS_DEFAULTS.running, t),
    spendStops(db, days, COSTS_DEFAULTS.stops, t), usageByModel(db, undefined, t),
  ]);
  return { days: byDay, agents, dags, running, stops, models };
}

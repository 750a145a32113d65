import type { Logger } from 'pino';
import { withTx } from '../../db/tx.js';
import type { Db } from '../../db/handle.js';
import { dagBudgetSet as dagBudgetWrite, dagGet, dagStatusRefresh, TENANT_QUOTA_BLOCKED, type DagStatusChange } from '../../db/queries/dags.js';
import { eventInsertMany } from '../../db/queries/events.js';
import { readyWake } from '../../db/statement.js';
import { ConflictError, InvalidInputError, NotFoundError } from '../../errors.js';

/**
 * Re-derive DAG status (db/queries/dags.ts dagStatusRefresh) and record what
 * changed: `dag.blocked` when a DAG becomes blocked (reason `budget`,
 * `tenant_quota` or `dead_letter`, with the message), `dag.resumed` when a blocked DAG runs again.
 * Failure and the dead-letter queue record their own events; this is for changes
 * of spend and budget.
 */
export async function dagStatusSync(tx: Db, dagIds: string[]): Promise<DagStatusChange[]> {
  if (dagIds.length === 0) return [];
  const changed = await dagStatusRefresh(tx, dagIds);
  await eventInsertMany(tx, changed.flatMap((d) => {
    if (d.status === 'blocked' && d.previous !== 'blocked') {
      return [{ type: 'dag.blocked', dagId: d.id, data: { reason: blockedKind(d.reason), message: d.reason } }];
    }
    if (d.status === 'running' && d.previous === 'blocked') return [{ type: 'dag.resumed', dagId: d.id, data: {} }];
    if (d.status === 'completed') return [{ type: 'dag.completed', dagId: d.id, data: {} }];
    return [];
  }));
  return changed;
}

/** `budget`, `tenant_quota` or `dead_letter`: what kind of thing holds a blocked DAG, from its reason's text. */
export function blockedKind(reason: string | null): 'budget' | 'tenant_quota' | 'dead_letter' {
  return reason?.startsWith('budget:') ? 'budget' : reason?.startsWith(TENANT_QUOTA_BLOCKED) ? 'tenant_quota' : 'dead_letter';
}

/**
 * Set a running or blocked DAG's budget in USD (`dagent dag budget`, POST
 * /api/dags/:id/budget). A DAG blocked on its budget that can now pay for its
 * next task resumes at once and agents are woken; a lower budget may block it.
 */
export async function dagBudgetSet(
  db: Db, dagId: string, usd: number, o: { by?: string; log?: Logger } = {},
): Promise<{ dagId: string; previous: number | null; budgetUsd: number; status: string; blockedReason: string | null }> {
  if (!Number.isFinite(usd) || usd < 0 || usd > 1e8) throw new InvalidInputError(`budget must be a number of USD from 0 to 100000000, got ${usd}`);
  const result = await withTx(db, async (tx) => {
    const set = await dagBudgetWrite(tx, dagId, usd);
    if (!set) {
      const dag = await dagGet(tx, dagId);
      if (!dag) throw new NotFoundError('DAG', dagId);
      throw new ConflictError(`DAG ${dagId} is ${dag.status}: only a running or blocked DAG's budget can change`, { status: dag.status });
    }
    await eventInsertMany(tx, [{ type: 'dag.budget_set', dagId, data: { previous: set.previous, budgetUsd: usd, by: o.by ?? 'human' } }]);
    await dagStatusSync(tx, [dagId]);
    await readyWake(tx);
    const dag = (await dagGet(tx, dagId))!;
    return { dagId, previous: set.previous, budgetUsd: usd, status: dag.status, blockedReason: dag.blockedReason };
  });
  o.log?.info({ dagId, budgetUsd: usd, previous: result.previous, status: result.status }, 'dag budget set');
  return result;
}

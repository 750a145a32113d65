import { withTx } from '../db/tx.js';
import { dagBudgetedOpenIds, dagTenantQuotaIds } from '../db/queries/dags.js';
import { blockedKind, dagStatusSync } from '../engine/dag/dag-status.js';
import { serviceCreate, type MaintenanceService, type LoopIdentity, type LoopOptions } from './service.js';

export const BUDGET_WATCH_INTERVAL_MS_DEFAULT = 5_000;
const BATCH = 500;

export interface BudgetWatchOptions extends LoopOptions { intervalMs?: number }

/** This loop in the registry (index.ts): its name (its lease's, in maintenance_leases) and whether one process at a time runs it. */
export const BUDGET_WATCH_LOOP = { name: 'budget-watch', gated: true } as const satisfies LoopIdentity;

/**
 * Marks a DAG `blocked` (reason `budget: …`, event `dag.blocked` {reason: budget})
 * once what is left of its budget cannot pay for a READY task and nothing it runs
 * holds a reservation that could come back, and `running` again (`dag.resumed`)
 * when it can (a budget raised, a task cancelled); the same for the DAGs of a
 * tenant past its USD quota (`tenant quota: …`, {reason: tenant_quota}) until the
 * day ends or the quota is raised. The claim already passes such tasks over; this
 * makes the state visible. Spend changes in many statements, so
 * one loop re-derives every budgeted open DAG rather than each of them.
 */
export function budgetWatchCreate(o: BudgetWatchOptions): MaintenanceService {
  return serviceCreate({
    ...BUDGET_WATCH_LOOP,
    db: o.db,
    log: o.log,
    leaseSec: o.leaseSec,
    intervalMs: o.intervalMs ?? BUDGET_WATCH_INTERVAL_MS_DEFAULT,
    async work() {
      let changed = 0;
      // DAGs with a budget, then those of tenants past their USD quota (or blocked by it).
      for (const idsOf of [dagBudgetedOpenIds, dagTenantQuotaIds]) {
        for (let after = ''; ;) {
          const ids = await idsOf(o.db, after, BATCH);
          if (ids.length === 0) break;
          const rows = await withTx(o.db, (tx) => dagStatusSync(tx, ids));
          for (const d of rows) {
            if (d.status === 'blocked') o.log?.warn({ dagId: d.id, reason: blockedKind(d.reason), message: d.reason }, 'dag blocked');
            else o.log?.info({ dagId: d.id, status: d.status }, 'dag status changed');
          }
          changed += rows.length;
          after = ids[ids.length - 1]!;
        }
      }
      return changed;
    },
  });
}

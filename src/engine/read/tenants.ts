import type { Db } from '../../db/handle.js';
import { tenantGet, tenantList } from '../../db/queries/tenants.js';
import type { TenantView } from '../../db/rows.js';
import { NotFoundError } from '../../errors.js';

/** A tenant with the share of the tokens served it received, against its share of the weights (of all tenants). */
export interface TenantShare extends TenantView {
  /** Its part of all tokens served so far (0 when none were). */
  servedShare: number;
  /** Its part of all tenants' weights: what fair share aims at while every tenant has work. */
  weightShare: number;
  /** Why its READY work waits, when a quota holds it back; null otherwise. */
  waiting: string | null;
}

export async function tenantShares(db: Db): Promise<TenantShare[]> {
  const rows = await tenantList(db);
  const served = rows.reduce((n, r) => n + r.servedTokens, 0);
  const weights = rows.reduce((n, r) => n + r.weight, 0);
  return rows.map((r) => ({
    ...r, servedShare: served > 0 ? r.servedTokens / served : 0, weightShare: weights > 0 ? r.weight / weights : 0,
    waiting: r.quotaUntil !== null && r.quotaUntil.getTime() > Date.now() ? r.quotaReason
      : r.maxRunning !== null && r.ready > 0 && r.held >= r.maxRunning
        ? `running quota: ${r.held} of ${r.maxRunning} held; ${r.ready} READY wait for one to end` : null,
  }));
}

/** A 404 naming the tenant when there is none (its row's type is drizzle's: not handed out, not in the declarations). */
export async function tenantRequire(db: Db, id: string): Promise<void> {
  if (!(await tenantGet(db, id))) throw new NotFoundError('tenant', id);
}


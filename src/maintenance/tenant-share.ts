import { TENANT_DEFAULTS } from '../config/index.js';
import { tenantQuotaCheck, tenantServedFold } from '../db/queries/tenants.js';
import { serviceCreate, type LoopIdentity, type LoopOptions, type MaintenanceService } from './service.js';

export interface TenantShareOptions extends LoopOptions { intervalMs?: number }

/** This loop in the registry (index.ts): its name (its lease's, in maintenance_leases) and whether one process at a time runs it. */
export const TENANT_SHARE_LOOP = { name: 'tenant-share', gated: true } as const satisfies LoopIdentity;

/**
 * Fair share's bookkeeping: folds what claims served each tenant (tenant_served) into its virtual time and its tokens
 * of the minute, and brings tenants with nothing READY up to the lowest virtual time of those with work
 * (db/queries/tenants.ts tenantServedFold); then passes over, until the day or the minute ends, the work of tenants
 * past their money or tokens quota (tenantQuotaCheck). With one tenant and no quotas both find nothing to do.
 */
export function tenantShareCreate(o: TenantShareOptions): MaintenanceService {
  return serviceCreate({
    ...TENANT_SHARE_LOOP,
    db: o.db,
    log: o.log,
    leaseSec: o.leaseSec,
    intervalMs: o.intervalMs ?? TENANT_DEFAULTS.foldIntervalMs,
    work: async () => (await tenantServedFold(o.db)) + (await tenantQuotaCheck(o.db)),
  });
}

import { z } from 'zod';
import type { Db } from '../../db/handle.js';
import {
  DEFAULT_TENANT, tenantCount, tenantInsert, tenantList, tenantUpdate, type TenantView,
} from '../../db/queries/tenants.js';
import { withTx } from '../../db/tx.js';
import { TENANT_DEFAULTS, tenantIdSchema } from '../../config/index.js';
import { ConflictError, InvalidInputError, NotFoundError } from '../../errors.js';

export { tenantRequire, tenantShares, type TenantShare } from '../read/tenants.js';

export { DEFAULT_TENANT, type TenantView };

const weightSchema = z.number().gt(0, { error: 'must be more than 0' }).max(1000, { error: 'must be at most 1000' });
const nameSchema = z.string().min(1).max(200);

function checked<T>(schema: z.ZodType<T>, value: unknown, field: string): T {
  const r = schema.safeParse(value);
  if (!r.success) throw new InvalidInputError(`${field} ${JSON.stringify(value)}: ${r.error.issues[0]!.message}`, { field });
  return r.data;
}

/** A quota: a whole number ≥ 1, or null (none). */
const quotaSchema = z.number().int({ error: 'must be a whole number, or none' }).min(1, { error: 'must be at least 1, or none' }).max(10_000_000).nullable();

/** USD a day: a number ≥ 0 (0: nothing is spent), or null (none). */
const usdQuotaSchema = z.number({ error: 'must be a number of USD, or none' }).min(0, { error: 'must be at least 0, or none' }).max(100_000_000).nullable();

/** What an admin sets of a tenant. Quotas: null clears one. */
export interface TenantSettings {
  weight?: number; name?: string; maxRunning?: number | null; maxQueued?: number | null; maxUsdPerDay?: number | null; maxTokensPerMinute?: number | null;
}

function settingsChecked(set: TenantSettings) {
  return {
    weight: set.weight === undefined ? undefined : checked(weightSchema, set.weight, 'weight'),
    name: set.name === undefined ? undefined : checked(nameSchema, set.name, 'name'),
    maxRunning: set.maxRunning === undefined ? undefined : checked(quotaSchema, set.maxRunning, 'max_running'),
    maxQueued: set.maxQueued === undefined ? undefined : checked(quotaSchema, set.maxQueued, 'max_queued'),
    maxUsdPerDay: set.maxUsdPerDay === undefined ? undefined : checked(usdQuotaSchema, set.maxUsdPerDay, 'max_usd_per_day'),
    maxTokensPerMinute: set.maxTokensPerMinute === undefined ? undefined : checked(quotaSchema, set.maxTokensPerMinute, 'max_tokens_per_minute'),
  };
}

/** Make a tenant (an admin's act): its id, a name, its weight in fair share (default 1) and its quotas (default none). */
export async function tenantCreate(db: Db, t: { id: string } & TenantSettings): Promise<TenantView> {
  const id = checked(tenantIdSchema, t.id, 'id');
  const s = settingsChecked(t);
  return withTx(db, async (tx) => {
    if ((await tenantCount(tx)) >= TENANT_DEFAULTS.maxTenants) throw new ConflictError(`there are ${TENANT_DEFAULTS.maxTenants} tenants already, the most there may be`);
    if (!(await tenantInsert(tx, { id, name: s.name ?? null, weight: s.weight ?? 1 }))) throw new ConflictError(`tenant ${id} exists already (dagent tenants set ${id} changes it)`, { id });
    const { weight: _w, name: _n, ...quotas } = s;
    if (Object.values(quotas).some((v) => v !== undefined)) await tenantUpdate(tx, id, quotas);
    return (await tenantList(tx)).find((r) => r.id === id)!;
  });
}

/** Change a tenant's weight, name or quotas. */
export async function tenantSet(db: Db, id: string, set: TenantSettings): Promise<TenantView> {
  if (Object.values(set).every((v) => v === undefined)) {
    throw new InvalidInputError('nothing to change: give a weight, a name or a quota (--weight, --name, --max-running, --max-queued, --max-usd-per-day, --max-tokens-per-minute; over HTTP the same fields in snake_case)');
  }
  const s = settingsChecked(set);
  return withTx(db, async (tx) => {
    if (!(await tenantUpdate(tx, id, s))) throw new NotFoundError('tenant', id);
    return (await tenantList(tx)).find((r) => r.id === id)!;
  });
}

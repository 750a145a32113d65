import { z } from 'zod';
import type { Db } from '../../db/handle.js';
import { DEFAULT_TENANT, tenantCount, tenantGet, tenantInsert, tenantList, tenantUpdate, type TenantView } from '../../db/queries/tenants.js';
import { TENANT_DEFAULTS, tenantIdSchema } from '../../config/index.js';
import { ConflictError, InvalidInputError, NotFoundError } from '../../errors.js';

export { DEFAULT_TENANT, type TenantView };

const weightSchema = z.number().gt(0, { error: 'must be more than 0' }).max(1000, { error: 'must be at most 1000' });
const nameSchema = z.string().min(1).max(200);

function checked<T>(schema: z.ZodType<T>, value: unknown, field: string): T {
  const r = schema.safeParse(value);
  if (!r.success) throw new InvalidInputError(`${field} ${JSON.stringify(value)}: ${r.error.issues[0]!.message}`, { field });
  return r.data;
}

/** Make a tenant (an admin's act): its id, a name, and its weight in fair share (default 1). */
export async function tenantCreate(db: Db, t: { id: string; name?: string; weight?: number }): Promise<TenantView> {
  const id = checked(tenantIdSchema, t.id, 'id');
  const weight = t.weight === undefined ? 1 : checked(weightSchema, t.weight, 'weight');
  const name = t.name === undefined ? null : checked(nameSchema, t.name, 'name');
  if ((await tenantCount(db)) >= TENANT_DEFAULTS.maxTenants) throw new ConflictError(`there are ${TENANT_DEFAULTS.maxTenants} tenants already, the most there may be`);
  if (!(await tenantInsert(db, { id, name, weight }))) throw new ConflictError(`tenant ${id} exists already (dagent tenants set ${id} changes it)`, { id });
  return (await tenantList(db)).find((r) => r.id === id)!;
}

/** Change a tenant's weight or name. */
export async function tenantSet(db: Db, id: string, set: { weight?: number; name?: string }): Promise<TenantView> {
  if (set.weight === undefined && set.name === undefined) throw new InvalidInputError('nothing to change: give --weight or --name');
  const weight = set.weight === undefined ? undefined : checked(weightSchema, set.weight, 'weight');
  const name = set.name === undefined ? undefined : checked(nameSchema, set.name, 'name');
  if (!(await tenantUpdate(db, id, { weight, name }))) throw new NotFoundError('tenant', id);
  return (await tenantList(db)).find((r) => r.id === id)!;
}

/** A tenant with the share of the tokens served it received, against its share of the weights (of all tenants). */
export interface TenantShare extends TenantView {
  /** Its part of all tokens served so far (0 when none were). */
  servedShare: number;
  /** Its part of all tenants' weights: what fair share aims at while every tenant has work. */
  weightShare: number;
}

export async function tenantShares(db: Db): Promise<TenantShare[]> {
  const rows = await tenantList(db);
  const served = rows.reduce((n, r) => n + r.servedTokens, 0);
  const weights = rows.reduce((n, r) => n + r.weight, 0);
  return rows.map((r) => ({ ...r, servedShare: served > 0 ? r.servedTokens / served : 0, weightShare: weights > 0 ? r.weight / weights : 0 }));
}

/** The tenant, or a 404 naming it. */
export async function tenantRequire(db: Db, id: string) {
  const row = await tenantGet(db, id);
  if (!row) throw new NotFoundError('tenant', id);
  return row;
}

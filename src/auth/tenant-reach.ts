import type { Db } from '../db/handle.js';
import { DEFAULT_TENANT, tenantOfObject, type TenantOwned } from '../db/queries/tenants.js';
import { ForbiddenError, InvalidInputError, NotFoundError, tenantUnknownError } from '../errors.js';
import { TENANT_OWNED_LABEL, type Access, type TenantReach } from './access.js';
import type { Principal } from './tokens.js';

/**
 * When the token is known (before the request is read): a token scoped to tenants is refused (403) on settings of the
 * whole deployment, and on the agent routes (`access` agent) unless it is an agent token. Nothing of any tenant's is looked up.
 */
export function tenantRouteRefuse(p: Principal, reach: TenantReach, access: Access): void {
  if (!p.tenants) return;
  if (access === 'agent' && p.role !== 'agent') {
    throw new ForbiddenError(`token ${p.tokenId} is scoped to tenants: it acts as an agent only as an agent token`, { role: p.role });
  }
  if (reach === 'deployment') {
    throw new ForbiddenError(`token ${p.tokenId} is scoped to tenants; settings of the whole deployment need a token of every tenant`, { tenants: p.tenants });
  }
}

/**
 * Once the request was read and found well formed (so a bad body answers the same for any id), just before the
 * handler: a token scoped to tenants reaches only its tenants' objects. An object of another tenant named in the path
 * is a 404, never a 403 that would confirm it exists; and so is an id that names nothing, here, by the same throw, so
 * that no check the handler makes before its own lookup (a rerun's `set` paths, an approval's edited output) can
 * answer one differently from the other. Unscoped tokens pass without a query.
 */
export async function tenantObjectsCheck(db: Db, p: Principal, reach: TenantReach, params: Record<string, string>): Promise<void> {
  if (!p.tenants || typeof reach === 'string') return;
  const [kind, names] = Object.entries(reach)[0] as [TenantOwned, readonly string[]];
  for (const name of names) {
    const id = params[name];
    if (id !== undefined && !(await tenantObjectReach(db, p, kind, id))) throw new NotFoundError(TENANT_OWNED_LABEL[kind], id);
  }
}

/**
 * A 404, worded as for one that does not exist, when the object is of a tenant the principal does not reach; else
 * whether it exists (true for any id when the principal reaches every tenant: nothing is looked up).
 */
export async function tenantObjectReach(db: Db, p: Principal, kind: TenantOwned, id: string): Promise<boolean> {
  if (!p.tenants) return true;
  const tenant = await tenantOfObject(db, kind, id);
  if (tenant !== null && !p.tenants.includes(tenant)) throw new NotFoundError(TENANT_OWNED_LABEL[kind], id);
  return tenant !== null;
}

/** The tenants a principal reads: null for every tenant (an unscoped token, or none: the CLI, a public route). */
export function tenantsOf(p: Principal | null): readonly string[] | null {
  return p?.tenants ?? null;
}

/**
 * The tenant a request that creates or signals work acts in: the one it names, else a scoped token's only tenant (or
 * the default tenant among several), else the default tenant. A scoped token naming another tenant gets the answer
 * a tenant that does not exist gets.
 */
export function tenantForWrite(p: Principal | null, asked: string | undefined): string {
  const scope = p?.tenants;
  if (!scope) return asked ?? DEFAULT_TENANT;
  if (asked !== undefined) {
    if (!scope.includes(asked)) throw tenantUnknownError(asked);
    return asked;
  }
  if (scope.length === 1) return scope[0]!;
  if (scope.includes(DEFAULT_TENANT)) return DEFAULT_TENANT;
  throw new InvalidInputError(`query.tenant: token ${p.tokenId} reaches several tenants (${scope.join(', ')}); name one`, { field: 'query.tenant' });
}

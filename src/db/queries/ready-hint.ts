import { sql, type SQL } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { READY_CHANNEL, rowsOf, textArray } from '../statement.js';

export { readyHintParse, type ReadyHint } from '../ready-hint-payload.js';

/** NOTIFY payloads are at most 8,000 bytes; a key longer than this is announced without its group. */
const KEY_BYTES_MAX = 7_000;

/**
 * One NOTIFY per claim group (and tenant) among `source`'s rows (a CTE with `status`, `cap_key` and `tenant_id`) that
 * are READY, as an expression that counts them; nothing when none is. PostgreSQL folds identical payloads of one
 * transaction into one (a bulk dead-letter retry makes the same group READY statement after statement), so each
 * payload carries the clock in microseconds after its count (`<count>/<µs>/<tenant> <cap_key>`), which keeps them
 * apart. Sent in key order. (A node of an earlier version reads a payload with a tenant as one naming no group, and
 * wakes all its waiters: more wakes, nothing missed.)
 */
export function readyNotifySql(source: SQL): SQL {
  return sql`(select count(*) from (
    select pg_notify(${READY_CHANNEL}, g.n::text || '/' || (extract(epoch from clock_timestamp()) * 1e6)::bigint::text || '/' || g.tenant_id
      || case when octet_length(g.cap_key) > ${KEY_BYTES_MAX} then '' else ' ' || g.cap_key end)
    from (select cap_key, tenant_id, count(*) as n from ${source} where status = 'ready' group by cap_key, tenant_id order by cap_key, tenant_id) g) x)`;
}

/**
 * Whether any task of claim group `capKey` is READY: a woken claim's turn goes on only while
 * there is still something to take. One probe of tasks_ready_group_idx.
 */
export async function readyInGroup(db: Db, capKey: string): Promise<boolean> {
  const [r] = await rowsOf<{ ready: boolean }>(db, sql`select exists (select 1 from tasks where status = 'ready' and cap_key = ${capKey}) as ready`);
  return r?.ready ?? false;
}

/**
 * Whether a task is READY in a claim group an agent with these capabilities and models (and tenants: null, all) covers,
 * as the claim's own group check reads it (budgets, limits and pauses aside). After a claim that
 * found nothing, true means the work is there but was not for this agent now (a concurrency key,
 * its budget, a row another claim held), and no hint will say when that changes.
 */
export async function readyForReach(db: Db, capabilities: readonly string[], models: readonly string[], tenants: readonly string[] | null = null): Promise<boolean> {
  const [r] = await rowsOf<{ ready: boolean }>(db, sql`
    select exists (
      select 1 from capability_groups g
      where g.capabilities <@ ${textArray(capabilities)}
        and (cardinality(g.models) = 0 or g.models && ${textArray(models)} or '*' = any(${textArray(models)}))
        ${tenants === null ? sql`` : sql`and g.tenant_id = any(${textArray(tenants)})`}
        and exists (select 1 from tasks t where t.status = 'ready' and t.cap_key = g.cap_key and t.tenant_id = g.tenant_id)) as ready`);
  return r?.ready ?? false;
}

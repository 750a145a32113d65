import { eq, sql } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { DEFAULT_TENANT, tenants, type TenantRow } from '../schema/index.js';
import type { TenantView } from '../rows.js';
import { HELD_STATES } from '../../model/state-machine.js';
import { dateOf, rowsOf, sqlStateList } from '../statement.js';

export { DEFAULT_TENANT, type TenantRow, type TenantView };

/** Tenants: their rows, and the fold of what claims served them into their virtual time (fair share). */

export async function tenantGet(db: Db, id: string): Promise<TenantRow | undefined> {
  const [row] = await db.select().from(tenants).where(eq(tenants.id, id));
  return row;
}

/** Insert a tenant; false when the id is taken. Its virtual time starts at the lowest of those with work, as an idle one's. */
export async function tenantInsert(db: Db, t: { id: string; name?: string | null; weight?: number }): Promise<boolean> {
  const rows = await rowsOf<{ id: string }>(db, sql`
    insert into tenants (id, name, weight, vtime)
    values (${t.id}, ${t.name ?? null}, ${t.weight ?? 1}, coalesce((select min(vtime) from tenants), 0))
    on conflict (id) do nothing returning id`);
  return rows.length > 0;
}

/**
 * Change a tenant's weight, name or quotas (undefined: left as it is; a quota null: none), at least one of them;
 * false when there is no such tenant.
 */
export async function tenantUpdate(
  db: Db, id: string, set: { weight?: number; name?: string | null; maxRunning?: number | null; maxQueued?: number | null },
): Promise<boolean> {
  const changed = Object.fromEntries(Object.entries(set).filter(([, v]) => v !== undefined));
  const r = await db.update(tenants).set(changed).where(eq(tenants.id, id)).returning({ id: tenants.id });
  return r.length > 0;
}


/**
 * Every tenant with what fair share counted for it (tokens and tasks served, folded by the share loop) and its work now:
 * READY tasks, tasks held by agents (claimed, running, validating), open DAGs. Counts from the tasks' tenant column.
 */
export async function tenantList(db: Db): Promise<TenantView[]> {
  const rows = await rowsOf<TenantView>(db, sql`
    select t.id, t.name, t.weight::float8 as weight, t.vtime, t.served_tokens::float8 as "servedTokens", t.served_tasks::float8 as "servedTasks",
      t.max_running as "maxRunning", t.max_queued as "maxQueued",
      (select count(*)::int from tasks k where k.tenant_id = t.id and k.status = 'ready') as ready,
      (select count(*)::int from tasks k where k.tenant_id = t.id and k.status in (${sqlStateList(HELD_STATES)})) as held,
      (select count(*)::int from dags d where d.tenant_id = t.id and d.status in ('running', 'blocked')) as dags,
      t.created_at as "createdAt"
    from tenants t order by t.id`);
  // A hand-written statement's timestamps arrive as text.
  return rows.map((r) => ({ ...r, createdAt: dateOf(r.createdAt)! }));
}

/**
 * The share loop's step, one statement: what claims logged in tenant_served since the last fold is added to each
 * tenant's served totals and virtual time (tokens / weight), and a tenant with nothing READY is brought up to the
 * lowest virtual time of those that have READY work, so time spent idle earns no credit it could spend later in a
 * burst (start-time fair queuing's rule). Returns how many log rows it folded.
 */
export async function tenantServedFold(db: Db): Promise<number> {
  const [r] = await rowsOf<{ folded: number }>(db, sql`
    with folded as (delete from tenant_served returning tenant_id, tokens, tasks),
    sums as (select tenant_id, sum(tokens)::float8 as tokens, sum(tasks)::bigint as tasks, count(*)::int as n from folded group by tenant_id),
    served as (
      update tenants t set vtime = t.vtime + s.tokens / t.weight, served_tokens = t.served_tokens + s.tokens::bigint, served_tasks = t.served_tasks + s.tasks
      from sums s where t.id = s.tenant_id
      returning t.id, t.vtime
    ),
    busy as (
      select t.id, coalesce((select s.vtime from served s where s.id = t.id), t.vtime) as vtime from tenants t
      where exists (select 1 from capability_groups g where g.tenant_id = t.id
        and exists (select 1 from tasks k where k.status = 'ready' and k.cap_key = g.cap_key and k.tenant_id = t.id))
    ),
    lifted as (
      update tenants t set vtime = (select min(vtime) from busy)
      where t.vtime < (select min(vtime) from busy) and t.id not in (select id from busy) and t.id not in (select id from served)
      returning t.id
    )
    select coalesce((select sum(n) from sums), 0)::int as folded`);
  return r?.folded ?? 0;
}

/** How many tenants there are (the claim's fair order matters once there are two). */
export async function tenantCount(db: Db): Promise<number> {
  const [r] = await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from tenants`);
  return r?.n ?? 0;
}

/**
 * A submit into a tenant with a queued quota: its row locked for the submit's transaction (submits into it queue
 * behind one another; others do not), and how many of its tasks are not finished (its open DAGs' tasks_open).
 * Undefined when the tenant has no such quota.
 */
export async function tenantQueuedLock(db: Db, id: string): Promise<{ maxQueued: number; open: number } | undefined> {
  const [r] = await rowsOf<{ max_queued: number; open: number }>(db, sql`
    select t.max_queued, (select coalesce(sum(d.tasks_open), 0)::int from dags d where d.tenant_id = t.id and d.status in ('running', 'blocked')) as open
    from tenants t where t.id = ${id} and t.max_queued is not null for update of t`);
  return r && { maxQueued: r.max_queued, open: r.open };
}

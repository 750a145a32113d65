import { eq, sql, type SQL } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { DEFAULT_TENANT, tenants, type TenantRow } from '../schema/index.js';
import type { TenantView } from '../rows.js';
import { HELD_STATES } from '../../model/state-machine.js';
import { dateOf, rowsOf, sqlStateList } from '../statement.js';
import { SPEND_DAY_SQL } from './spend.js';

export { DEFAULT_TENANT, type TenantRow, type TenantView };

/** Tenants: their rows, and the fold of what claims served them into their virtual time (fair share). */

export async function tenantGet(db: Db, id: string): Promise<TenantRow | undefined> {
  const [row] = await db.select().from(tenants).where(eq(tenants.id, id));
  return row;
}

/** Whether the tenant exists: the default one always does (migration 0044 makes it), so asking for it costs no query. */
export async function tenantKnown(db: Db, id: string): Promise<boolean> {
  return id === DEFAULT_TENANT || (await tenantGet(db, id)) !== undefined;
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
  db: Db, id: string,
  set: { weight?: number; name?: string | null; maxRunning?: number | null; maxQueued?: number | null; maxUsdPerDay?: number | null; maxTokensPerMinute?: number | null },
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
      t.max_running as "maxRunning", t.max_queued as "maxQueued", t.max_usd_per_day::float8 as "maxUsdPerDay",
      t.max_tokens_per_minute as "maxTokensPerMinute", t.quota_until as "quotaUntil", t.quota_reason as "quotaReason",
      (select count(*)::int from tasks k where k.tenant_id = t.id and k.status = 'ready') as ready,
      (select count(*)::int from tasks k where k.tenant_id = t.id and k.status in (${sqlStateList(HELD_STATES)})) as held,
      (select count(*)::int from dags d where d.tenant_id = t.id and d.status in ('running', 'blocked')) as dags,
      t.created_at as "createdAt"
    from tenants t order by t.id`);
  // A hand-written statement's timestamps arrive as text.
  return rows.map((r) => ({ ...r, createdAt: dateOf(r.createdAt)!, quotaUntil: dateOf(r.quotaUntil) }));
}

/**
 * Whether more than one tenant exists: fair share and its bookkeeping (the claim's log, the loop's ready hints) apply
 * only then. Reads at most two rows of tenants.
 */
export const TENANTS_SEVERAL_SQL = sql`((select count(*) from (select 1 from tenants limit 2) x) > 1)`;

/**
 * The share loop's step, one statement: what claims logged in tenant_served since the last fold is added to each
 * tenant's served totals and virtual time (tokens / weight), and a tenant with nothing READY is brought up to the
 * lowest virtual time of those that have READY work, so time spent idle earns no credit it could spend later in a
 * burst (start-time fair queuing's rule). Each tenant's ready_hint says whether it has READY work now: the claim
 * walks those first. Returns how many log rows it folded.
 */
export async function tenantServedFold(db: Db): Promise<number> {
  const [r] = await rowsOf<{ folded: number }>(db, sql`
    with folded as (delete from tenant_served returning tenant_id, tokens, tasks),
    sums as (select tenant_id, sum(tokens)::float8 as tokens, sum(tasks)::bigint as tasks, count(*)::int as n from folded group by tenant_id),
    -- Hints matter to the fair-share order only: with one tenant they are left as they are (no write on an idle pass).
    shared as materialized (select ${TENANTS_SEVERAL_SQL} as yes),
    busy_ids as materialized (
      select t.id from tenants t
      where exists (select 1 from capability_groups g where g.tenant_id = t.id
        and exists (select 1 from tasks k where k.status = 'ready' and k.cap_key = g.cap_key and k.tenant_id = t.id))
    ),
    served as (
      update tenants t set vtime = t.vtime + s.tokens / t.weight, served_tokens = t.served_tokens + s.tokens::bigint, served_tasks = t.served_tasks + s.tasks,
        -- Its tokens of the minute (a tokens quota's window): a minute that ended starts again with these.
        minute_tokens = case when t.minute_at > now() - ${MINUTE} then t.minute_tokens else 0 end + s.tokens::bigint,
        minute_at = case when t.minute_at > now() - ${MINUTE} then t.minute_at else now() end,
        ready_hint = case when (select yes from shared) then t.id in (select id from busy_ids) else t.ready_hint end
      from sums s where t.id = s.tenant_id
      returning t.id, t.vtime
    ),
    busy as (select b.id, coalesce((select s.vtime from served s where s.id = b.id), t.vtime) as vtime from busy_ids b join tenants t on t.id = b.id),
    -- The others (a row is written by one of the two updates only): idle ones lifted, and each one's hint as it is now.
    lifted as (
      update tenants t set
        vtime = case when t.id not in (select id from busy) and t.vtime < (select min(vtime) from busy) then (select min(vtime) from busy) else t.vtime end,
        ready_hint = case when (select yes from shared) then t.id in (select id from busy) else t.ready_hint end
      where t.id not in (select id from served)
        and ((t.id not in (select id from busy) and t.vtime < (select min(vtime) from busy))
          or ((select yes from shared) and t.ready_hint <> (t.id in (select id from busy))))
      returning t.id
    )
    select coalesce((select sum(n) from sums), 0)::int as folded`);
  return r?.folded ?? 0;
}

const MINUTE = sql`interval '60 seconds'`;

/** How the reason of a tenant past its USD quota begins (tenantQuotaCheck writes it). */
const USD_QUOTA_REASON = 'USD quota:';

/**
 * Whether the tenant row named `tn` waits on its USD quota now. Its DAGs with READY work are then blocked
 * (dags.ts dagStatusRefresh): the wait lasts until the next UTC day or a higher quota. A tokens quota's wait ends
 * within its minute, a throttle like a model's rate limit, and blocks no DAG.
 */
export function tenantUsdQuotaWaitSql(tn: string): SQL {
  return sql`(${sql.raw(tn)}.quota_until > now() and starts_with(${sql.raw(tn)}.quota_reason, ${USD_QUOTA_REASON}))`;
}

/**
 * The share loop's other step, one statement: each tenant with a money or tokens quota is passed over by claims
 * (quota_until, with the reason) while it is past one: the USD its DAGs spent today (UTC) and hold reserved, against
 * max_usd_per_day, until the day ends; the estimated tokens of its tasks claimed this minute, against
 * max_tokens_per_minute, until the minute ends. Decided afresh each pass, so a quota raised (or spend released)
 * lets its work go at the next pass. Returns how many tenants wait now.
 */
export async function tenantQuotaCheck(db: Db): Promise<number> {
  const [r] = await rowsOf<{ waiting: number }>(db, sql`
    with quotas as (
      select t.id, t.max_usd_per_day, t.max_tokens_per_minute, t.minute_tokens, t.minute_at,
        case when t.max_usd_per_day is null then 0 else
          coalesce((select sum(d.day_spent_usd) from dags d where d.tenant_id = t.id and d.spend_day = ${SPEND_DAY_SQL}), 0)
          + coalesce((select sum(d.reserved_usd) from dags d where d.tenant_id = t.id and d.status in ('running', 'blocked')), 0) end as usd
      from tenants t where t.max_usd_per_day is not null or t.max_tokens_per_minute is not null or t.quota_until is not null
    ),
    verdict as (
      select q.id,
        case when q.usd >= q.max_usd_per_day then (${SPEND_DAY_SQL} + 1)::timestamp at time zone 'utc'
             when q.minute_at > now() - ${MINUTE} and q.minute_tokens >= q.max_tokens_per_minute then q.minute_at + ${MINUTE} end as until,
        case when q.usd >= q.max_usd_per_day
               then ${USD_QUOTA_REASON} || format(' %s of %s USD spent or reserved today (UTC); its work waits for the next day', round(q.usd, 2), q.max_usd_per_day)
             when q.minute_at > now() - ${MINUTE} and q.minute_tokens >= q.max_tokens_per_minute
               then format('tokens quota: %s of %s tokens claimed this minute; its work waits for the minute to end', q.minute_tokens, q.max_tokens_per_minute) end as reason
      from quotas q
    ),
    changed as (
      update tenants t set quota_until = v.until, quota_reason = v.reason from verdict v
      where t.id = v.id and (t.quota_until is distinct from v.until or t.quota_reason is distinct from v.reason)
    )
    select count(*) filter (where until is not null)::int as waiting from verdict`);
  return r?.waiting ?? 0;
}

/** New work for a tenant: the fair-share claim walks it among the first again (ready_hint), before the loop's next pass. */
export async function tenantReadyHintSet(db: Db, id: string): Promise<void> {
  await db.execute(sql`update tenants set ready_hint = true where id = ${id} and not ready_hint`);
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
    select t.max_queued, ${openTasksSql('t')} as open
    from tenants t where t.id = ${id} and t.max_queued is not null for update of t`);
  return r && { maxQueued: r.max_queued, open: r.open };
}

/**
 * A tenant's unfinished tasks, and its weight over all tenants' weights: what it may hold of a full deployment queue
 * (engine/dag/submit.ts queueFullFor). Undefined when there is no such tenant.
 */
export async function tenantQueueShare(db: Db, id: string): Promise<{ open: number; weightShare: number } | undefined> {
  const [r] = await rowsOf<{ open: number; share: number }>(db, sql`
    select ${openTasksSql('t')} as open, t.weight::float8 / (select sum(weight) from tenants)::float8 as share
    from tenants t where t.id = ${id}`);
  return r && { open: r.open, weightShare: r.share };
}

/** The unfinished tasks of tenant row `t`: its open DAGs' tasks_open (dags_tenant_open_idx). */
function openTasksSql(t: string): SQL {
  return sql`(select coalesce(sum(d.tasks_open), 0)::int from dags d where d.tenant_id = ${sql.raw(t)}.id and d.status in ('running', 'blocked'))`;
}

/**
 * Whether an agent serving `agentTenants` (null: every tenant) also serves tenants outside `scope` (a reader's
 * tenants; null: every tenant): its spend is then partly theirs, and a scoped reader is not shown it.
 */
export function servesBeyond(agentTenants: readonly string[] | null, scope: readonly string[] | null): boolean {
  return scope !== null && (agentTenants === null || agentTenants.some((t) => !scope.includes(t)));
}

/** The kinds of object a request may name by id, each with the tenant it belongs to (a dead letter's is its task's). */
export type TenantOwned = 'dag' | 'task' | 'deadLetter';

/** The tenant of a DAG, a task or a dead letter by id; null when there is none. One primary-key probe. */
export async function tenantOfObject(db: Db, kind: TenantOwned, id: string): Promise<string | null> {
  const q = kind === 'dag' ? sql`select tenant_id from dags where id = ${id}`
    : kind === 'task' ? sql`select tenant_id from tasks where id = ${id}`
      : sql`select t.tenant_id from dead_letters d join tasks t on t.id = d.task_id where d.id = ${id}`;
  const [r] = await rowsOf<{ tenant_id: string }>(db, q);
  return r?.tenant_id ?? null;
}

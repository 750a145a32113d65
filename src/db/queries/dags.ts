import { and, asc, desc, eq, getTableColumns, inArray, sql, type SQL } from 'drizzle-orm';
import { spendTodaySql } from './spend.js';
import { tenantUsdQuotaWaitSql } from './tenants.js';
import type { Db } from '../handle.js';
import { dags } from '../schema/index.js';
import { rowsOf, textArray } from '../statement.js';
import { keysetAfter, likeContaining } from './keyset.js';
import type { Cursor, DagListFilter, DagRow } from '../rows.js';

export type { DagListFilter, DagRow } from '../rows.js';

export type DagInsert = typeof dags.$inferInsert;

/** How the blocked reason of a DAG its tenant's USD quota holds begins (dagStatusRefresh; dag-status.ts blockedKind). */
export const TENANT_QUOTA_BLOCKED = 'tenant quota:';

export async function dagInsert(db: Db, row: DagInsert): Promise<void> {
  await db.insert(dags).values(row);
}

export async function dagGet(db: Db, id: string): Promise<DagRow | undefined> {
  const [row] = await db.select().from(dags).where(eq(dags.id, id));
  return row;
}

export async function dagFindByIdempotencyKey(db: Db, tenantId: string, key: string): Promise<DagRow | undefined> {
  const [row] = await db.select().from(dags).where(and(eq(dags.tenantId, tenantId), eq(dags.idempotencyKey, key)));
  return row;
}

/**
 * Serialize every mutation of one DAG's graph until the transaction ends, so two
 * transactions adding edges can never together close a cycle.
 */
export async function dagLockGraph(db: Db, dagId: string): Promise<void> {
  await db.execute(sql`select pg_advisory_xact_lock(${DAG_LOCK_NAMESPACE}, hashtext(${dagId}))`);
}
// Arbitrary constant ('dag' in ASCII): the first key of the two-key advisory lock space for DAG graphs.
const DAG_LOCK_NAMESPACE = 0x646167;

/**
 * Lock DAG rows, in id order, for the rest of the transaction (FOR NO KEY UPDATE, what an UPDATE takes; not the
 * graph's advisory lock). What a transaction does before it writes a task row a second time: PostgreSQL's check of
 * the foreign key tasks.dag_id then takes a KEY SHARE lock on the DAG's row, which must not be the only lock the
 * transaction holds on it while it goes on (docs/architecture.md, "Lock order").
 */
export async function dagsLock(db: Db, ids: readonly string[]): Promise<void> {
  const wanted = [...new Set(ids)].sort();
  if (wanted.length === 0) return;
  await db.execute(sql`select id from dags where id = any(${textArray(wanted)}) order by id for no key update`);
}

/** The same lock as dagLockGraph, tried without waiting, as an SQL condition on the DAG id `idSql` (retention's marking). */
export function dagGraphTryLockSql(idSql: SQL): SQL {
  return sql`pg_try_advisory_xact_lock(${sql.raw(String(DAG_LOCK_NAMESPACE))}, hashtext(${idSql}))`;
}

/** Count tasks out of a DAG that were cancelled (completion counts itself down in its own statement). */
export async function dagTasksClosed(db: Db, counts: Map<string, number>): Promise<void> {
  for (const [dagId, n] of counts) {
    await db.update(dags).set({ tasksOpen: sql`${dags.tasksOpen} - ${n}`, updatedAt: sql`now()` }).where(eq(dags.id, dagId));
  }
}

/** Count re-run tasks back into a DAG's open tasks. */
export async function dagTasksReopened(db: Db, dagId: string, n: number): Promise<void> {
  if (n > 0) await db.update(dags).set({ tasksOpen: sql`${dags.tasksOpen} + ${n}`, updatedAt: sql`now()` }).where(eq(dags.id, dagId));
}

/** A completed or cancelled DAG whose tasks run again is running again (dagStatusRefresh then says blocked, if so). */
export async function dagReopen(db: Db, dagId: string): Promise<void> {
  await db.update(dags).set({ status: 'running', completedAt: null, updatedAt: sql`now()` })
    .where(and(eq(dags.id, dagId), sql`${dags.status} in ('completed', 'cancelled')`));
}

export async function dagMarkCancelled(db: Db, dagId: string): Promise<boolean> {
  const r = await db.update(dags).set({ status: 'cancelled', completedAt: sql`now()`, updatedAt: sql`now()`, blockedReason: null })
    .where(and(eq(dags.id, dagId), sql`${dags.status} in ('running', 'blocked')`)).returning({ id: dags.id });
  return r.length > 0;
}

/** A DAG whose status or blocked reason a refresh changed. */
export interface DagStatusChange { id: string; status: string; previous: string; reason: string | null }

/**
 * Re-derive the status of DAGs after a dead letter, a resolution, a cancel or a change of
 * spend or budget: completed when nothing is open; blocked while a dead letter is
 * unresolved (the oldest is the reason), or while its budget cannot pay for a READY task
 * and nothing it runs holds a reservation that could still come back (`budget: …`, the
 * same rule the claim passes such tasks over by), or while its tenant waits on its USD
 * quota with READY work (`tenant quota: …`); else running. Cancelled stays cancelled.
 * Returns only the DAGs that changed.
 */
export function dagStatusRefresh(db: Db, dagIds: string[]): Promise<DagStatusChange[]> {
  return rowsOf(db, sql`
    with locked as materialized (
      -- DAG rows in id order (docs/architecture.md, lock order), read as locked: their latest committed version.
      select id, status, tenant_id, tasks_open, budget_usd, spent_usd, reserved_usd, daily_budget_usd, ${spendTodaySql('dags')} as today_usd from dags
      where id = any(${textArray(dagIds)}) order by id for no key update
    ),
    derived as (
      select d.id, d.status as previous,
        case when d.status = 'cancelled' then 'cancelled'
             when d.tasks_open = 0 then 'completed'
             when coalesce(x.reason, b.reason, c.reason, q.reason) is not null then 'blocked'
             else 'running' end as status,
        coalesce(x.reason, b.reason, c.reason, q.reason) as reason
      from locked d
      left join lateral (
        select 'task ' || t.key || ' dead-lettered: ' || l.reason as reason
        from dead_letters l join tasks t on t.id = l.task_id
        where l.dag_id = d.id and l.resolution is null
        order by l.created_at limit 1
      ) x on true
      left join lateral (
        select 'budget: $' || round(greatest(d.budget_usd - d.spent_usd, 0), 4) || ' left of $' || round(d.budget_usd, 4)
          || ', task ' || t.key || ' may cost $' || round(coalesce(t.max_cost_usd, 0), 4) as reason
        from tasks t
        where d.budget_usd is not null and d.reserved_usd = 0 and t.dag_id = d.id and t.status = 'ready'
          and (d.budget_usd - d.spent_usd <= 0 or d.budget_usd - d.spent_usd < coalesce(t.max_cost_usd, 0))
        order by t.effective_priority limit 1
      ) b on true
      -- Its daily cap spent, with work waiting: claims pass it over until the next UTC day (tasks-claim/groups.ts, broke).
      left join lateral (
        select 'budget: daily cap $' || round(d.daily_budget_usd, 4) || ' spent today (UTC); tasks wait for the next day' as reason
        where d.daily_budget_usd is not null and d.daily_budget_usd - d.today_usd <= 0
          and exists (select 1 from tasks t where t.dag_id = d.id and t.status = 'ready')
      ) c on true
      -- Its tenant past its USD quota for the day, with work waiting: claims pass the tenant over (tasks-claim/groups.ts).
      left join lateral (
        select ${TENANT_QUOTA_BLOCKED} || ' tenant ' || tn.id || ' spent or reserved its USD quota for today (UTC); its tasks wait for the next day or a higher quota' as reason
        from tenants tn
        where tn.id = d.tenant_id and ${tenantUsdQuotaWaitSql('tn')}
          and exists (select 1 from tasks t where t.dag_id = d.id and t.status = 'ready')
      ) q on true
    )
    update dags d set status = v.status,
      blocked_reason = case when v.status = 'blocked' then v.reason end,
      completed_at = case when v.status in ('completed', 'cancelled') then coalesce(d.completed_at, now()) end,
      updated_at = now()
    from derived v where d.id = v.id
      -- Only what changes is written (the budget watch refreshes every budgeted DAG on a cadence).
      and (d.status <> v.status or d.blocked_reason is distinct from case when v.status = 'blocked' then v.reason end)
    returning d.id, d.status, v.previous, d.blocked_reason as reason`);
}

/** Running or blocked DAGs with a budget, whose status a change of spend may move: the next `limit` by id after `after`. */
export async function dagBudgetedOpenIds(db: Db, after: string, limit: number): Promise<string[]> {
  const rows = await db.select({ id: dags.id }).from(dags)
    .where(sql`${dags.status} in ('running', 'blocked') and (${dags.budgetUsd} is not null or ${dags.dailyBudgetUsd} is not null) and ${dags.id} > ${after}`).orderBy(asc(dags.id)).limit(limit);
  return rows.map((r) => r.id);
}

/**
 * Open DAGs whose status the USD quota of their tenant may move (dagStatusRefresh): those of tenants waiting on it
 * now, and those it blocked: the next `limit` by id after `after`. Few tenants wait at a time, an index probe each.
 */
export async function dagTenantQuotaIds(db: Db, after: string, limit: number): Promise<string[]> {
  const rows = await rowsOf<{ id: string }>(db, sql`
    select id from (
      select d.id from tenants tn join dags d on d.tenant_id = tn.id and d.status in ('running', 'blocked')
      where ${tenantUsdQuotaWaitSql('tn')}
      union
      select id from dags where status = 'blocked' and starts_with(blocked_reason, ${TENANT_QUOTA_BLOCKED})
    ) x
    where id > ${after} order by id limit ${limit}`);
  return rows.map((r) => r.id);
}

/** Set a running or blocked DAG's budget; the previous one, or undefined if the DAG is not open. */
export async function dagBudgetSet(db: Db, dagId: string, budgetUsd: number): Promise<{ previous: number | null } | undefined> {
  const [r] = await rowsOf<{ previous: number | null }>(db, sql`
    update dags d set budget_usd = ${budgetUsd}::numeric, updated_at = now()
    from (select id, budget_usd::float8 as previous from dags where id = ${dagId} for no key update) p
    where d.id = p.id and d.status in ('running', 'blocked')
    returning p.previous`);
  return r;
}

/** Tasks were added to a running DAG (spawned subtasks): they count toward its total and keep it open. */
export async function dagTasksAdded(db: Db, dagId: string, n: number): Promise<void> {
  await db.update(dags).set({ tasksTotal: sql`${dags.tasksTotal} + ${n}`, tasksOpen: sql`${dags.tasksOpen} + ${n}`, updatedAt: sql`now()` })
    .where(eq(dags.id, dagId));
}

/** The reruns with a change of a DAG (dags_rerun_of_idx), oldest first: what its status and its page link to. */
export function dagRerunsOf(db: Db, dagId: string) {
  return db.select({ id: dags.id, status: dags.status, createdAt: dags.createdAt, createdBy: dags.createdBy }).from(dags)
    .where(eq(dags.rerunOf, dagId)).orderBy(asc(dags.createdAt), asc(dags.id)).limit(100);
}

/** Runs still going (running or blocked) that `createdBy` started: a schedule's overlap check. */
export async function dagRunningIdsByCreator(db: Db, tenant: string, createdBy: string): Promise<string[]> {
  const rows = await db.select({ id: dags.id }).from(dags)
    .where(and(eq(dags.tenantId, tenant), eq(dags.createdBy, createdBy), sql`${dags.status} in ('running', 'blocked')`));
  return rows.map((r) => r.id);
}

/** Newest DAGs first, with their task counts by status (the dashboard's list and GET /api/dags). */
/** What dagent's ids look like (src/ids.ts): `dag_` and 14 letters or digits. */
const ID_SHAPE = /^[a-z]{3}_[0-9a-z]{14}$/;

/**
 * DAGs newest first, a page at a time (keyset on created_at, id: dags_created_idx, or dags_status_idx with a
 * status), with their task counts by status; `next` is the cursor of the page after, null on the last page.
 */
export async function dagPage(db: Db, f: DagListFilter = {}) {
  const limit = f.limit ?? 100;
  const rows = await db.select({ ...getTableColumns(dags), cursorAt: sql<string>`${dags.createdAt}::text` }).from(dags)
    .where(and(
      f.status ? eq(dags.status, f.status) : undefined,
      f.tenants ? inArray(dags.tenantId, [...f.tenants]) : undefined,
      f.tenant ? eq(dags.tenantId, f.tenant) : undefined,
      // An id is looked up by its key (one index probe); any other text is a part of a name or title, which scans
      // (docs/benchmarks.md: ~50 ms at 100,000 DAGs).
      f.q ? (ID_SHAPE.test(f.q) ? eq(dags.id, f.q) : sql`(${dags.name} ilike ${likeContaining(f.q)} or ${dags.title} ilike ${likeContaining(f.q)})`) : undefined,
      f.tag ? sql`${dags.tags} @> array[${f.tag}]::text[]` : undefined,
      f.from ? sql`${dags.createdAt} >= ${f.from}::timestamptz` : undefined,
      f.to ? sql`${dags.createdAt} < ${f.to}::timestamptz` : undefined,
      keysetAfter('dags', f.cursor),
    ))
    .orderBy(desc(dags.createdAt), desc(dags.id)).limit(limit + 1);
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  const next: Cursor | null = rows.length > limit && last ? { at: last.cursorAt, id: last.id } : null;
  if (page.length === 0) return { dags: [], next };
  const counts = await rowsOf<{ dag_id: string; status: string; n: number }>(db, sql`
    select dag_id, status, count(*)::int as n from tasks where dag_id = any(${textArray(page.map((r) => r.id))}) group by dag_id, status`);
  return {
    dags: page.map(({ cursorAt: _at, ...d }) => ({
      ...d,
      taskCounts: Object.fromEntries(counts.filter((c) => c.dag_id === d.id).map((c) => [c.status, c.n])) as Record<string, number>,
    })),
    next,
  };
}

/** DAGs changed since `since` (status, counts, spend): the live stream's DAG progress. */
export function dagChangedSince(db: Db, since: Date) {
  return db.select({ id: dags.id, tenantId: dags.tenantId, name: dags.name, status: dags.status, tasksTotal: dags.tasksTotal, tasksOpen: dags.tasksOpen, spentUsd: dags.spentUsd, updatedAt: dags.updatedAt })
    .from(dags).where(sql`${dags.updatedAt} > ${since.toISOString()}::timestamptz`).orderBy(asc(dags.updatedAt)).limit(500);
}

/** Budgets and spend of DAGs still open (running or blocked), and total spend of all DAGs. */
export async function dagSpendReport(db: Db) {
  const open = await db.select({ id: dags.id, name: dags.name, budgetUsd: dags.budgetUsd, spentUsd: dags.spentUsd, reservedUsd: dags.reservedUsd })
    .from(dags).where(sql`${dags.status} in ('running', 'blocked')`).limit(1000);
  const [total] = await rowsOf<{ spent: number }>(db, sql`select coalesce(sum(spent_usd), 0)::float8 as spent from dags`);
  return { open, totalSpentUsd: total?.spent ?? 0 };
}

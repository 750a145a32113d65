import { getTableColumns, sql, type SQL } from 'drizzle-orm';
import type { Instant } from '../../durations.js';
import { forEachSliced, mapSliced } from '../../event-loop.js';
import type { Db } from '../handle.js';
import { concurrencyKeys, DEFAULT_TENANT, tasks } from '../schema/index.js';
import { fromStates } from '../../model/state-machine.js';
import { effectivePriorityOnReadySql, effectivePrioritySql } from '../../model/priority.js';
import { capabilityGroupsEnsure } from './capability-groups.js';
import { rowsOf, textArray } from '../statement.js';
import { readyNotifySql } from './ready-hint.js';
import { taskDepsRunnableSql } from './task-deps.js';

/** New tasks into the queue: insert, activate (created → ready | pending), gain an upstream, and backpressure. */

/**
 * A task row to insert, by the schema's property names; values are plain (no SQL expressions). The deadline and
 * run_at are instants: a relative one (`in 2h`) is resolved by the database clock at insert, never the process clock.
 * The status is the insert's to decide (taskInsertMany).
 */
export type TaskInsert = Omit<typeof tasks.$inferInsert, 'deadline' | 'runAt' | 'status' | 'readyAt' | 'effectivePriority'> & { deadline?: Instant; runAt?: Instant };

/** Rows per INSERT: the batch travels as one jsonb parameter, so the count is bounded by memory, not by parameters. */
const CHUNK = 5000;

/** The tasks table's columns by property name. */
const TASK_COLUMNS = getTableColumns(tasks);
/** The two instants arrive as an absolute time (`<column>_at`) or seconds from the database's now() (`<column>_in_sec`). */
const INSTANT_PROPS = [['deadline', 'deadline'], ['runAt', 'run_at']] as const;

/**
 * Insert tasks (and record any claim group not seen before, so claims can find them), each in the state it starts
 * in: READY with no unfinished upstream and no start time ahead, else PENDING; a task that waits for a signal is
 * CREATED, for taskActivateCreated to make WAITING (its trigger, migration 0023, fires on that update), which
 * every caller runs next; a task with `reusedFrom` (a rerun's carried task) is COMPLETED, with the output given.
 * The statement NOTIFYs once per claim group that gained READY tasks, as activation does.
 *
 * One INSERT … SELECT FROM jsonb_to_recordset($1) per chunk: the rows travel as one JSON document. Through the
 * query builder each value was a parameter of its own, and building them cost more than the database's work; and
 * inserting CREATED rows for an UPDATE to activate wrote every row twice. A 10,000-task DAG (10 layers, 18,000
 * edges, `npm run bench`): 2.6–3.0 s before, most of it building the statements (CPU profile: drizzle's `is` and
 * `sql` at the top).
 */
export async function taskInsertMany(db: Db, rows: TaskInsert[]): Promise<void> {
  // Each task carries its DAG's tenant (the claim walks each tenant's range of a group apart): looked up for rows that do not say.
  const unknown = [...new Set(rows.filter((r) => r.tenantId === undefined).map((r) => r.dagId))];
  if (unknown.length) {
    const of = new Map((await rowsOf<{ id: string; tenant_id: string }>(db, sql`select id, tenant_id from dags where id = any(${textArray(unknown)})`)).map((d) => [d.id, d.tenant_id]));
    rows = rows.map((r) => (r.tenantId === undefined ? { ...r, tenantId: of.get(r.dagId) ?? DEFAULT_TENANT } : r));
  }
  await capabilityGroupsEnsure(db, rows.map((r) => ({
    capabilities: (r.requiredCapabilities as string[] | undefined) ?? [], models: (r.models as string[] | undefined) ?? [], tenant: r.tenantId!,
  })));
  await concurrencyKeysDeclare(db, rows);
  for (let i = 0; i < rows.length; i += CHUNK) await db.execute(await taskInsertSql(rows.slice(i, i + CHUNK)));
}

/**
 * The INSERT of `rows`. A column is in the list when some row gives it a value; the others take their default.
 * Rows built by one caller give the same columns; a column some rows leave out is null in those rows, so a column
 * with a non-null default must be given by all or none (checked here, not left to a NOT NULL error).
 */
async function taskInsertSql(rows: TaskInsert[]): Promise<SQL> {
  // The statement reads these two to decide each row's state: always in the list.
  const given = new Set<string>(['waitKey', 'depsRemaining']);
  await forEachSliced(rows, (r) => { for (const [k, v] of Object.entries(r)) if (v !== undefined) given.add(k); });
  const plain = [...given].filter((p) => !INSTANT_PROPS.some(([prop]) => prop === p)).map((p) => {
    const c = TASK_COLUMNS[p as keyof typeof TASK_COLUMNS];
    if (!c) throw new Error(`taskInsertMany: no column for ${p}`);
    if (c.hasDefault && c.notNull && rows.some((r) => r[p as keyof TaskInsert] === undefined)) throw new Error(`taskInsertMany: ${p} missing from some rows`);
    // A column of column-types.ts stores its own form of the value (the retry policy: its difference from the
    // defaults), which drizzle's insert applies and this JSON document must too; only jsonb ones so far.
    if (c.columnType === 'PgCustomColumn' && c.getSQLType() !== 'jsonb') throw new Error(`taskInsertMany: ${p} is not jsonb`);
    const encode = c.columnType === 'PgCustomColumn' ? (v: unknown) => JSON.parse(c.mapToDriverValue(v) as string) as unknown : undefined;
    return { prop: p as keyof TaskInsert, name: c.name, type: c.getSQLType(), encode };
  });
  // Row by row, in slices: 5,000 rows in one JSON.stringify held the process's other requests 35-110 ms.
  const json = `[${(await mapSliced(rows, (r) => {
    const o: Record<string, unknown> = {};
    for (const c of plain) o[c.name] = (c.encode && r[c.prop] != null ? c.encode(r[c.prop]) : r[c.prop]) ?? null;
    for (const [prop, name] of INSTANT_PROPS) {
      const i = r[prop];
      o[`${name}_at`] = i && 'at' in i ? i.at : null;
      o[`${name}_in_sec`] = i && 'inSeconds' in i ? i.inSeconds : null;
    }
    return JSON.stringify(o);
  })).join(',')}]`;
  const names = plain.map((c) => c.name).join(', ');
  const inputs = [...plain.map((c) => `${c.name} ${c.type}`), ...INSTANT_PROPS.flatMap(([, name]) => [`${name}_at timestamptz`, `${name}_in_sec float8`])].join(', ');
  const startsReady = sql`(x.wait_key is null and ${taskDepsRunnableSql('x')})`;
  // A task a rerun carries over (engine/dag/rerun-changed.ts) starts completed, with the output it is given.
  const carried = given.has('reusedFrom') ? sql`x.reused_from is not null` : sql`false`;
  return sql`
    with x as (
      select *, coalesce(j.deadline_at, now() + make_interval(secs => j.deadline_in_sec)) as deadline,
        coalesce(j.run_at_at, now() + make_interval(secs => j.run_at_in_sec)) as run_at
      from jsonb_to_recordset(${json}::jsonb) as j(${sql.raw(inputs)})
    ),
    inserted as (
      insert into tasks (${sql.raw(names)}, deadline, run_at, status, ready_at, completed_at, effective_priority)
      select ${sql.raw(plain.map((c) => `x.${c.name}`).join(', '))}, x.deadline, x.run_at,
        case when ${carried} then 'completed' when x.wait_key is not null then 'created' when ${startsReady} then 'ready' else 'pending' end,
        case when not ${carried} and ${startsReady} then now() end,
        case when ${carried} then now() end,
        ${effectivePrioritySql({ fresh: true, alias: 'x' })}
      from x
      returning status, cap_key, tenant_id
    )
    select ${readyNotifySql(sql`inserted`)} as notified`;
}

/**
 * Record the concurrency keys of tasks about to be inserted. A key's limit is the smallest any of its tasks declared:
 * a key guards something shared (`db:prod`), and when the latest submitted limit won, any author's DAG could lift the
 * limit another author's DAG set on it and have all of that DAG's tasks run at once. Lowering it only makes the key's
 * tasks wait. Keys in id order, so two submits never wait on each other's rows crosswise.
 */
async function concurrencyKeysDeclare(db: Db, rows: TaskInsert[]): Promise<void> {
  const limits = new Map<string, number>();
  for (const r of rows) {
    if (typeof r.concKey === 'string' && typeof r.concLimit === 'number') limits.set(r.concKey, Math.min(r.concLimit, limits.get(r.concKey) ?? Infinity));
  }
  if (limits.size === 0) return;
  const keys = [...limits.keys()].sort();
  await db.insert(concurrencyKeys).values(keys.map((key) => ({ key, lim: limits.get(key)! })))
    .onConflictDoUpdate({ target: concurrencyKeys.key, set: { lim: sql`least(concurrency_keys.lim, excluded.lim)` } });
}

/** created → pending | ready for every created task of a DAG (the activate transition). */
export async function taskActivateCreated(db: Db, dagId: string): Promise<{ ready: number; pending: number }> {
  const [r] = await rowsOf<{ ready: number; pending: number }>(db, sql`
    with activated as (
      update tasks set
        status = case when ${taskDepsRunnableSql('tasks')} then 'ready' else 'pending' end,
        ready_at = case when ${taskDepsRunnableSql('tasks')} then now() end,
        ${effectivePriorityOnReadySql()},
        updated_at = now()
      where dag_id = ${dagId} and status = any(${textArray(fromStates('activate'))})
      returning status, cap_key, tenant_id
    )
    select count(*) filter (where status = 'ready')::int as ready,
           count(*) filter (where status = 'pending')::int as pending,
           ${readyNotifySql(sql`activated`)} as notified
    from activated`);
  return { ready: r?.ready ?? 0, pending: r?.pending ?? 0 };
}


/** READY plus PENDING tasks: what backpressure compares with its limit (each status is walked through its partial index). */
export async function taskQueuedCount(db: Db): Promise<number> {
  const [r] = await rowsOf<{ n: number }>(db, sql`
    select (select count(*) from tasks where status = 'ready')::int + (select count(*) from tasks where status = 'pending')::int as n`);
  return r?.n ?? 0;
}

/** Serialize submissions while backpressure is on, so two of them cannot both slip under the limit. */
export async function taskSubmitLock(db: Db): Promise<void> {
  await db.execute(sql`select pg_advisory_xact_lock(hashtext('dagent.submit'))`);
}

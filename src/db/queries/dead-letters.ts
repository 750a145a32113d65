import { and, desc, eq, getTableColumns, inArray, isNull, sql, type SQL } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { attempts, deadLetters, tasks } from '../schema/index.js';
import type { DeadLetterRow, DeadLetterSelector } from '../rows.js';
import { isoTextOf } from '../statement.js';
import { keysetAfter, likeContaining, type Cursor } from './keyset.js';

export type { DeadLetterRow, DeadLetterSelector } from '../rows.js';

/** Open a dead-letter entry that snapshots the task's whole attempt history and total cost. */
export async function deadLetterInsert(
  db: Db, e: { id: string; taskId: string; dagId: string; reason: string; errorClass: string; poisonPill: boolean; attempts: number },
): Promise<void> {
  await db.execute(sql`
    insert into dead_letters (id, task_id, dag_id, reason, error_class, poison_pill, attempts, history, total_cost_usd)
    select ${e.id}, ${e.taskId}, ${e.dagId}, ${e.reason}, ${e.errorClass}, ${e.poisonPill}, ${e.attempts},
      coalesce(jsonb_agg(jsonb_build_object(
        'attempt', a.attempt, 'fence', a.fence, 'agent', a.agent_id, 'outcome', a.outcome,
        'error_class', a.error_class, 'error', a.error_message, 'started_at', a.started_at, 'ended_at', a.ended_at,
        'duration_ms', a.duration_ms, 'cost_usd', a.cost_usd, 'model', a.model, 'details', a.details
      ) order by a.fence), '[]'::jsonb),
      coalesce(sum(a.cost_usd), 0)
    from ${attempts} a where a.task_id = ${e.taskId}`);
}

/** Every column but the history, which can be long (up to max_attempts attempts with their details): dlqShow has it. */
const { history: _history, ...listed } = getTableColumns(deadLetters);
export type DeadLetterListed = Omit<DeadLetterRow, 'history'>;

/** What a selector matches, as a condition on dead_letters (and tasks, joined): the list and the bulk actions share it. */
function deadLetterWhere(f: DeadLetterSelector & { open?: boolean }): SQL | undefined {
  return and(
    f.open === false ? undefined : isNull(deadLetters.resolution),
    f.dagId ? eq(deadLetters.dagId, f.dagId) : undefined,
    f.tenants ? inArray(tasks.tenantId, [...f.tenants]) : undefined,
    f.type ? eq(tasks.type, f.type) : undefined,
    f.errorClass ? eq(deadLetters.errorClass, f.errorClass) : undefined,
    f.agentId ? sql`${deadLetters.history} @> ${JSON.stringify([{ agent: f.agentId }])}::jsonb` : undefined,
    f.q ? (/^dlq_[0-9a-z]{14}$/.test(f.q) ? eq(deadLetters.id, f.q) : sql`(${tasks.key} ilike ${likeContaining(f.q)} or ${deadLetters.reason} ilike ${likeContaining(f.q)})`) : undefined,
    f.from ? sql`${deadLetters.createdAt} >= ${f.from}::timestamptz` : undefined,
    f.to ? sql`${deadLetters.createdAt} < ${f.to}::timestamptz` : undefined,
  );
}

/**
 * Entries newest first, a page at a time (keyset on created_at, id; dead_letters_created_idx), each with its
 * task's key and type; `next` is the cursor of the page after, null on the last page.
 */
export async function deadLetterList(db: Db, filter: DeadLetterSelector & { open?: boolean; limit?: number; cursor?: Cursor } = {}) {
  const limit = filter.limit ?? 200;
  const rows = await db
    .select({ entry: listed, taskKey: tasks.key, taskType: tasks.type, cursorAt: sql<string>`${deadLetters.createdAt}::text` })
    .from(deadLetters)
    .innerJoin(tasks, eq(tasks.id, deadLetters.taskId))
    .where(and(deadLetterWhere(filter), keysetAfter('dead_letters', filter.cursor)))
    .orderBy(desc(deadLetters.createdAt), desc(deadLetters.id))
    .limit(limit + 1);
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return { rows: page, next: rows.length > limit && last ? { at: last.cursorAt, id: last.entry.id } : null };
}

/** An entry with its history, whose attempts' `started_at` and `ended_at` read as ISO 8601 in UTC (isoTextOf). */
export async function deadLetterGet(db: Db, id: string): Promise<DeadLetterRow | undefined> {
  const [row] = await db.select().from(deadLetters).where(eq(deadLetters.id, id));
  if (!row || !Array.isArray(row.history)) return row;
  const history = (row.history as Array<Record<string, unknown>>).map((h) => ({ ...h, started_at: isoTextOf(h.started_at), ended_at: isoTextOf(h.ended_at) }));
  return { ...row, history };
}

/** Record a human's resolution; only an open entry can be resolved (returns false otherwise). */
export async function deadLetterResolve(
  db: Db, id: string, resolution: 'retried' | 'cancelled', by: string, note: string | null,
): Promise<boolean> {
  const r = await db.update(deadLetters)
    .set({ resolution, resolvedAt: sql`now()`, resolvedBy: by, resolvedNote: note })
    .where(and(eq(deadLetters.id, id), isNull(deadLetters.resolution)))
    .returning({ id: deadLetters.id });
  return r.length > 0;
}

/** Close the open entries of tasks that were cancelled some other way (task or DAG cancel). */
export async function deadLetterResolveForTasks(
  db: Db, taskIds: string[], by: string, note: string, resolution: 'cancelled' | 'retried' = 'cancelled',
): Promise<void> {
  if (taskIds.length === 0) return;
  await db.update(deadLetters)
    .set({ resolution, resolvedAt: sql`now()`, resolvedBy: by, resolvedNote: note })
    .where(and(isNull(deadLetters.resolution), sql`${deadLetters.taskId} = any(${sql.param(taskIds)}::text[])`));
}

export async function deadLetterIdsMatching(db: Db, f: DeadLetterSelector, limit: number): Promise<Array<{ id: string; dagId: string }>> {
  return db.select({ id: deadLetters.id, dagId: deadLetters.dagId }).from(deadLetters)
    .innerJoin(tasks, eq(tasks.id, deadLetters.taskId))
    .where(deadLetterWhere(f))
    .orderBy(deadLetters.createdAt).limit(limit);
}

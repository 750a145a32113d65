import { asc, desc, eq, getTableColumns, gt, sql } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { dags, events } from '../schema/index.js';

export interface EventInput {
  type: string;
  dagId?: string | null;
  taskId?: string | null;
  agentId?: string | null;
  data?: Record<string, unknown>;
}

export async function eventInsertMany(db: Db, rows: EventInput[]): Promise<void> {
  if (rows.length === 0) return;
  await db.insert(events).values(rows.map((r) => ({ ...r, data: r.data ?? {} })));
}

export function eventListForTask(db: Db, taskId: string) {
  return db.select().from(events).where(eq(events.taskId, taskId)).orderBy(asc(events.id));
}

export function eventListForDag(db: Db, dagId: string, limit = 200) {
  return db.select().from(events).where(eq(events.dagId, dagId)).orderBy(desc(events.id)).limit(limit);
}

/** Events after `afterId`, oldest first (the live stream's tail), each with its DAG's tenant (null: an event of no DAG). */
export function eventListAfter(db: Db, afterId: number, limit = 500) {
  return db.select({ ...getTableColumns(events), tenantId: dags.tenantId }).from(events).leftJoin(dags, eq(dags.id, events.dagId))
    .where(gt(events.id, afterId)).orderBy(asc(events.id)).limit(limit);
}

export async function eventMaxId(db: Db): Promise<number> {
  const [r] = await db.select({ id: sql<string | null>`max(${events.id})` }).from(events);
  return Number(r?.id ?? 0);
}

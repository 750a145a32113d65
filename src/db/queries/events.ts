import { asc, desc, eq } from 'drizzle-orm';
import type { Db } from '../connection.js';
import { events } from '../schema/index.js';

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

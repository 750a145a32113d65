import { and, asc, eq, gt, sql } from 'drizzle-orm';
import type { Db } from '../connection.js';
import { attempts } from '../schema/index.js';

export type AttemptRow = typeof attempts.$inferSelect;

export function attemptListForTask(db: Db, taskId: string) {
  return db.select().from(attempts).where(eq(attempts.taskId, taskId)).orderBy(asc(attempts.fence));
}

/** Failed attempts since the last attempt reset, and on how many distinct agents: the poison-pill inputs. */
export async function attemptFailureStats(db: Db, taskId: string, sinceFence: number): Promise<{ failures: number; agents: number }> {
  const [r] = await db
    .select({ failures: sql<number>`count(*)::int`, agents: sql<number>`count(distinct ${attempts.agentId})::int` })
    .from(attempts)
    .where(and(eq(attempts.taskId, taskId), eq(attempts.outcome, 'failed'), gt(attempts.fence, sinceFence)));
  return { failures: r?.failures ?? 0, agents: r?.agents ?? 0 };
}

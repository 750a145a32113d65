import { and, asc, eq, sql, type SQL } from 'drizzle-orm';
import type { Db } from '../handle.js';
import { schedules } from '../schema/index.js';
import { dateOf, rowsOf } from '../statement.js';

export type ScheduleRow = typeof schedules.$inferSelect;
export type ScheduleInsert = typeof schedules.$inferInsert;

/** A schedule is named within its tenant. */
export interface ScheduleKey { tenant: string; name: string }

function keyIs(k: ScheduleKey): SQL {
  return and(eq(schedules.tenantId, k.tenant), eq(schedules.name, k.name))!;
}

/** The database clock: schedules fire by it, never by the process clock. */
export async function dbNow(db: Db): Promise<Date> {
  const [r] = await rowsOf<{ now: string }>(db, sql`select now() as now`);
  return dateOf(r!.now)!;
}

/** Register, or replace a schedule's definition; its counters and history are kept. */
export async function scheduleUpsert(db: Db, row: ScheduleInsert): Promise<ScheduleRow> {
  const { name: _name, tenantId: _t, fires: _f, skipped: _s, missed: _m, createdAt: _c, ...set } = row;
  const [r] = await db.insert(schedules).values(row)
    .onConflictDoUpdate({ target: [schedules.tenantId, schedules.name], set: { ...set, updatedAt: sql`now()` } })
    .returning();
  return r!;
}

export async function scheduleGet(db: Db, key: ScheduleKey): Promise<ScheduleRow | undefined> {
  const [r] = await db.select().from(schedules).where(keyIs(key));
  return r;
}

export interface ScheduleListRow extends ScheduleRow { lastRunStatus: string | null }

/** Every schedule with the status of its last run, by tenant and name. */
export async function scheduleListAll(db: Db): Promise<ScheduleListRow[]> {
  const rows = await db.select({ s: schedules, lastRunStatus: sql<string | null>`(select status from dags where id = ${schedules.lastDagId})` })
    .from(schedules).orderBy(asc(schedules.tenantId), asc(schedules.name));
  return rows.map((r) => ({ ...r.s, lastRunStatus: r.lastRunStatus }));
}

/**
 * Enabled schedules whose next fire is due at `now`, locked for this
 * transaction; schedules another scheduler holds are skipped, not waited for.
 */
export function scheduleLockDue(db: Db, now: Date, limit: number): Promise<ScheduleRow[]> {
  return db.select().from(schedules)
    .where(sql`${schedules.enabled} and ${schedules.nextFireAt} <= ${now.toISOString()}::timestamptz`)
    .orderBy(asc(schedules.nextFireAt)).limit(limit).for('update', { skipLocked: true });
}

/** Lock one schedule (manual trigger, pause, resume) for this transaction. */
export async function scheduleLock(db: Db, key: ScheduleKey): Promise<ScheduleRow | undefined> {
  const [r] = await db.select().from(schedules).where(keyIs(key)).for('update');
  return r;
}

export interface ScheduleAdvance {
  nextFireAt: Date;
  lastFireAt?: Date;
  lastDagId?: string;
  fired?: number;
  skipped?: number;
  missed?: number;
}

export async function scheduleAdvance(db: Db, key: ScheduleKey, a: ScheduleAdvance): Promise<void> {
  await db.update(schedules).set({
    nextFireAt: a.nextFireAt,
    ...(a.lastFireAt ? { lastFireAt: a.lastFireAt } : {}),
    ...(a.lastDagId ? { lastDagId: a.lastDagId } : {}),
    fires: sql`${schedules.fires} + ${a.fired ?? 0}`,
    skipped: sql`${schedules.skipped} + ${a.skipped ?? 0}`,
    missed: sql`${schedules.missed} + ${a.missed ?? 0}`,
    updatedAt: sql`now()`,
  }).where(keyIs(key));
}

export async function scheduleEnabledSet(db: Db, key: ScheduleKey, enabled: boolean, nextFireAt?: Date): Promise<boolean> {
  const r = await db.update(schedules).set({ enabled, ...(nextFireAt ? { nextFireAt } : {}), updatedAt: sql`now()` })
    .where(keyIs(key)).returning({ name: schedules.name });
  return r.length > 0;
}

export async function scheduleDelete(db: Db, key: ScheduleKey): Promise<boolean> {
  const r = await db.delete(schedules).where(keyIs(key)).returning({ name: schedules.name });
  return r.length > 0;
}

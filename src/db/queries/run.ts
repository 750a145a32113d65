import { sql, type SQL } from 'drizzle-orm';
import type { Db } from '../connection.js';

/** Rows of a hand-written statement. Timestamps arrive as text from drizzle's raw path; callers map them. */
export async function rowsOf<T>(db: Db, query: SQL): Promise<T[]> {
  return (await db.execute(query)).rows as T[];
}

export function dateOf(v: string | Date | null | undefined): Date | null {
  return v == null ? null : v instanceof Date ? v : new Date(v);
}

/** NOTIFY channel for "tasks became READY". Payloads carry nothing but a hint, never task data. */
export const READY_CHANNEL = 'dagent_ready';
/** What an agent process runs on its listener connection to hear that hint. */
export const READY_LISTEN_SQL = `listen ${READY_CHANNEL}`;

/** A JS string array bound as one `text[]` parameter (a bare array would expand to a value list). */
export function textArray(values: readonly string[]): SQL {
  return sql`${sql.param([...values])}::text[]`;
}

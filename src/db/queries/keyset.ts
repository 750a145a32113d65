import { sql, type SQL } from 'drizzle-orm';

/**
 * Keyset paging for the lists that grow without bound (DAGs, dead letters): newest first by (created_at, id),
 * the next page strictly after the last row shown. A cursor is that row's exact created_at (as PostgreSQL prints
 * it: JavaScript dates would lose its microseconds and repeat or skip rows) and id, as base64url JSON.
 */
export interface Cursor { at: string; id: string }

export function cursorEncode(c: Cursor): string {
  return Buffer.from(JSON.stringify([c.at, c.id])).toString('base64url');
}

/** The cursor, or null when `s` is not one this API gave. */
export function cursorDecode(s: string): Cursor | null {
  try {
    const v: unknown = JSON.parse(Buffer.from(s, 'base64url').toString('utf8'));
    if (!Array.isArray(v) || v.length !== 2 || typeof v[0] !== 'string' || typeof v[1] !== 'string') return null;
    if (!/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,6})?[+-]\d{2}(:\d{2})?$/.test(v[0]) || v[1].length > 64) return null;
    return { at: v[0], id: v[1] };
  } catch {
    return null;
  }
}

/** Rows after the cursor in (created_at desc, id desc) order; `t` is the table's alias. */
export function keysetAfter(t: string, c: Cursor | undefined): SQL {
  if (!c) return sql`true`;
  return sql`(${sql.raw(t)}.created_at, ${sql.raw(t)}.id) < (${c.at}::timestamptz, ${c.id})`;
}

/** `%q%` for ILIKE, with the pattern's own characters taken literally. */
export function likeContaining(q: string): string {
  return `%${q.replace(/[\\%_]/g, (ch) => `\\${ch}`)}%`;
}

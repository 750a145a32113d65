import { sql, type SQL } from 'drizzle-orm';
import type { Cursor } from '../rows.js';
import { InvalidInputError } from '../../errors.js';
import { isoInstantRead } from '../../durations.js';

export type { Cursor };

/**
 * Keyset paging for the lists that grow without bound (DAGs, dead letters): newest first by (created_at, id),
 * the next page strictly after the last row shown. A cursor is that row's exact created_at (as PostgreSQL prints
 * it: JavaScript dates would lose its microseconds and repeat or skip rows) and id, as base64url JSON.
 */

export function cursorEncode(c: Cursor): string {
  return Buffer.from(JSON.stringify([c.at, c.id])).toString('base64url');
}

/** The cursor, or null when `s` is not one this API gave. */
export function cursorDecode(s: string): Cursor | null {
  try {
    const v: unknown = JSON.parse(Buffer.from(s, 'base64url').toString('utf8'));
    if (!Array.isArray(v) || v.length !== 2 || typeof v[0] !== 'string' || typeof v[1] !== 'string') return null;
    const m = /^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?)([+-]\d{2})(:\d{2})?$/.exec(v[0]);
    if (!m || v[1].length > 64) return null;
    // Held to what a request's dates are (a day that exists, years 1 to 9999, an offset within ±14:00): a 400, not
    // the database's error. Read as ISO 8601 (PostgreSQL prints `+00` for `+00:00`); the text goes on as it came.
    if (isoInstantRead(`${m[1]}T${m[2]}${m[3]}${m[4] ?? ':00'}`) instanceof Date) return { at: v[0], id: v[1] };
    return null;
  } catch {
    return null;
  }
}

/** A list's `cursor` parameter: absent, or one this API gave; anything else is INVALID_INPUT naming the field. */
export function cursorParse(s: string | undefined): Cursor | undefined {
  if (s === undefined) return undefined;
  const c = cursorDecode(s);
  if (!c) throw new InvalidInputError('cursor: not a cursor this list gave (take `next` from the previous page)', { field: 'cursor' });
  return c;
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

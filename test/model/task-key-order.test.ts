import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { rowsOf } from '../helpers/factories.js';
import { textArray } from '../../src/db/statement.js';
import { taskKeyCompare, taskKeyOrderSql } from '../../src/model/task-key-order.js';

const { db } = await testDatabase();

// The dashboard's copy, a plain JS module the browser loads (imported by URL: it has no TypeScript declarations).
const { keyCompare } = await import(new URL('../../dashboard/key-order.js', import.meta.url).href) as { keyCompare: (a: string, b: string) => number };

/**
 * Keys as DAGs write them (a letter first; digits, `_`, `-`; subtasks `parent/child`, re-runs' history `key~fence`), in
 * the order they are listed: numbers as numbers, a digit before any other character, the rest by code (- / _ a ~).
 */
const ORDERED = [
  'a', 'a0', 'a1', 'a1-b', 'a1/b', 'a1a', 'a2', 'a9', 'a10', 'a-1', 'a/0', 'a/1', 'a/2', 'a/10', 'a_1',
  'review', 'review/0', 'review/0~7', 'review/0~12', 'review/1', 'review/10', 'review~3', 'w', 'w0', 'w00', 'w01', 'w1',
  'w1b2', 'w1b10', 'w2', 'w9', 'w10', 'w11', 'w99', 'w100', 'w101', 'w999999999999999999999', 'w1000000000000000000000', 'wa',
];
/** The same keys out of order: reversed, then each half shuffled by a fixed stride. */
const shuffled = (keys: readonly string[]) => [...keys].reverse().map((_, i, all) => all[(i * 7) % all.length]!);

describe('the order task keys are listed in', () => {
  it('is natural: w0, w1, w2, …, w10, not w0, w1, w10, w100, …, w2', () => {
    const keys = Array.from({ length: 13 }, (_, i) => `w${i}`);
    expect([...keys].sort()).not.toEqual(keys);
    expect([...keys].sort(taskKeyCompare)).toEqual(keys);
    expect(new Set(shuffled(ORDERED)).size).toBe(ORDERED.length);
    expect(shuffled(ORDERED).sort(taskKeyCompare)).toEqual(ORDERED);
    for (const k of ORDERED) expect(taskKeyCompare(k, k)).toBe(0);
  });

  it('is the same in the browser (dashboard/key-order.js), pair by pair', () => {
    for (const a of ORDERED) for (const b of ORDERED) expect(Math.sign(keyCompare(a, b)), `${a} vs ${b}`).toBe(Math.sign(taskKeyCompare(a, b)));
  });

  it('is the same in PostgreSQL (taskKeyOrderSql)', async () => {
    const rows = await rowsOf<{ k: string }>(db, sql`select k from unnest(${textArray(shuffled(ORDERED))}) as u(k) order by ${taskKeyOrderSql(sql`k`)}`);
    expect(rows.map((r) => r.k)).toEqual(ORDERED);
  });
});

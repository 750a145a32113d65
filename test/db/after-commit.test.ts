import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { rowsOf } from '../helpers/factories.js';
import { afterCommit, withTx } from '../../src/db/tx.js';

const { db } = await testDatabase();

// What another connection sees of the marker table: the work queued with afterCommit must see the commit.
const seen = async () => (await rowsOf<{ n: number }>(db, sql`select count(*)::int as n from after_commit_marks`))[0]!.n;

describe('afterCommit', () => {
  it('runs queued work once the outermost transaction has committed, on another connection that sees its rows', async () => {
    await db.execute(sql`create table if not exists after_commit_marks (id int)`);
    await db.execute(sql`truncate after_commit_marks`);
    const order: string[] = [];
    let seenByWork = -1;
    await withTx(db, async (tx) => {
      await tx.execute(sql`insert into after_commit_marks values (1)`);
      await withTx(tx, async (inner) => {
        await afterCommit(inner, async (top) => {
          order.push('work');
          seenByWork = (await rowsOf<{ n: number }>(top, sql`select count(*)::int as n from after_commit_marks`))[0]!.n;
        });
      });
      order.push('body done');
    });
    expect(order).toEqual(['body done', 'work']);
    expect(seenByWork).toBe(1);
  });

  it('drops queued work when the transaction rolls back, and runs it at once outside a transaction', async () => {
    await db.execute(sql`create table if not exists after_commit_marks (id int)`);
    await db.execute(sql`truncate after_commit_marks`);
    let ran = 0;
    await expect(withTx(db, async (tx) => {
      await tx.execute(sql`insert into after_commit_marks values (1)`);
      await afterCommit(tx, async () => { ran++; });
      throw new Error('roll back');
    })).rejects.toThrow('roll back');
    expect(ran).toBe(0);
    expect(await seen()).toBe(0);
    await afterCommit(db, async () => { ran++; });
    expect(ran).toBe(1);
  });
});

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { testDatabase } from '../helpers/db.js';

// A rolling upgrade runs nodes of the previous version beside the new one, on the new schema (the first new node
// applies the migrations; an older node finds the journal ahead of it and goes on). So each migration must keep what
// older code reads and writes: no table or column removed or retyped, and a NOT NULL column added to an existing
// table has a default (an older node's INSERT does not name it). This applies every migration, one at a time, to a
// schema of its own on the real server and compares the catalog before and after each.
const database = await testDatabase({ poolSize: 2 });
const MIGRATIONS = path.resolve(import.meta.dirname, '../../migrations');
/** 0000–0003 shaped the schema before any deployment of dagent; the rule holds from 0004 on. */
const ADDITIVE_FROM = 4;

interface Column { table: string; column: string; type: string; nullable: boolean; hasDefault: boolean }

async function columns(schema: string): Promise<Map<string, Column>> {
  const { rows } = await database.pool.query<{ table_name: string; column_name: string; data_type: string; is_nullable: string; column_default: string | null; is_identity: string }>(
    `select c.table_name, c.column_name, c.data_type, c.is_nullable, c.column_default, c.is_identity
       from information_schema.columns c join information_schema.tables t using (table_schema, table_name)
      where c.table_schema = $1 and t.table_type = 'BASE TABLE'`, [schema]);
  return new Map(rows.map((r) => [`${r.table_name}.${r.column_name}`, {
    table: r.table_name, column: r.column_name, type: r.data_type, nullable: r.is_nullable === 'YES',
    hasDefault: r.column_default !== null || r.is_identity === 'YES',
  }]));
}

/** What an older node would trip on, going from `before` to `after`. */
function olderNodeBreaks(before: Map<string, Column>, after: Map<string, Column>): string[] {
  const problems: string[] = [];
  const tablesBefore = new Set([...before.values()].map((c) => c.table));
  for (const [key, c] of before) {
    const now = after.get(key);
    if (!now) problems.push(`${key} removed`);
    else if (now.type !== c.type) problems.push(`${key} retyped ${c.type} → ${now.type}`);
  }
  for (const [key, c] of after) {
    if (!before.has(key) && tablesBefore.has(c.table) && !c.nullable && !c.hasDefault) problems.push(`${key} added NOT NULL without a default`);
  }
  return problems;
}

describe('migrations during a rolling upgrade', () => {
  it('each migration from 0004 on keeps every table and column an older node uses, and adds NOT NULL columns with defaults', async () => {
    const journal = JSON.parse(readFileSync(path.join(MIGRATIONS, 'meta/_journal.json'), 'utf8')) as { entries: Array<{ idx: number; tag: string }> };
    const schema = 'rolling_upgrade';
    const client = await database.pool.connect();
    const problems: string[] = [];
    try {
      await client.query(`create schema ${schema}`);
      await client.query(`set search_path to ${schema}`);
      let before = await columns(schema);
      for (const { idx, tag } of journal.entries) {
        const text = readFileSync(path.join(MIGRATIONS, `${tag}.sql`), 'utf8');
        for (const statement of text.split('--> statement-breakpoint')) if (statement.trim()) await client.query(statement);
        const after = await columns(schema);
        if (idx >= ADDITIVE_FROM) problems.push(...olderNodeBreaks(before, after).map((p) => `${tag}: ${p}`));
        before = after;
      }
      // The same schema as the one dagent migrated for this database: the loop applied what dagent applies.
      expect([...before.values()].map((c) => `${c.table}.${c.column} ${c.type}`).sort())
        .toEqual([...(await columns('dagent')).values()].filter((c) => c.table !== '__drizzle_migrations').map((c) => `${c.table}.${c.column} ${c.type}`).sort());
    } finally {
      await client.query('reset search_path').catch(() => {});
      client.release();
    }
    expect(problems).toEqual([]);
  });

  it('the check finds a removed column, a retyped one and a NOT NULL column without a default, in the catalog', async () => {
    const schema = 'rolling_check';
    await database.pool.query(`create schema ${schema}; create table ${schema}.tasks (id text, gone text, n integer, kept text)`);
    const before = await columns(schema);
    await database.pool.query(`alter table ${schema}.tasks drop column gone, alter column n type bigint,
      add column must text not null, add column fine text not null default 'x', add column loose text;
      create table ${schema}.fresh (x text not null)`);
    expect(olderNodeBreaks(before, await columns(schema)).sort())
      .toEqual(['tasks.gone removed', 'tasks.must added NOT NULL without a default', 'tasks.n retyped integer → bigint']);
  });
});

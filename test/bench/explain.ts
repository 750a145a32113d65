/**
 * EXPLAIN ANALYZE as the bench's measurements use it (breakdown.ts, narrow-queue.ts): on one checked-out
 * connection, committed, in JSON.
 */
import { PgDialect } from 'drizzle-orm/pg-core';
import type { SQL } from 'drizzle-orm';
import type pg from 'pg';
import { inlineParams } from '../../src/db/statement.js';

export interface PlanNode { 'Node Type': string; 'Actual Total Time': number; 'Actual Loops': number; 'Subplan Name'?: string; 'WAL Bytes'?: number; Plans?: PlanNode[] }
export interface Explained { Plan: PlanNode; 'Planning Time': number; 'Execution Time': number; Triggers?: Array<{ 'Trigger Name': string; Time: number }> }

const dialect = new PgDialect();

/** `EXPLAIN (ANALYZE, BUFFERS, WAL)` of a statement written out (its parameters as literals). */
export async function explainText(client: pg.PoolClient, text: string): Promise<Explained> {
  const { rows } = await client.query(`explain (analyze, buffers, wal, format json) ${text}`);
  return (rows[0] as { 'QUERY PLAN': Explained[] })['QUERY PLAN'][0]!;
}

/**
 * A hot-path statement as it runs (rowsOfPreparedGeneric, db/statement.ts): PREPAREd once on this connection as
 * `name`, EXECUTEd under `plan_cache_mode = force_generic_plan`.
 */
export async function explainPrepared(client: pg.PoolClient, name: string, statement: SQL): Promise<Explained> {
  const q = dialect.sqlToQuery(statement);
  await client.query(`prepare ${name} as ${q.sql}`).catch((e: { code?: string }) => { if (e.code !== '42P05') throw e; });
  const args = q.params.map((_, i) => `$${i + 1}`).join(', ');
  await client.query('begin');
  try {
    await client.query('set local plan_cache_mode = force_generic_plan');
    return await explainText(client, inlineParams(`execute ${name}${args ? `(${args})` : ''}`, q.params));
  } finally {
    await client.query('commit');
  }
}

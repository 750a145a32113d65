import { createHash } from 'node:crypto';
import { sql, type SQL } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import pg from 'pg';
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
/** NOTIFY channel the events table's trigger (migration 0010) signals on every new event row. */
export const EVENTS_CHANNEL = 'dagent_events';

/** A JS string array bound as one `text[]` parameter (a bare array would expand to a value list). */
export function textArray(values: readonly string[]): SQL {
  return sql`${sql.param([...values])}::text[]`;
}

const dialect = new PgDialect();

/**
 * Rows of a hot-path statement, as a named prepared statement on the pool when
 * `db` is the pool's handle (not a transaction): each connection parses and plans
 * the text once, then reuses it. Rows come through node-postgres's own type parsing
 * (timestamps as Date, numerics as text). Inside a transaction it runs like rowsOf.
 */
export async function rowsOfPrepared<T>(db: Db, query: SQL): Promise<T[]> {
  const pool = (db as unknown as { $client?: unknown }).$client;
  if (!(pool instanceof pg.Pool)) return rowsOf<T>(db, query);
  const { sql: text, params } = dialect.sqlToQuery(query);
  return (await pool.query({ name: preparedName(text), text, values: params as unknown[] })).rows as T[];
}

/**
 * `lock`, then `query` (as rowsOfPrepared), in one transaction: `query` takes its snapshot once the
 * lock is held, so it sees everything the lock's previous holders committed. (A lock taken inside the
 * statement itself would not: a statement's snapshot is taken before it waits.) Inside a caller's
 * transaction both run there.
 */
export async function rowsOfPreparedAfterLock<T>(db: Db, lock: SQL, query: SQL): Promise<T[]> {
  const pool = (db as unknown as { $client?: unknown }).$client;
  if (!(pool instanceof pg.Pool)) {
    await db.execute(lock);
    return rowsOf<T>(db, query);
  }
  const l = dialect.sqlToQuery(lock);
  const q = dialect.sqlToQuery(query);
  const client = await pool.connect();
  let broken: Error | undefined;
  // Checked out, the client has no pool listener: a connection lost between two of these statements
  // (a database restart) must fail this claim, not crash the process.
  const onError = (e: Error) => { broken = e; };
  client.on('error', onError);
  try {
    await client.query('begin');
    await client.query({ name: preparedName(l.sql), text: l.sql, values: l.params as unknown[] });
    const rows = (await client.query({ name: preparedName(q.sql), text: q.sql, values: q.params as unknown[] })).rows as T[];
    await client.query('commit');
    return rows;
  } catch (e) {
    await client.query('rollback').catch((re: Error) => { broken = re; });
    throw e;
  } finally {
    client.off('error', onError);
    client.release(broken);
  }
}

function preparedName(text: string): string {
  return `dagent_${createHash('sha1').update(text).digest('hex').slice(0, 16)}`;
}

/**
 * States as a literal SQL list (`'claimed', 'running'`), for a predicate that must
 * match a partial index's: the planner proves index use from literals, not from a bound array.
 */
export function sqlStateList(states: readonly string[]): SQL {
  return sql.raw(states.map((s) => `'${s.replaceAll("'", "''")}'`).join(', '));
}

/** Wake sleeping agents (a change outside the task statements made work claimable: a DAG's budget was raised). */
export async function readyWake(db: Db): Promise<void> {
  await db.execute(sql`select pg_notify(${READY_CHANNEL}, '')`);
}

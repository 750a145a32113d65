import { createHash } from 'node:crypto';
import { Placeholder, sql, type SQL } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import pg from 'pg';
import type { Db } from './handle.js';
import { poolModeOf } from './pool-mode.js';

/** Rows of a hand-written statement. Timestamps arrive as text from drizzle's raw path; callers map them. */
export async function rowsOf<T>(db: Db, query: SQL): Promise<T[]> {
  return (await db.execute(query)).rows as T[];
}

export function dateOf(v: string | Date | null | undefined): Date | null {
  return v == null ? null : v instanceof Date ? v : new Date(v);
}

/**
 * An instant kept inside a jsonb value (a history entry), as ISO 8601 in UTC (`2026-11-27T09:30:00.123Z`): PostgreSQL
 * wrote it as its JSON prints a timestamptz, in the session's time zone and to the microsecond (`…09:30:00.123456+00:00`).
 */
export function isoTextOf(v: unknown): unknown {
  return typeof v === 'string' ? dateOf(v)!.toISOString() : v;
}

/** NOTIFY channel for "tasks became READY". Payloads carry nothing but a hint, never task data. */
export const READY_CHANNEL = 'dagent_ready';
/** NOTIFY channel the events table's trigger (migration 0010) signals on every new event row. */
export const EVENTS_CHANNEL = 'dagent_events';
/** NOTIFY channel a stream write signals on (its payload: `task id:fence:name`): readers of that stream read again. */
export const STREAM_CHANNEL = 'dagent_stream';
/** NOTIFY channel a token's revocation signals on (its payload is the token's id): open sessions and streams end at once. */
export const REVOKED_CHANNEL = 'dagent_token_revoked';

/** A JS string array bound as one `text[]` parameter (a bare array would expand to a value list); entries may be null. */
export function textArray(values: ReadonlyArray<string | null>): SQL {
  return sql`${sql.param([...values])}::text[]`;
}

const dialect = new PgDialect();

/**
 * Rows of a hot-path statement, as a named prepared statement on the pool when
 * `db` is the pool's handle (not a transaction): each connection parses and plans
 * the text once, then reuses it. Rows come through node-postgres's own type parsing
 * (timestamps as Date, numerics as text). Inside a transaction it runs like rowsOf.
 */
export async function rowsOfPrepared<T>(db: Db, query: SQL | CompiledQuery): Promise<T[]> {
  const pool = (db as unknown as { $client?: unknown }).$client;
  if (!(pool instanceof pg.Pool)) return rowsOf<T>(db, isCompiled(query) ? sqlOfCompiled(query) : query);
  const named = poolModeOf(pool).prepared === 'named';
  const q = isCompiled(query) ? query : textOf(query, named);
  return (await pool.query({ ...(named ? { name: `dagent_${q.hash}` } : {}), text: q.sql, values: q.params })).rows as T[];
}

/**
 * Rows of a hot-path statement that is planned once per connection: a server-side prepared statement (PREPAREd
 * once per connection, EXECUTEd with its parameters as literals) run under `plan_cache_mode = force_generic_plan`
 * (SET LOCAL, in the same round trip: the statements of one message are one implicit transaction). PostgreSQL
 * would otherwise re-plan it on every call whenever its estimate favours custom plans, and a statement of many CTEs
 * spends more planning than executing (the claim: docs/benchmarks.md). With `lockFirst`, that statement runs first,
 * in the same transaction: `query` then takes its snapshot once the lock is held, so it sees everything the lock's
 * previous holders committed (a lock inside the statement would not: a statement's snapshot is taken before it
 * waits). Inside a caller's transaction the statements run there, planned as usual.
 */
export async function rowsOfPreparedGeneric<T>(db: Db, query: SQL | CompiledQuery, opts: { lockFirst?: SQL } = {}): Promise<T[]> {
  const pool = (db as unknown as { $client?: unknown }).$client;
  if (!(pool instanceof pg.Pool)) {
    if (opts.lockFirst) await db.execute(opts.lockFirst);
    return rowsOf<T>(db, isCompiled(query) ? sqlOfCompiled(query) : query);
  }
  const q = isCompiled(query) ? query : textOf(query);
  const mode = poolModeOf(pool);
  if (mode.pooler) return rowsBehindPooler<T>(pool, q, opts.lockFirst && dialect.sqlToQuery(opts.lockFirst), mode.prepared === 'named');
  const name = `dagent_x_${q.hash}`;
  const client = await pool.connect();
  let broken: Error | undefined;
  // Checked out, the client has no pool listener: a connection lost meanwhile (a database restart)
  // must fail this call, not crash the process.
  const onError = (e: Error) => { broken = e; };
  client.on('error', onError);
  try {
    const prepared = preparedOn.get(client) ?? new Set<string>();
    preparedOn.set(client, prepared);
    const prepare = async () => {
      await client.query(`prepare ${name} as ${q.sql}`).catch((e: { code?: string }) => {
        if (e.code !== '42P05') throw e; // prepared already (an earlier call failed after preparing)
      });
      prepared.add(name);
    };
    if (!prepared.has(name)) await prepare();
    const lock = opts.lockFirst ? dialect.sqlToQuery(opts.lockFirst) : undefined;
    const text = [
      ...(lock ? [inlineParams(lock.sql, lock.params)] : []),
      'set local plan_cache_mode = force_generic_plan',
      `execute ${name}(${q.params.map(sqlLiteral).join(', ')})`,
    ].join(';\n');
    const results = (await client.query(text).catch(async (e: { code?: string }) => {
      // The session lost its prepared statements (DEALLOCATE ALL, DISCARD ALL, a pooler that reset it): the
      // message's statements were one implicit transaction, rolled back together, so prepare again and run it once more.
      if (e.code !== '26000') throw e;
      prepared.delete(name);
      await prepare();
      return client.query(text);
    })) as unknown as pg.QueryResult[];
    return results[results.length - 1]!.rows as T[];
  } finally {
    client.off('error', onError);
    client.release(broken);
  }
}

/**
 * rowsOfPreparedGeneric behind a transaction-mode pooler, which keeps no session for a client between
 * transactions: a statement PREPAREd in SQL would be gone, or on another server connection, by its EXECUTE.
 * One statement alone, protocol-level (named or not, as the pooler allows) and planned as PostgreSQL's plan cache
 * decides; with `lock`, both in one explicit transaction (four round trips instead of one: the price of the pooler).
 */
async function rowsBehindPooler<T>(pool: pg.Pool, q: CompiledQuery, lock: { sql: string; params: unknown[] } | undefined, named: boolean): Promise<T[]> {
  const statement = { ...(named ? { name: `dagent_${q.hash}` } : {}), text: q.sql, values: q.params };
  if (!lock) return (await pool.query(statement)).rows as T[];
  const client = await pool.connect();
  let broken: Error | undefined;
  const onError = (e: Error) => { broken = e; };
  client.on('error', onError);
  try {
    await client.query('begin');
    try {
      await client.query({ text: lock.sql, values: lock.params });
      const { rows } = await client.query(statement);
      await client.query('commit');
      return rows as T[];
    } catch (e) {
      await client.query('rollback').catch(() => {});
      throw e;
    }
  } finally {
    client.off('error', onError);
    client.release(broken);
  }
}

/**
 * A statement's text, compiled once for every call of its shape: what varies between calls are placeholders
 * (drizzle's `sql.placeholder`), filled by queryFill. Building the claim's ~9,400 characters from its fragments and
 * hashing them for the prepared statement's name cost 94 us of Node per claim (141 us with the concurrency keys'
 * steps), a lone completion with its hand-off 232 us; filling them 1.3 and 6.6 us (docs/benchmarks.md "What the
 * fleet controls cost the claim").
 */
export interface CompiledQuery {
  sql: string;
  params: unknown[];
  /** The text's hash: prepared statements are named by it. */
  hash: string;
  /** For each parameter, the placeholder that fills it, or undefined for a value fixed in the shape. */
  slots: Array<string | undefined>;
}

function isCompiled(q: SQL | CompiledQuery): q is CompiledQuery {
  return typeof (q as CompiledQuery).hash === 'string';
}

/** A statement's text, parameters and (unless `hashed` is false: an unnamed statement) hash, for one call. */
function textOf(query: SQL, hashed = true): CompiledQuery {
  const { sql: text, params } = dialect.sqlToQuery(query);
  return { sql: text, params, slots: [], hash: hashed ? createHash('sha1').update(text).digest('hex').slice(0, 16) : '' };
}

/** `query` compiled once: its text, its hash, and which parameters are placeholders. */
export function queryCompile(query: SQL): CompiledQuery {
  const c = textOf(query);
  // sqlOfCompiled reads every `$n` of the text as a parameter: a `$` of the statement's own (a literal, a jsonpath)
  // would be taken for one. Checked once per shape.
  const refs = [...c.sql.matchAll(/\$(\d+)/g)].map((m) => Number(m[1]));
  if (refs.length !== c.params.length || refs.some((n, i) => n !== i + 1) || /\$(?!\d)/.test(c.sql)) {
    throw new Error('a compiled statement may hold no $ but its parameters, each once, in order');
  }
  return { ...c, slots: c.params.map((p) => (p instanceof Placeholder ? p.name : undefined)) };
}

/**
 * A compiled statement with its placeholders given values. Each must have one (null for SQL's NULL): an undefined one
 * would be bound as NULL where the statement built with it failed (drizzle leaves `undefined` out of the text), and
 * a hand-off's NULL lease would never expire.
 */
export function queryFill(c: CompiledQuery, values: Record<string, unknown>): CompiledQuery {
  const params = c.params.map((p, i) => {
    const name = c.slots[i];
    if (name === undefined) return p;
    if (values[name] === undefined) throw new Error(`no value for the statement's placeholder ${name}`);
    return values[name];
  });
  return { ...c, params };
}

/**
 * A filled statement as drizzle SQL again, for a caller's transaction (drizzle runs SQL objects there). Its only `$n`
 * are its parameters (queryCompile checks).
 */
function sqlOfCompiled(c: CompiledQuery): SQL {
  const parts = c.sql.split(/\$(\d+)/);
  return sql.join(parts.map((part, i) => (i % 2 === 0 ? sql.raw(part) : sql.param(c.params[Number(part) - 1]))));
}

/** Which server-side prepared statements each pooled connection holds. */
const preparedOn = new WeakMap<object, Set<string>>();

/** A parameter as an SQL literal: drizzle's parameters here are strings, numbers, booleans, null and text arrays. */
function sqlLiteral(v: unknown): string {
  if (v === null || v === undefined) return 'NULL';
  if (typeof v === 'number' || typeof v === 'bigint') return String(v);
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (Array.isArray(v)) {
    const items = v.map((i) => (i === null || i === undefined ? 'NULL' : `"${String(i).replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`));
    return pg.escapeLiteral(`{${items.join(',')}}`);
  }
  return pg.escapeLiteral(typeof v === 'string' ? v : JSON.stringify(v));
}

/** `text` with its $n parameters written in as literals (an EXPLAIN EXECUTE takes no bound parameters). */
export function inlineParams(text: string, params: unknown[]): string {
  return text.replace(/\$(\d+)/g, (_, n: string) => sqlLiteral(params[Number(n) - 1]));
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

/**
 * `and <the DAG id> belongs to one of these tenants`, for reads a token scoped to tenants makes; nothing for null
 * (every tenant's). `dagIdColumn` is the row's DAG id: every task, attempt, usage report and event has one.
 */
export function tenantScopeSql(dagIdColumn: SQL, tenants: readonly string[] | null | undefined): SQL {
  return tenants ? sql`and ${dagIdColumn} in (select id from dags where tenant_id = any(${textArray(tenants)}))` : sql``;
}

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { migrate } from 'drizzle-orm/node-postgres/migrator';
import pg from 'pg';
import type { Logger } from 'pino';
import * as schema from './schema/index.js';
import { embeddedServerStart, type EmbeddedServer } from './embedded.js';
import { embeddedWatch } from './embedded-watch.js';
import { packageRoot } from '../package-root.js';
import { CONFIG_DEFAULTS } from '../config/defaults.js';
import { identifierQuote, legacyLayoutMove, MIGRATIONS_TABLE } from './schema-layout.js';
import { poolModeSet, type PreparedStatements } from './pool-mode.js';
import { InvalidInputError } from '../errors.js';

import type { Database, Db } from './handle.js';

export type { Database, Db } from './handle.js';

export interface DatabaseOptions {
  /** Postgres URL; without it the embedded server in `dataDir` is started or joined. */
  url?: string;
  /**
   * The same database without a pooler (DATABASE_DIRECT_URL). Given, `url` is taken to be a transaction-mode pooler
   * (PgBouncer): the pool sends no startup options and keeps no session state, and what needs a session (LISTEN,
   * migrations) connects here. The pooler's connections must resolve dagent's tables in `schema` on their own
   * (ALTER ROLE … SET search_path): open refuses them otherwise.
   */
  directUrl?: string;
  /** Hot-path prepared statements (DAGENT_DB_PREPARED). Default `named`; behind a pooler (`directUrl`), `unnamed`. */
  prepared?: PreparedStatements;
  dataDir?: string;
  /** Apply pending migrations on open. Default true. */
  migrate?: boolean;
  /** The PostgreSQL schema dagent's tables live in (DAGENT_DB_SCHEMA). Default `dagent`. */
  schema?: string;
  poolSize?: number;
  /** Seconds to wait for a new connection's answer. Default CONFIG_DEFAULTS.dbConnectTimeoutSec. */
  connectTimeoutSec?: number;
  /** Seconds to wait for a statement's answer before dropping its connection. Default CONFIG_DEFAULTS.dbQueryTimeoutSec. */
  queryTimeoutSec?: number;
  log?: Logger;
}

export const MIGRATIONS_DIR = path.join(packageRoot(), 'migrations');
// Arbitrary but fixed: every dagent process serializes migrations on this advisory lock key.
const MIGRATION_LOCK_KEY = 0x64616731;

/** A connection that needs a session (migrations, the check at start): on DATABASE_DIRECT_URL, past the pooler. */
export interface SessionConfig {
  connectionString: string;
  options: string;
  connectionTimeoutMillis: number;
}

/** An error met on DATABASE_DIRECT_URL's connections: the CLI blames that variable, not DATABASE_URL. */
export interface DirectUrlError extends Error {
  directUrl?: string;
}

export async function databaseOpen(opts: DatabaseOptions = {}): Promise<Database> {
  const owned: EmbeddedServer[] = [];
  let url = opts.url;
  let unwatch = () => {};
  if (opts.directUrl && !url) throw new InvalidInputError('a direct URL (DATABASE_DIRECT_URL) needs the pooler\'s URL (DATABASE_URL) too');
  if (!url) {
    const dataDir = opts.dataDir ?? '.dagent';
    const server = await embeddedServerStart({ dataDir, log: opts.log });
    if (server.owned) owned.push(server);
    url = server.url;
    // Whoever started the server stops it when it exits: bring it back then (embedded-watch.ts).
    unwatch = embeddedWatch({ dataDir, log: opts.log }, (s) => owned.push(s));
  }
  const stopOwned = async () => {
    unwatch();
    for (const s of owned.splice(0)) await s.stop();
  };
  const dbSchema = opts.schema ?? CONFIG_DEFAULTS.dbSchema;
  const pooler = opts.directUrl !== undefined;
  // Every connection resolves dagent's unqualified table names in its own schema, and only there:
  // an application's tables of the same names in the database are never touched. A transaction-mode pooler
  // refuses startup options (PgBouncer: "unsupported startup parameter"), or would lose them between
  // transactions: there the server's own setting for the role or database must say it (checked below).
  const searchPath = `-c search_path=${identifierQuote(dbSchema)}`;
  const pool = new pg.Pool({
    connectionString: url, max: opts.poolSize ?? CONFIG_DEFAULTS.dbPool, ...(pooler ? {} : { options: searchPath }),
    connectionTimeoutMillis: (opts.connectTimeoutSec ?? CONFIG_DEFAULTS.dbConnectTimeoutSec) * 1000,
    query_timeout: (opts.queryTimeoutSec ?? CONFIG_DEFAULTS.dbQueryTimeoutSec) * 1000,
    keepAlive: true,
  });
  poolModeSet(pool, { pooler, prepared: opts.prepared ?? (pooler ? 'unnamed' : 'named') });
  pool.on('connect', connectionDropOnTimeout);
  let closing = false;
  // An idle client losing its server (restart, network) must not crash the process; during close it is expected.
  pool.on('error', (err) => {
    if (!closing) opts.log?.warn({ err }, 'idle database client error');
  });
  const db = drizzle(pool, { schema });
  // Migrations hold a session-level advisory lock and set the session's search_path: on the direct URL.
  const session: SessionConfig | undefined = opts.directUrl !== undefined
    ? { connectionString: opts.directUrl, options: searchPath, connectionTimeoutMillis: (opts.connectTimeoutSec ?? CONFIG_DEFAULTS.dbConnectTimeoutSec) * 1000 }
    : undefined;
  try {
    // Behind a pooler: both URLs must reach one database before anything is written through either.
    if (session) await directUrlCheck(pool, session);
    if (opts.migrate !== false) {
      await migrationsApply(pool, dbSchema, opts.log, session);
    }
    if (session) await poolerSchemaCheck(pool, dbSchema);
  } catch (e) {
    await pool.end();
    await stopOwned();
    throw e;
  }
  return {
    db,
    pool,
    url,
    sessionUrl: opts.directUrl ?? url,
    async close() {
      closing = true;
      await pool.end();
      await stopOwned();
    },
  };
}

/**
 * Apply pending migrations in `dbSchema` (created if missing; a database from before dagent had its
 * own schema is moved into it first, schema-layout.ts); concurrent callers wait on one advisory lock,
 * so this is safe from many processes.
 */
export async function migrationsApply(pool: Database['pool'], dbSchema: string = CONFIG_DEFAULTS.dbSchema, log?: Logger, session?: SessionConfig): Promise<void> {
  // Every command opens the database: when the journal already holds the newest migration, one
  // statement says so, without the lock, the DDL checks and reading every migration file.
  const pooled = await pool.connect();
  try {
    if (await migrationsCurrent(pooled, dbSchema)) return;
  } finally {
    pooled.release();
  }
  // Its own connection, without the pool's query timeout: a migration of a large table may take minutes.
  const client = new pg.Client(session ?? { ...(pool as unknown as { options: pg.ClientConfig }).options, query_timeout: undefined });
  client.on('error', () => {}); // a lost connection fails the statement in progress, which throws below
  try {
    await client.connect();
    await migrationsRun(client, dbSchema, log);
  } catch (e) {
    // Whatever failed on the direct connection (refused, dropped, not allowed to create the schema) names it.
    if (session) (e as DirectUrlError).directUrl = session.connectionString;
    throw e;
  } finally {
    await client.end().catch(() => {});
  }
}

/** The migrations on their own connection, under the advisory lock every dagent process takes for them. */
async function migrationsRun(client: pg.Client, dbSchema: string, log?: Logger): Promise<void> {
  await client.query('select pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
  try {
    await client.query(`create schema if not exists ${identifierQuote(dbSchema)}`);
    await legacyLayoutMove(client, dbSchema, MIGRATIONS_DIR, log);
    // The migrations name no schema: they create and alter in this one, whatever pool this is.
    await client.query(`set search_path to ${identifierQuote(dbSchema)}`);
    try {
      await migrate(drizzle(client, { schema }), { migrationsFolder: MIGRATIONS_DIR, migrationsSchema: dbSchema, migrationsTable: MIGRATIONS_TABLE });
    } finally {
      await client.query('reset search_path');
    }
  } finally {
    await client.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
  }
}

/**
 * Behind a pooler, before anything is written: the direct URL must reach the same database of the same server as
 * the pooler (else migrations would go elsewhere, and LISTEN would hear nothing of what the pool does).
 */
async function directUrlCheck(pool: pg.Pool, session: SessionConfig): Promise<void> {
  type Facts = { db: string; started: string };
  const facts = 'select current_database() as db, pg_postmaster_start_time()::text as started';
  const { rows: [pooled] } = await pool.query<Facts>(facts);
  const client = new pg.Client(session);
  client.on('error', () => {});
  let direct: Facts | undefined;
  try {
    await client.connect();
    direct = (await client.query<Facts>(facts)).rows[0];
  } catch (e) {
    (e as DirectUrlError).directUrl = session.connectionString;
    throw e;
  } finally {
    await client.end().catch(() => {});
  }
  if (direct!.db !== pooled!.db || direct!.started !== pooled!.started) {
    throw new InvalidInputError(`DATABASE_DIRECT_URL: reaches database "${direct!.db}" of a server up since ${direct!.started}, `
      + `but DATABASE_URL reaches "${pooled!.db}" of a server up since ${pooled!.started}: both must reach the same database `
      + `(DATABASE_DIRECT_URL without the pooler); nothing was written`);
  }
}

/**
 * Behind a pooler, once the schema exists: dagent's unqualified names must resolve in its schema on the pooler's
 * connections. The server's own setting for the role or database must say so: a transaction-mode pooler cannot
 * carry the one dagent sends when it connects.
 */
async function poolerSchemaCheck(pool: pg.Pool, dbSchema: string): Promise<void> {
  const { rows: [r] } = await pool.query<{ schema: string | null; search_path: string; usr: string; db: string; usage: boolean | null }>(
    `select current_schema() as schema, current_setting('search_path') as search_path, current_user as usr, current_database() as db,
       (select has_schema_privilege(n.oid, 'USAGE') from pg_namespace n where n.nspname = $1) as usage`, [dbSchema]);
  if (r!.schema === dbSchema) return;
  if (r!.usage === false) {
    throw new InvalidInputError(`DATABASE_URL: the pooler's user ${pg.escapeIdentifier(r!.usr)} may not use schema "${dbSchema}" (made by `
      + `DATABASE_DIRECT_URL's user): GRANT USAGE ON SCHEMA ${identifierQuote(dbSchema)} TO ${pg.escapeIdentifier(r!.usr)}, and rights on its tables, `
      + `or use the same user in both URLs`);
  }
  throw new InvalidInputError(`DATABASE_URL: the pooler's connections have search_path ${r!.search_path}, so dagent's tables in `
    + `schema "${dbSchema}" are not found there, and a transaction-mode pooler cannot carry the setting dagent sends when it `
    + `connects; set it on the server: ALTER ROLE ${pg.escapeIdentifier(r!.usr)} IN DATABASE ${pg.escapeIdentifier(r!.db)} `
    + `SET search_path TO ${identifierQuote(dbSchema)} (or PgBouncer's connect_query for that database)`);
}

/** True when `dbSchema`'s journal holds the newest migration this build ships (migrations/meta/_journal.json). */
async function migrationsCurrent(client: pg.ClientBase, dbSchema: string): Promise<boolean> {
  const journal = JSON.parse(readFileSync(path.join(MIGRATIONS_DIR, 'meta/_journal.json'), 'utf8')) as { entries: Array<{ when: number }> };
  const newest = Math.max(...journal.entries.map((e) => e.when));
  const table = `${identifierQuote(dbSchema)}.${MIGRATIONS_TABLE}`;
  try {
    const { rows: [r] } = await client.query<{ applied: boolean }>(`select coalesce(max(created_at), 0) >= $1 as applied from ${table}`, [newest]);
    return r?.applied === true;
  } catch (e) {
    if ((e as { code?: string }).code === '42P01' || (e as { code?: string }).code === '3F000') return false; // no journal (or schema) yet
    throw e;
  }
}

/**
 * A statement given up by query_timeout leaves its connection waiting for an answer that may never come
 * (a server gone silent): close it, so it fails at once for whoever holds it and the pool drops it,
 * instead of a transaction's next statement, or the next borrower, waiting out the timeout again.
 */
function connectionDropOnTimeout(client: pg.PoolClient): void {
  // A connection that breaks while lent out fails the statement in progress (or the next one) and is
  // dropped when given back; its 'error' event, with no pool listener then, must not crash the process.
  client.on('error', () => {});
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  (client as unknown as { query: unknown }).query = (...args: unknown[]) => {
    const result = query(...args);
    if (result instanceof Promise) {
      result.catch((e: unknown) => {
        if ((e as Error | undefined)?.message === 'Query read timeout') {
          (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
        }
      });
    }
    return result;
  };
}

/** Work to run once a transaction has committed, with the handle the transaction was opened on. */
type AfterCommit = (db: Db) => Promise<unknown>;
const afterCommitQueues = new WeakMap<object, AfterCommit[]>();

/**
 * Run `fn` in one transaction (a savepoint inside another). On the pool, the connection is taken
 * here rather than by drizzle, whose transaction never gives its connection back when BEGIN itself
 * fails (a server lost or gone silent at that moment): here it goes back, dropped if it broke.
 * What `afterCommit` queued inside runs once the outermost transaction has committed, not on rollback.
 */
export async function withTx<T>(db: Db, fn: (tx: Db) => Promise<T>): Promise<T> {
  const outer = afterCommitQueues.get(db);
  const queue = outer ?? [];
  const inTx = (tx: Db) => {
    afterCommitQueues.set(tx, queue);
    return fn(tx);
  };
  const pool = (db as unknown as { $client?: unknown }).$client;
  let result: T;
  if (!(pool instanceof pg.Pool)) {
    result = await db.transaction((tx) => inTx(tx as unknown as Db));
  } else {
    const client = await pool.connect();
    let broken: Error | undefined;
    try {
      result = await clientDb(client).transaction((tx) => inTx(tx as unknown as Db));
    } catch (e) {
      if (isConnectionLost(e)) broken = e as Error;
      throw e;
    } finally {
      client.release(broken);
    }
  }
  if (!outer) for (const work of queue) await work(db);
  return result;
}

/**
 * Run `work` once what `db` is in has committed: at once when `db` is no transaction (its
 * statements commit as they run), else after withTx's outermost transaction commits.
 * For work that must see a transaction's effects from a fresh snapshot and must not hold its locks.
 */
export async function afterCommit(db: Db, work: AfterCommit): Promise<void> {
  const queue = afterCommitQueues.get(db);
  if (queue) queue.push(work);
  else await work(db);
}

/** One drizzle handle per pooled connection, made once (building it reads the whole schema). */
type ClientHandle = NodePgDatabase<typeof schema>;
const clientHandles = new WeakMap<pg.PoolClient, ClientHandle>();
function clientDb(client: pg.PoolClient): ClientHandle {
  let handle = clientHandles.get(client);
  if (!handle) {
    handle = drizzle(client, { schema });
    clientHandles.set(client, handle);
  }
  return handle;
}

// Socket errors, and the SQLSTATEs of a server that is shutting down, starting up or unreachable.
const CONNECTION_LOST_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', '57P01', '57P02', '57P03', '08000', '08001', '08003', '08004', '08006']);

/**
 * True when an error means "the database could not be reached", not "the
 * statement was wrong": worth retrying once the server is back. Drizzle wraps
 * driver errors, so the cause is checked too.
 */
export function isConnectionLost(e: unknown): boolean {
  for (let err = e as { code?: string; message?: string; cause?: unknown } | undefined, depth = 0; err && depth < 4; err = err.cause as typeof err, depth++) {
    if (err.code && CONNECTION_LOST_CODES.has(err.code)) return true;
    if (/Connection terminated|connection is closed|Client has encountered a connection error|Client was closed|timeout exceeded when trying to connect|Query read timeout/i.test(err.message ?? '')) return true;
  }
  return false;
}

// deadlock_detected, serialization_failure: the transaction was rolled back whole and may simply be run again.
const TRANSIENT_CODES = new Set(['40P01', '40001']);

/** A deadlock or serialization failure: PostgreSQL rolled the transaction back, and running it again is safe. */
export function isTransientConflict(e: unknown): boolean {
  const err = e as { code?: string; cause?: { code?: string } } | undefined;
  return TRANSIENT_CODES.has(err?.code ?? '') || TRANSIENT_CODES.has(err?.cause?.code ?? '');
}

/**
 * withTx, run again (up to `tries` times in all) when PostgreSQL aborts it as a deadlock victim or a
 * serialization failure; for transactions that lock rows other writers hold in another order and
 * whose every effect is inside the transaction.
 */
export async function withTxRetried<T>(db: Db, fn: (tx: Db) => Promise<T>, tries = 3): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await withTx(db, fn);
    } catch (e) {
      if (attempt >= tries || !isTransientConflict(e)) throw e;
    }
  }
}

/** The driver's message for an error drizzle wrapped (its own message repeats the whole statement). */
export function errorMessage(e: unknown): string {
  const err = e as { message?: string; cause?: { message?: string } } | undefined;
  return err?.cause?.message ?? err?.message ?? String(e);
}

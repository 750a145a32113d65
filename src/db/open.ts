import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import type { Logger } from 'pino';
import * as schema from './schema/index.js';
import { embeddedServerStart, type EmbeddedServer } from './embedded.js';
import { embeddedWatch } from './embedded-watch.js';
import { CONFIG_DEFAULTS } from '../config/defaults.js';
import { identifierQuote } from './schema-layout.js';
import { PatientPool } from './patient-pool.js';
import { poolModeSet, type PreparedStatements } from './pool-mode.js';
import { InvalidInputError } from '../errors.js';
import { migrationsApply, type DirectUrlError, type SessionConfig } from './migrate.js';
import type { Database } from './handle.js';

export type { Database, Db } from './handle.js';

/** Opening the database: the embedded server or DATABASE_URL's, the pool, the checks behind a pooler, migrations. */

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
  const pool = new PatientPool({
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

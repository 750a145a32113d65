import { readFileSync } from 'node:fs';
import path from 'node:path';
import { drizzle } from 'drizzle-orm/node-postgres';
import { migrate } from 'drizzle-orm/node-postgres/migrator';
import pg from 'pg';
import type { Logger } from 'pino';
import * as schema from './schema/index.js';
import { packageRoot } from '../package-root.js';
import { CONFIG_DEFAULTS } from '../config/defaults.js';
import { identifierQuote, legacyLayoutMove, MIGRATIONS_TABLE } from './schema-layout.js';
import type { Database } from './handle.js';

/** The schema's migrations (drizzle-kit's, in migrations/): applied once, by whichever process opens the database first. */

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

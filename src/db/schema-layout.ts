import { getTableName, is } from 'drizzle-orm';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import { PgTable } from 'drizzle-orm/pg-core';
import type pg from 'pg';
import type { Logger } from 'pino';
import * as schema from './schema/index.js';

/** The migration journal's table, in dagent's schema (drizzle's default, `drizzle`, would be shared with an application's). */
export const MIGRATIONS_TABLE = '__drizzle_migrations';
/** The functions the migrations create (triggers on `events`); tables carry their indexes, triggers and sequences along. */
const FUNCTIONS = ['dagent_events_notify()', 'dagent_webhook_enqueue()'];

/** `"name"`: dagentSchemaName() guarantees a plain identifier, this guards SQL built with it. */
export function identifierQuote(name: string): string {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new Error(`not a plain PostgreSQL identifier: ${name}`);
  return `"${name}"`;
}

/**
 * Before version 0.1.0 shipped its own schema, dagent's tables lived in `public` and its migration
 * journal in `drizzle.__drizzle_migrations`. Such a database is moved, once, in one transaction, under
 * the migration lock: the tables (with their rows, indexes, triggers and sequences) and the trigger
 * functions go to `target`, and dagent's journal rows (recognised by their timestamps) go with them.
 * A database that never held dagent, or was moved already, is left alone. Returns whether it moved.
 */
export async function legacyLayoutMove(client: pg.ClientBase, target: string, migrationsFolder: string, log?: Logger): Promise<boolean> {
  if (target === 'public') return false;
  const q = identifierQuote(target);
  const { rows: [found] } = await client.query<{ journal: string | null; tasks: string | null; moved: string | null }>(
    `select to_regclass('drizzle.${MIGRATIONS_TABLE}')::text as journal, to_regclass('public.tasks')::text as tasks,
            to_regclass($1)::text as moved`, [`${q}.${MIGRATIONS_TABLE}`]);
  if (!found?.journal || !found.tasks || found.moved) return false;
  const ours = readMigrationFiles({ migrationsFolder }).map((m) => m.folderMillis);
  const { rows: [journal] } = await client.query<{ n: number }>('select count(*)::int as n from drizzle.__drizzle_migrations where created_at = $1', [ours[0]]);
  if (!journal?.n) return false; // a `drizzle` journal, but an application's: its public.tasks is not dagent's
  const tables = Object.values(schema).filter((v) => is(v, PgTable)).map((t) => getTableName(t as PgTable));
  await client.query('begin');
  try {
    await client.query(`create schema if not exists ${q}`);
    const moved: string[] = [];
    for (const table of tables) {
      const { rows: [t] } = await client.query<{ r: string | null }>('select to_regclass($1)::text as r', [`public.${table}`]);
      if (!t?.r) continue;
      await client.query(`alter table public.${identifierQuote(table)} set schema ${q}`);
      moved.push(table);
    }
    for (const fn of FUNCTIONS) {
      const { rows: [f] } = await client.query<{ r: string | null }>('select to_regprocedure($1)::text as r', [`public.${fn}`]);
      if (f?.r) await client.query(`alter function public.${fn} set schema ${q}`);
    }
    await client.query(`create table ${q}.${MIGRATIONS_TABLE} (id serial primary key, hash text not null, created_at bigint)`);
    await client.query(`insert into ${q}.${MIGRATIONS_TABLE} (hash, created_at)
      select hash, created_at from drizzle.${MIGRATIONS_TABLE} where created_at = any($1::bigint[]) order by id`, [ours]);
    await client.query(`delete from drizzle.${MIGRATIONS_TABLE} where created_at = any($1::bigint[])`, [ours]);
    await client.query('commit');
    log?.warn({ schema: target, tables: moved.length }, `moved dagent's tables from the public schema to ${target} (once; see docs/operations.md)`);
    return true;
  } catch (e) {
    await client.query('rollback');
    throw e;
  }
}

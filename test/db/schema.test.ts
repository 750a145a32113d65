import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { drizzle } from 'drizzle-orm/node-postgres';
import { migrate } from 'drizzle-orm/node-postgres/migrator';
import { nanoid } from 'nanoid';
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { MIGRATIONS_DIR } from '../../src/db/migrate.js';
import { databaseOpen } from '../../src/db/open.js';
import * as schema from '../../src/db/schema/index.js';
import { dagSourceLoad } from '../../src/dag/load.js';
import { dagStatus } from '../../src/engine/read/inspect.js';
import { dagSubmit } from '../../src/engine/dag/submit.js';
import { cliWith } from '../helpers/cli.js';
import { dagentTableCount } from '../helpers/db.js';
import { adminQuery, withDatabase } from '../helpers/global-setup.js';

// dagent shares a database politely: its tables, its trigger functions and its migration journal live
// in their own schema (default `dagent`, DAGENT_DB_SCHEMA), never in `public`, and a database from before
// that (tables in public, journal in drizzle.__drizzle_migrations) is moved there once.
const adminUrl = inject('adminUrl');
const created: string[] = [];
async function freshDatabase(): Promise<string> {
  const name = `${inject('dbPrefix')}schema_${nanoid(6).toLowerCase().replace(/[^a-z0-9]/g, 'x')}`;
  await adminQuery(adminUrl, `create database ${name}`);
  created.push(name);
  return withDatabase(adminUrl, name);
}
afterAll(async () => {
  for (const name of created) await adminQuery(adminUrl, `drop database if exists ${name} with (force)`);
});

async function query<T>(url: string, text: string): Promise<T[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query(text)).rows as T[];
  } finally {
    await c.end();
  }
}
const tablesBySchema = (url: string) => query<{ table_schema: string; n: number }>(url, `
  select table_schema, count(*)::int as n from information_schema.tables
  where table_schema not in ('pg_catalog', 'information_schema') group by 1 order by 1`);

describe('dagent\'s own schema', () => {
  it('sits beside an application that has its own tasks and dags tables and its own drizzle journal, touching none of them', async () => {
    const url = await freshDatabase();
    await query(url, `create table public.tasks (id int primary key, title text);
      insert into public.tasks values (1, 'the application''s');
      create table public.dags (name text);
      create schema drizzle; create table drizzle.__drizzle_migrations (id serial primary key, hash text not null, created_at bigint);
      insert into drizzle.__drizzle_migrations (hash, created_at) values ('app', 42)`);
    const d = await databaseOpen({ url });
    try {
      const [submitted] = await dagSubmit(d.db, [await dagSourceLoad('name: beside\ntasks:\n  a: { type: t }\n', 'beside.yaml')]);
      expect((await dagStatus(d.db, submitted!.dagId)).tasks.map((t) => t.key)).toEqual(['a']);
    } finally {
      await d.close();
    }
    expect(await tablesBySchema(url)).toEqual([{ table_schema: 'dagent', n: await dagentTableCount() }, { table_schema: 'drizzle', n: 1 }, { table_schema: 'public', n: 2 }]);
    expect(await query(url, 'select * from public.tasks')).toEqual([{ id: 1, title: 'the application\'s' }]);
    expect(await query(url, 'select hash, created_at::int from drizzle.__drizzle_migrations')).toEqual([{ hash: 'app', created_at: 42 }]);
  });

  it('DAGENT_DB_SCHEMA names another schema; a name that is not a plain identifier, or is public or a pg_ name, is exit 2 naming the variable, and nothing is created', async () => {
    const url = await freshDatabase();
    const bad = await cliWith({ ...process.env, DATABASE_URL: url, DAGENT_DB_SCHEMA: 'Robert"; drop table x' })('migrate');
    expect([bad.code, bad.stderr]).toEqual([2, expect.stringMatching(/environment DAGENT_DB_SCHEMA: expected a plain lower-case identifier/)]);
    expect(await tablesBySchema(url)).toEqual([]);
    for (const name of ['pg_x', 'public']) {
      const reserved = await cliWith({ ...process.env, DATABASE_URL: url, DAGENT_DB_SCHEMA: name })('migrate');
      expect([reserved.code, reserved.stderr]).toEqual([2, expect.stringMatching(/^error: environment DAGENT_DB_SCHEMA: a schema of dagent's own: not public, information_schema or a pg_ name/)]);
    }
    expect(await tablesBySchema(url)).toEqual([]);
    const ok = await cliWith({ ...process.env, DATABASE_URL: url, DAGENT_DB_SCHEMA: 'work_queue' })('migrate');
    expect([ok.code, ok.stderr]).toEqual([0, '']);
    expect(await tablesBySchema(url)).toEqual([{ table_schema: 'work_queue', n: await dagentTableCount() }]);
  });

  it('a database of the earlier layout (tables in public, journal in drizzle) is moved once, with its rows, and works on', async () => {
    const url = await freshDatabase();
    // The earlier layout, as the previous version made it: no search_path, drizzle's default journal.
    const old = new pg.Pool({ connectionString: url, max: 1 });
    let dagId: string;
    try {
      await migrate(drizzle(old, { schema }), { migrationsFolder: MIGRATIONS_DIR });
      const [submitted] = await dagSubmit(drizzle(old, { schema }), [await dagSourceLoad('name: before\ntasks:\n  a: { type: t }\n  b: { type: t, depends_on: [a] }\n', 'before.yaml')]);
      dagId = submitted!.dagId;
    } finally {
      await old.end();
    }
    const migrations = (await query<{ n: number }>(url, 'select count(*)::int as n from drizzle.__drizzle_migrations'))[0]!.n;
    expect(await tablesBySchema(url)).toEqual([{ table_schema: 'drizzle', n: 1 }, { table_schema: 'public', n: (await dagentTableCount()) - 1 }]);

    for (let open = 1; open <= 2; open++) {
      const d = await databaseOpen({ url });
      try {
        const s = await dagStatus(d.db, dagId);
        expect(s.tasks.map((t) => [t.key, t.status])).toEqual([['a', 'ready'], ['b', 'pending']]);
        // The trigger functions moved too: an event still notifies (events_notify runs dagent_events_notify()).
        await d.pool.query("insert into events (type, dag_id, data) values ('test.moved', $1, '{}')", [dagId]);
      } finally {
        await d.close();
      }
    }
    expect(await tablesBySchema(url)).toEqual([{ table_schema: 'dagent', n: await dagentTableCount() }, { table_schema: 'drizzle', n: 1 }]);
    expect(await query(url, 'select count(*)::int as n from dagent.__drizzle_migrations')).toEqual([{ n: migrations }]);
    expect(await query(url, 'select count(*)::int as n from drizzle.__drizzle_migrations')).toEqual([{ n: 0 }]);
    expect(await query(url, "select to_regprocedure('dagent.dagent_events_notify()') is not null as moved, to_regprocedure('public.dagent_events_notify()') is null as gone"))
      .toEqual([{ moved: true, gone: true }]);
  });

  it('no migration names a schema: each creates and alters in dagent\'s (drizzle-kit writes "public". into foreign keys; take it out)', () => {
    const named = readdirSync(MIGRATIONS_DIR).filter((f) => f.endsWith('.sql') && /"public"\./.test(readFileSync(path.join(MIGRATIONS_DIR, f), 'utf8')));
    expect(named).toEqual([]);
  });
});

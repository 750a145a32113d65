import { sql } from 'drizzle-orm';
import type { Db } from '../../src/db/handle.js';
import { rowsOf } from './factories.js';

const columnsOf = new WeakMap<object, Map<string, string[]>>();

/**
 * Time passes, as far as the database's record goes: every instant stored in this test's database moves `ms` into
 * the past, as if the test had waited `ms` after writing it, without waiting. dagent's statements stamp rows with
 * the database's clock (now(), clock_timestamp()), which a test cannot set; moving what is recorded is the same,
 * for every statement and read model that compares stored instants with each other or with now.
 */
export async function timePasses(db: Db, ms: number): Promise<void> {
  let tables = columnsOf.get(db);
  if (!tables) {
    const cols = await rowsOf<{ t: string; c: string }>(db, sql`
      select table_name as t, column_name as c from information_schema.columns
      where table_schema = current_schema() and data_type = 'timestamp with time zone' order by table_name, column_name`);
    tables = new Map();
    for (const { t, c } of cols) tables.set(t, [...(tables.get(t) ?? []), c]);
    columnsOf.set(db, tables);
  }
  const by = sql`make_interval(secs => ${ms / 1000}::float8)`;
  for (const [table, columns] of tables) {
    await db.execute(sql`update ${sql.identifier(table)} set ${sql.join(columns.map((c) => sql`${sql.identifier(c)} = ${sql.identifier(c)} - ${by}`), sql`, `)}`);
  }
}

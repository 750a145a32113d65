import { afterAll, inject } from 'vitest';
import { nanoid } from 'nanoid';
import { databaseOpen } from '../../src/db/open.js';
import type { Database } from '../../src/db/handle.js';
import { adminQuery, withDatabase } from './global-setup.js';

/**
 * `npm run scenario:pgbouncer` sets this to PgBouncer's URL (transaction mode): each file's database is then reached
 * through it, with its direct URL as DATABASE_DIRECT_URL, for this process and the processes it starts.
 */
const POOLER_URL = process.env.DAGENT_TEST_POOLER_URL;

/**
 * A fresh database for this test file, cloned from the migrated template, dropped
 * after the file's tests. Files run in parallel, each on its own database.
 */
export async function testDatabase(opts: { poolSize?: number } = {}): Promise<Database> {
  const adminUrl = inject('adminUrl');
  const name = `${inject('dbPrefix')}${nanoid(8).toLowerCase().replace(/[^a-z0-9]/g, 'x')}`;
  await adminQuery(adminUrl, `create database ${name} template ${inject('templateDb')}`);
  const directUrl = withDatabase(adminUrl, name);
  if (POOLER_URL) {
    await adminQuery(directUrl, `alter role current_user in database ${name} set search_path to dagent`);
    process.env.DATABASE_DIRECT_URL = directUrl;
  }
  const database = await databaseOpen({
    url: POOLER_URL ? withDatabase(POOLER_URL, name) : directUrl, directUrl: POOLER_URL ? directUrl : undefined, migrate: false, poolSize: opts.poolSize ?? 30,
  });
  afterAll(async () => {
    await database.close();
    await adminQuery(adminUrl, `drop database if exists ${name} with (force)`);
  });
  return database;
}


/**
 * Options for another pool on `database`'s database, reached at `url` (default its own; a fault proxy's, say): with
 * its direct URL when it is reached through a pooler (`npm run scenario:pgbouncer`).
 */
export function openOptionsLike(database: Database, url: string = database.url): { url: string; directUrl?: string } {
  return database.sessionUrl !== database.url ? { url, directUrl: database.sessionUrl } : { url };
}

/** How many tables dagent's schema holds once migrated: one per table its schema modules define, and the migration journal. */
export async function dagentTableCount(): Promise<number> {
  const [{ is }, { PgTable }, schema] = await Promise.all([import('drizzle-orm'), import('drizzle-orm/pg-core'), import('../../src/db/schema/index.js')]);
  return Object.values(schema).filter((x) => is(x, PgTable)).length + 1;
}

import pg from 'pg';
import { afterAll, inject } from 'vitest';
import { nanoid } from 'nanoid';
import { databaseOpen, type Database } from '../../src/db/connection.js';
import { withDatabase } from './global-setup.js';

/**
 * A fresh database for this test file, cloned from the migrated template, dropped
 * after the file's tests. Files run in parallel, each on its own database.
 */
export async function testDatabase(opts: { poolSize?: number } = {}): Promise<Database> {
  const adminUrl = inject('adminUrl');
  const name = `${inject('dbPrefix')}${nanoid(8).toLowerCase().replace(/[^a-z0-9]/g, 'x')}`;
  await admin(adminUrl, `create database ${name} template ${inject('templateDb')}`);
  const database = await databaseOpen({ url: withDatabase(adminUrl, name), migrate: false, poolSize: opts.poolSize ?? 30 });
  afterAll(async () => {
    await database.close();
    await admin(adminUrl, `drop database if exists ${name} with (force)`);
  });
  return database;
}

/** The URL of a fresh database (for child processes such as the CLI). */
export async function testDatabaseUrl(): Promise<string> {
  const d = await testDatabase({ poolSize: 2 });
  return d.url;
}

async function admin(url: string, q: string): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query(q);
  } finally {
    await c.end();
  }
}

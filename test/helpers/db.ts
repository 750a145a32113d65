import { afterAll, inject } from 'vitest';
import { nanoid } from 'nanoid';
import { databaseOpen, type Database } from '../../src/db/connection.js';
import { adminQuery, withDatabase } from './global-setup.js';

/**
 * A fresh database for this test file, cloned from the migrated template, dropped
 * after the file's tests. Files run in parallel, each on its own database.
 */
export async function testDatabase(opts: { poolSize?: number } = {}): Promise<Database> {
  const adminUrl = inject('adminUrl');
  const name = `${inject('dbPrefix')}${nanoid(8).toLowerCase().replace(/[^a-z0-9]/g, 'x')}`;
  await adminQuery(adminUrl, `create database ${name} template ${inject('templateDb')}`);
  const database = await databaseOpen({ url: withDatabase(adminUrl, name), migrate: false, poolSize: opts.poolSize ?? 30 });
  afterAll(async () => {
    await database.close();
    await adminQuery(adminUrl, `drop database if exists ${name} with (force)`);
  });
  return database;
}


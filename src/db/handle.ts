import type { NodePgDatabase, NodePgQueryResultHKT } from 'drizzle-orm/node-postgres';
import type { PgDatabase } from 'drizzle-orm/pg-core';
import type pg from 'pg';
import type * as schema from './schema/index.js';

// The published declarations replace this file with db/handle.public.d.ts (opaque handles), so a
// project using dagent never loads drizzle's or pg's types: drizzle's do not compile without skipLibCheck.

/** Anything queries run on: the database handle or a transaction. */
export type Db = PgDatabase<NodePgQueryResultHKT, typeof schema>;

/** An open database: what `databaseOpen` returns. */
export interface Database {
  db: NodePgDatabase<typeof schema>;
  pool: pg.Pool;
  url: string;
  /** Where connections that need a session go (LISTEN): DATABASE_DIRECT_URL behind a pooler, else `url`. */
  sessionUrl: string;
  close(): Promise<void>;
}

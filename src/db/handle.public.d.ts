// What a project using dagent sees of src/db/handle.ts: opaque handles it gets from databaseOpen
// and passes back to dagent's functions. Inside dagent they are drizzle's and pg's objects.
declare const dbBrand: unique symbol;
declare const poolBrand: unique symbol;

/** A database handle or a transaction: `database.db`, passed to dagent's functions. */
export interface Db {
  readonly [dbBrand]: 'dagent database handle';
}

/** dagent's pool of PostgreSQL connections (a node-postgres Pool). */
export interface DatabasePool {
  readonly [poolBrand]: 'dagent connection pool';
  end(): Promise<void>;
}

/** An open database: what `databaseOpen` returns. */
export interface Database {
  db: Db;
  pool: DatabasePool;
  url: string;
  /** Where connections that need a session go (LISTEN): DATABASE_DIRECT_URL behind a pooler, else `url`. */
  sessionUrl: string;
  close(): Promise<void>;
}

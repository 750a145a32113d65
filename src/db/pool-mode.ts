import type { PreparedStatements } from '../config/defaults.js';

/**
 * How a pool's connections may be used, set by databaseOpen and read by the statements that care.
 *
 * Without a pooler, each pooled connection is a PostgreSQL session of its own: a named prepared statement, a
 * session setting or a startup option stays with it. Behind a transaction-mode pooler (PgBouncer with
 * `pool_mode = transaction`; DATABASE_DIRECT_URL set), each transaction, and each statement outside one, may
 * run on another server connection: nothing may rely on session state, and what needs a session (LISTEN,
 * migrations under their advisory lock) goes to the direct URL.
 */
export interface PoolMode {
  /** A transaction-mode pooler sits between this pool and PostgreSQL. */
  pooler: boolean;
  /**
   * Hot-path statements as protocol-level named prepared statements (parsed and planned once per connection), or
   * unnamed ones (parsed on every call). PgBouncer tracks named ones from 1.21 on, with `max_prepared_statements` > 0.
   */
  prepared: PreparedStatements;
}

export type { PreparedStatements };

const DIRECT: PoolMode = { pooler: false, prepared: 'named' };
const modes = new WeakMap<object, PoolMode>();

export function poolModeSet(pool: object, mode: PoolMode): void {
  modes.set(pool, mode);
}

/** A pool databaseOpen did not make (an embedder's own) is taken as direct. */
export function poolModeOf(pool: object): PoolMode {
  return modes.get(pool) ?? DIRECT;
}
